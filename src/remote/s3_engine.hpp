// The S3 client's engine, shared by its files: the requests it runs (request_spec, the state
// of a pending one) and the engine itself (one thread, one curl multi handle), whose bodies are
// in s3_engine.cpp. Private to src/remote/'s S3 files.
#pragma once
#include <curl/curl.h>  // types and constants; the functions come from curl_library()
#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "remote/curl_library.hpp"
#include "remote/s3_client.hpp"

namespace shardpack::remote {

using clock_type = std::chrono::steady_clock;

enum class verb { get, put, del, head };

struct request_spec {
    verb method = verb::get;
    std::string bucket, key, query;
    bool ranged = false;
    std::uint64_t offset = 0, length = 0, object_size = 0;
    std::uint64_t max_body = std::numeric_limits<std::uint64_t>::max();
    std::vector<unsigned char> upload;
    std::string upload_path;
    std::uint64_t upload_size = 0;
    bool allow_404 = false;
    bool bucket_create = false;  // PUT /bucket: 409 BucketAlreadyOwnedByYou is success
};

struct attempt;

struct s3_pending::state {
    request_spec spec;
    std::string what;  // "GET s3://b/k bytes a-b" for messages

    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    std::string failure;  // set when done and failed
    std::vector<unsigned char> body;
    bool found = true;
    std::string etag;
    std::uint64_t content_length = 0;
    bool sent_hash_known = false;  // a file upload read in one pass: sent_hash is its XXH3-64
    std::uint64_t sent_hash = 0;

    // Engine thread only:
    int started = 0;            // attempts started (hedges included)
    int retries_started = 0;    // non-hedge attempts
    std::vector<attempt*> live;
    clock_type::time_point begin, retry_at;
    bool hedged = false;
    std::string last_failure;
};

struct s3_client::engine {
    // libcurl, loaded by the first engine of the process (throws when it cannot be).
    const curl_functions& curl = curl_library();
    s3_config cfg;
    std::string sigv4;  // "aws:amz:REGION:s3"
    CURLM* multi = nullptr;
    CURLSH* share = nullptr;
    std::thread thread;
    std::mutex m;  // guards incoming, stop, stats_
    std::deque<std::shared_ptr<s3_pending::state>> incoming;
    bool stop = false;
    s3_stats stats_;

    // Engine thread only:
    std::deque<std::shared_ptr<s3_pending::state>> ready;
    std::vector<std::shared_ptr<s3_pending::state>> waiting;  // backing off
    std::vector<attempt*> running;
    std::vector<double> durations;  // recent GET times, ms per (1 + MiB)
    std::size_t duration_next = 0;
    std::uint64_t gets_started = 0, hedges_started = 0;
    std::mt19937_64 rng{std::random_device{}()};

    pid_t pid = ::getpid();

    explicit engine(s3_config c);
    ~engine();
    // The URL of a request, path-style or virtual-hosted as cfg says.
    std::string url_of(const request_spec& s) const;
    // Hands a request to the engine's thread (any thread).
    void submit(const std::shared_ptr<s3_pending::state>& st);

    // Engine thread only:
    static size_t on_write(char* data, size_t size, size_t n, void* user);
    static size_t on_header(char* data, size_t size, size_t n, void* user);
    static size_t on_read(char* dst, size_t size, size_t n, void* user);
    static int on_seek(void* user, curl_off_t offset, int origin);
    bool start_attempt(const std::shared_ptr<s3_pending::state>& st, bool hedge);
    void drop_attempt(attempt* a);
    void finish(const std::shared_ptr<s3_pending::state>& st, const std::string& failure);
    double hedge_after_ms(std::uint64_t bytes) const;
    void record_duration(double ms, std::uint64_t bytes);
    void complete(attempt* a, CURLcode code);
    void loop();
};

}  // namespace shardpack::remote
