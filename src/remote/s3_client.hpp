// An S3 client on libcurl: SigV4-signed GET (whole or ranged), PUT, DELETE and LIST against AWS
// S3 or any S3-compatible server (SeaweedFS, MinIO, Ceph), for `shardpack push` and for reading
// datasets from object storage (s3_storage.hpp).
//
// Requests run concurrently on one background thread driving a curl multi handle. Every
// request is bounded in time and in attempts:
//   - 5xx answers (503 SlowDown included), 429, connection failures, stalls, timeouts, and
//     answers whose body is not what was asked (a ranged GET whose Content-Range or length
//     differs, a body cut short) are retried, after an exponential backoff with jitter, up to
//     max_attempts attempts and within deadline_ms in all;
//   - other 4xx answers (403 wrong key, 404 missing object) fail at once;
//   - a GET still running after the hedge percentile of recent GET times (p95 by default, at
//     least hedge_min_ms) gets a hedged duplicate; the first complete, checked answer wins and
//     the other is cancelled. Hedges are capped at hedge_budget of all GETs.
// A failed request throws shardpack::error naming the object (s3://bucket/key), the range, the
// last status or curl error and the attempt count.
//
// Credentials and endpoint come from the environment like the AWS CLI's: AWS_ACCESS_KEY_ID,
// AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, AWS_REGION (or AWS_DEFAULT_REGION),
// AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL, else the profile AWS_PROFILE (default "default") of
// ~/.aws/credentials (AWS_SHARED_CREDENTIALS_FILE) and ~/.aws/config (AWS_CONFIG_FILE). A custom
// endpoint is addressed path-style (http://host:port/bucket/key); AWS itself virtual-hosted
// (https://bucket.s3.REGION.amazonaws.com/key). Limits can be set with SHARDPACK_S3_* variables
// (see s3_config::from_environment).
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace shardpack::remote {

// s3://bucket/prefix, split. The prefix has no leading or trailing '/' (may be empty).
struct s3_location {
    std::string bucket;
    std::string prefix;
    // The key of `name` under the prefix.
    std::string key(const std::string& name) const { return prefix.empty() ? name : prefix + "/" + name; }
    std::string url() const { return "s3://" + bucket + (prefix.empty() ? "" : "/" + prefix); }
    std::string url(const std::string& name) const { return "s3://" + bucket + "/" + key(name); }
};

bool is_s3_url(const std::string& text);
// Throws shardpack::error for anything but s3://BUCKET[/PREFIX] with a valid bucket name.
s3_location parse_s3_url(const std::string& text);

struct s3_config {
    std::string endpoint;  // scheme://host[:port], no trailing '/'
    std::string region = "us-east-1";
    bool path_style = true;  // false: virtual-hosted (AWS)
    std::string access_key, secret_key, session_token;
    // Where the settings came from, for messages ("environment", "profile default of ...").
    std::string credentials_source;

    int max_attempts = 5;                 // per request, hedges not counted
    int connect_timeout_ms = 3000;
    int attempt_timeout_ms = 20000;       // one attempt, plus the time its size needs at min_bytes_per_second
    std::uint64_t min_bytes_per_second = 1 << 20;
    int stall_timeout_ms = 5000;          // an attempt that receives nothing this long is cut
    int deadline_ms = 60000;              // a request, all attempts and backoffs together
    int backoff_base_ms = 50, backoff_max_ms = 2000;
    int max_connections = 16;             // requests in flight at once
    double hedge_percentile = 0.95;       // of recent GET durations; 0 turns hedging off
    int hedge_min_ms = 50;
    double hedge_budget = 0.05;           // hedges at most this fraction of GETs (plus a few)

    // AWS_* and SHARDPACK_S3_* variables and the profile files, as described above. Throws
    // shardpack::error when no credentials are found or a setting is malformed.
    static s3_config from_environment();
};

struct s3_object_info {
    std::string key;
    std::uint64_t size = 0;
    std::string etag;
};

// Counters over the client's life (for benchmarks and tests).
struct s3_stats {
    std::uint64_t requests = 0;       // logical requests
    std::uint64_t attempts = 0;       // HTTP requests sent, retries and hedges included
    std::uint64_t gets = 0;           // GET attempts (ranged or whole)
    std::uint64_t retries = 0;
    std::uint64_t hedges = 0;
    std::uint64_t hedge_wins = 0;
    std::uint64_t bytes_received = 0;  // bodies of successful GETs
    std::uint64_t bytes_sent = 0;
};

class s3_client;

// A request in flight. wait() blocks until it completes and returns its body, or throws its
// error. Dropping the handle does not cancel the request (it completes in the background).
class s3_pending {
public:
    s3_pending() = default;
    bool valid() const { return state_ != nullptr; }
    bool ready() const;
    // The body (a ranged GET: exactly the range; PUT/DELETE: empty).
    const std::vector<unsigned char>& wait() const;
    // After wait(), for put_file_async: the XXH3-64 of the bytes the PUT that succeeded sent,
    // hashed as they were read from the file (so a file changed since it was checked is seen).
    // False when not known (another request, or the upload was not read in one pass).
    bool sent_xxh3(std::uint64_t& hash) const;
    struct state;

private:
    friend class s3_client;
    std::shared_ptr<state> state_;
};

class s3_client {
public:
    explicit s3_client(s3_config config);
    ~s3_client();
    s3_client(const s3_client&) = delete;
    s3_client& operator=(const s3_client&) = delete;

    const s3_config& config() const;

    // Bytes [offset, offset + length) of an object of `object_size` bytes (0: unknown, not
    // checked). The answer must be 206 with exactly this Content-Range and length.
    s3_pending get_range_async(const std::string& bucket, const std::string& key, std::uint64_t offset,
                               std::uint64_t length, std::uint64_t object_size = 0);
    std::vector<unsigned char> get_range(const std::string& bucket, const std::string& key, std::uint64_t offset,
                                         std::uint64_t length, std::uint64_t object_size = 0);
    // A whole object of at most max_bytes bytes; found = false (and empty) when it does not exist.
    std::vector<unsigned char> get_object(const std::string& bucket, const std::string& key, std::uint64_t max_bytes,
                                          bool* found = nullptr, std::string* etag = nullptr);
    // The object's size and ETag, or found = false.
    s3_object_info head_object(const std::string& bucket, const std::string& key, bool* found);
    // Uploads bytes (copied) or a local file (read when sent, checked to keep its size, and
    // hashed: s3_pending::sent_xxh3).
    s3_pending put_object_async(const std::string& bucket, const std::string& key, std::vector<unsigned char> body);
    s3_pending put_file_async(const std::string& bucket, const std::string& key, const std::string& path);
    void put_object(const std::string& bucket, const std::string& key, std::vector<unsigned char> body);
    // Removes an object (absent already: fine).
    void delete_object(const std::string& bucket, const std::string& key);
    // Every object whose key starts with `prefix` (ListObjectsV2, all pages, at most max_keys).
    std::vector<s3_object_info> list_objects(const std::string& bucket, const std::string& prefix,
                                             std::size_t max_keys = 1000000);
    // Creates a bucket (for tests and first pushes to a fresh server); an existing one is fine.
    void create_bucket(const std::string& bucket);

    s3_stats stats() const;
    std::string object_url(const std::string& bucket, const std::string& key) const;

    struct engine;

private:
    std::unique_ptr<engine> engine_;
    // The engine of this process: after a fork (DataLoader workers) the child has no engine
    // thread, so it gets a new engine (the parent's copy is left alone, never touched).
    engine& eng() const;
};

// The client of a process for the current environment: made on first use and shared (one
// connection pool, one background thread). Throws when the environment has no credentials.
std::shared_ptr<s3_client> shared_client();

// URI-encodes `text` as SigV4 wants it (unreserved characters kept; '/' kept when keep_slash).
std::string uri_encode(const std::string& text, bool keep_slash);

}  // namespace shardpack::remote
