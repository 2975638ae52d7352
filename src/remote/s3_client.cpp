// The S3 client's verbs: each makes a request for the engine (s3_engine.cpp) and, for the
// blocking ones, waits for it.
#include "remote/s3_client.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include "remote/s3_engine.hpp"
#include "remote/s3_url_xml.hpp"
#include "shardpack/detail/error.hpp"
#include "shardpack/detail/regular_file.hpp"

namespace shardpack::remote {

std::string s3_client::object_url(const std::string& bucket, const std::string& key) const {
    return "s3://" + bucket + "/" + key;
}

namespace {
std::shared_ptr<s3_pending::state> make_state(request_spec spec, const std::string& what) {
    auto st = std::make_shared<s3_pending::state>();
    st->spec = std::move(spec);
    st->what = what;
    return st;
}
}  // namespace

s3_pending s3_client::get_range_async(const std::string& bucket, const std::string& key, std::uint64_t offset,
                                      std::uint64_t length, std::uint64_t object_size) {
    if (length == 0) throw error(object_url(bucket, key) + ": a ranged GET of 0 bytes");
    if (object_size && (offset > object_size || length > object_size - offset))
        throw error(object_url(bucket, key) + ": bytes " + std::to_string(offset) + "+" + std::to_string(length) +
                    " lie past the end (" + std::to_string(object_size) + " bytes)");
    request_spec s;
    s.bucket = bucket;
    s.key = key;
    s.ranged = true;
    s.offset = offset;
    s.length = length;
    s.object_size = object_size;
    s3_pending p;
    p.state_ = make_state(std::move(s), "GET " + object_url(bucket, key) + " bytes " + std::to_string(offset) + "-" +
                                            std::to_string(offset + length - 1));
    eng().submit(p.state_);
    return p;
}

std::vector<unsigned char> s3_client::get_range(const std::string& bucket, const std::string& key, std::uint64_t offset,
                                                std::uint64_t length, std::uint64_t object_size) {
    s3_pending p = get_range_async(bucket, key, offset, length, object_size);
    p.wait();
    std::lock_guard<std::mutex> lock(p.state_->m);
    return std::move(p.state_->body);
}

std::vector<unsigned char> s3_client::get_object(const std::string& bucket, const std::string& key, std::uint64_t max_bytes,
                                                 bool* found, std::string* etag) {
    request_spec s;
    s.bucket = bucket;
    s.key = key;
    s.max_body = max_bytes;
    s.allow_404 = found != nullptr;
    s3_pending p;
    p.state_ = make_state(std::move(s), "GET " + object_url(bucket, key));
    eng().submit(p.state_);
    p.wait();
    std::lock_guard<std::mutex> lock(p.state_->m);
    if (found) *found = p.state_->found;
    if (etag) *etag = p.state_->etag;
    if (!p.state_->found) return {};
    return std::move(p.state_->body);
}

s3_object_info s3_client::head_object(const std::string& bucket, const std::string& key, bool* found) {
    request_spec s;
    s.method = verb::head;
    s.bucket = bucket;
    s.key = key;
    s.allow_404 = true;
    s3_pending p;
    p.state_ = make_state(std::move(s), "HEAD " + object_url(bucket, key));
    eng().submit(p.state_);
    p.wait();
    std::lock_guard<std::mutex> lock(p.state_->m);
    *found = p.state_->found;
    return {key, p.state_->content_length, p.state_->etag};
}

s3_pending s3_client::put_object_async(const std::string& bucket, const std::string& key, std::vector<unsigned char> body) {
    request_spec s;
    s.method = verb::put;
    s.bucket = bucket;
    s.key = key;
    s.upload = std::move(body);
    s3_pending p;
    p.state_ = make_state(std::move(s), "PUT " + object_url(bucket, key));
    eng().submit(p.state_);
    return p;
}

s3_pending s3_client::put_file_async(const std::string& bucket, const std::string& key, const std::string& path) {
    struct stat sb {};
    std::string why;
    const int fd = detail::open_regular_file(path, sb, why);
    if (fd < 0) throw error(path + ": " + why);
    ::close(fd);
    // One PUT holds at most 5 GiB on S3; shardpack's writer cuts shards far smaller.
    if (std::uint64_t(sb.st_size) > (std::uint64_t(5) << 30))
        throw error(path + ": " + std::to_string(sb.st_size) + " bytes, more than one S3 PUT takes (5 GiB)");
    request_spec s;
    s.method = verb::put;
    s.bucket = bucket;
    s.key = key;
    s.upload_path = path;
    s.upload_size = std::uint64_t(sb.st_size);
    s3_pending p;
    p.state_ = make_state(std::move(s), "PUT " + object_url(bucket, key));
    eng().submit(p.state_);
    return p;
}

void s3_client::put_object(const std::string& bucket, const std::string& key, std::vector<unsigned char> body) {
    put_object_async(bucket, key, std::move(body)).wait();
}

void s3_client::delete_object(const std::string& bucket, const std::string& key) {
    request_spec s;
    s.method = verb::del;
    s.bucket = bucket;
    s.key = key;
    s.allow_404 = true;
    s3_pending p;
    p.state_ = make_state(std::move(s), "DELETE " + object_url(bucket, key));
    eng().submit(p.state_);
    p.wait();
}

void s3_client::create_bucket(const std::string& bucket) {
    request_spec s;
    s.method = verb::put;
    s.bucket = bucket;
    s.bucket_create = true;
    s3_pending p;
    p.state_ = make_state(std::move(s), "PUT s3://" + bucket + " (create bucket)");
    eng().submit(p.state_);
    p.wait();
}

std::vector<s3_object_info> s3_client::list_objects(const std::string& bucket, const std::string& prefix,
                                                    std::size_t max_keys) {
    std::vector<s3_object_info> out;
    std::string token;
    for (int page = 0;; ++page) {
        if (page > 100000) throw error("LIST s3://" + bucket + "/" + prefix + ": more than 100000 pages");
        request_spec s;
        s.bucket = bucket;
        s.max_body = 64 << 20;
        // SigV4 wants the query's parameters sorted by name, each encoded.
        if (!token.empty()) s.query = "continuation-token=" + uri_encode(token, false) + "&";
        s.query += "list-type=2&prefix=" + uri_encode(prefix, false);
        s3_pending p;
        p.state_ = make_state(std::move(s), "LIST s3://" + bucket + "/" + prefix);
        eng().submit(p.state_);
        const std::vector<unsigned char>& body = p.wait();
        const std::string xml(body.begin(), body.end());
        std::size_t at = 0;
        std::string contents;
        while (xml_element(xml, "Contents", at, contents, &at)) {
            s3_object_info info;
            std::string size;
            if (!xml_element(contents, "Key", 0, info.key) || !xml_element(contents, "Size", 0, size))
                throw error("LIST s3://" + bucket + "/" + prefix + ": an entry without Key or Size");
            info.size = std::strtoull(size.c_str(), nullptr, 10);
            xml_element(contents, "ETag", 0, info.etag);
            info.etag = strip_quotes(info.etag);
            out.push_back(std::move(info));
            if (out.size() > max_keys)
                throw error("LIST s3://" + bucket + "/" + prefix + ": more than " + std::to_string(max_keys) + " objects");
        }
        std::string truncated;
        xml_element(xml, "IsTruncated", 0, truncated);
        if (truncated != "true") break;
        std::string next;
        if (!xml_element(xml, "NextContinuationToken", 0, next) || next.empty() || next == token)
            throw error("LIST s3://" + bucket + "/" + prefix + ": a truncated page without a new continuation token");
        token = next;
    }
    return out;
}

std::shared_ptr<s3_client> shared_client() {
    static std::mutex m;
    static std::shared_ptr<s3_client> client;
    // The environment is read at every call (a few getenv and small files): a process that
    // points AWS_ENDPOINT_URL or the keys elsewhere gets a client for the new settings.
    s3_config want = s3_config::from_environment();
    std::lock_guard<std::mutex> lock(m);
    if (client) {
        const s3_config& have = client->config();
        if (have.endpoint != want.endpoint || have.region != want.region || have.access_key != want.access_key ||
            have.secret_key != want.secret_key || have.session_token != want.session_token ||
            have.max_attempts != want.max_attempts || have.deadline_ms != want.deadline_ms ||
            have.attempt_timeout_ms != want.attempt_timeout_ms || have.max_connections != want.max_connections ||
            have.hedge_percentile != want.hedge_percentile || have.hedge_min_ms != want.hedge_min_ms ||
            have.hedge_budget != want.hedge_budget)
            client.reset();
    }
    if (!client) client = std::make_shared<s3_client>(std::move(want));
    return client;
}

}  // namespace shardpack::remote
