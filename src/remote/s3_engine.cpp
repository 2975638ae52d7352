// The S3 client's engine: one thread drives a curl multi handle, starts attempts (retries
// after a backoff, hedges for slow GETs), checks each answer and completes the request.
#include "remote/s3_engine.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include "remote/s3_url_xml.hpp"
#include "shardpack/detail/error.hpp"
#include "shardpack/detail/regular_file.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack::remote {

struct attempt {
    std::shared_ptr<s3_pending::state> req;
    CURL* easy = nullptr;
    curl_slist* headers = nullptr;
    std::vector<unsigned char> body;
    std::string content_range, etag;
    std::uint64_t content_length = 0;
    bool has_content_length = false;
    bool too_long = false;
    long status = 0;  // of the last status line seen
    bool hedge = false;
    clock_type::time_point start;
    int upload_fd = -1;
    std::uint64_t upload_pos = 0;
    bool upload_changed = false;
    // The XXH3-64 of the file's bytes as they are sent: valid while they were read in order from 0.
    XXH3_state_t upload_hash;
    bool upload_hash_valid = true;
    // Response headers: their bytes so far, and whether the blank line that ends them came.
    std::uint64_t header_bytes = 0;
    bool headers_done = false;
    char errbuf[CURL_ERROR_SIZE] = {0};
};

s3_client::engine::engine(s3_config c) : cfg(std::move(c)) {
    sigv4 = "aws:amz:" + cfg.region + ":s3";
    multi = curl.multi_init();
    share = curl.share_init();
    if (!multi || !share) throw error("libcurl: cannot create a transfer handle");
    curl.share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
    curl.multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, long(cfg.max_connections) + 4);
    thread = std::thread([this] { loop(); });
}

s3_client::engine::~engine() {
    {
        std::lock_guard<std::mutex> lock(m);
        stop = true;
    }
    curl.multi_wakeup(multi);
    thread.join();
    curl.multi_cleanup(multi);
    curl.share_cleanup(share);
}

std::string s3_client::engine::url_of(const request_spec& s) const {
    const std::size_t host_at = cfg.endpoint.find("://") + 3;
    std::string url = cfg.path_style ? cfg.endpoint + "/" + s.bucket
                                     : cfg.endpoint.substr(0, host_at) + s.bucket + "." + cfg.endpoint.substr(host_at);
    if (!s.key.empty()) url += "/" + uri_encode(s.key, true);
    else if (!cfg.path_style) url += "/";
    if (!s.query.empty()) url += "?" + s.query;
    return url;
}

void s3_client::engine::submit(const std::shared_ptr<s3_pending::state>& st) {
    st->begin = clock_type::now();
    {
        std::lock_guard<std::mutex> lock(m);
        if (stop) throw error("s3 client is shutting down");
        incoming.push_back(st);
        ++stats_.requests;
    }
    curl.multi_wakeup(multi);
}

size_t s3_client::engine::on_write(char* data, size_t size, size_t n, void* user) {
    auto* a = static_cast<attempt*>(user);
    const std::size_t bytes = size * n;
    const request_spec& s = a->req->spec;
    // An error answer's body (an S3 XML error) is kept up to 64 KiB whatever was asked for.
    const bool success = a->status >= 200 && a->status < 300;
    const std::uint64_t cap = !success ? 64 * 1024 : s.ranged ? s.length : s.max_body;
    if (!success && a->body.size() + bytes > cap) return bytes;  // the rest of an error page is dropped
    if (a->body.size() + bytes > cap) {
        a->too_long = true;
        return 0;  // aborts the transfer (CURLE_WRITE_ERROR)
    }
    a->body.insert(a->body.end(), reinterpret_cast<unsigned char*>(data), reinterpret_cast<unsigned char*>(data) + bytes);
    return bytes;
}

size_t s3_client::engine::on_header(char* data, size_t size, size_t n, void* user) {
    auto* a = static_cast<attempt*>(user);
    const std::size_t bytes = size * n;
    std::string line(data, bytes);
    const std::size_t colon = line.find(':');
    a->header_bytes += bytes;
    if (line == "\r\n" || line == "\n") a->headers_done = true;
    if (line.rfind("HTTP/", 0) == 0) {  // a new response (after a 100 Continue): forget the old headers
        a->content_range.clear();
        a->etag.clear();
        a->has_content_length = false;
        a->headers_done = false;
        const std::size_t sp = line.find(' ');
        a->status = sp == std::string::npos ? 0 : std::strtol(line.c_str() + sp + 1, nullptr, 10);
    }
    if (colon == std::string::npos) return bytes;
    const std::string name = lower(trim(line.substr(0, colon)));
    const std::string value = trim(line.substr(colon + 1));
    if (name == "content-range") a->content_range = value;
    else if (name == "etag") a->etag = strip_quotes(value);
    else if (name == "content-length") {
        char* end = nullptr;
        a->content_length = std::strtoull(value.c_str(), &end, 10);
        a->has_content_length = end && *end == 0 && !value.empty();
    }
    return bytes;
}

size_t s3_client::engine::on_read(char* dst, size_t size, size_t n, void* user) {
    auto* a = static_cast<attempt*>(user);
    const request_spec& s = a->req->spec;
    const std::size_t room = size * n;
    const std::uint64_t total = s.upload_path.empty() ? s.upload.size() : s.upload_size;
    const std::size_t len = static_cast<std::size_t>(std::min<std::uint64_t>(room, total - a->upload_pos));
    if (len == 0) return 0;
    if (s.upload_path.empty()) {
        std::memcpy(dst, s.upload.data() + a->upload_pos, len);
    } else {
        const ssize_t got = ::pread(a->upload_fd, dst, len, off_t(a->upload_pos));
        if (got <= 0) {
            a->upload_changed = true;
            return CURL_READFUNC_ABORT;
        }
        if (a->upload_hash_valid) XXH3_64bits_update(&a->upload_hash, dst, std::size_t(got));
        a->upload_pos += std::uint64_t(got);
        return std::size_t(got);
    }
    a->upload_pos += len;
    return len;
}

int s3_client::engine::on_seek(void* user, curl_off_t offset, int origin) {
    auto* a = static_cast<attempt*>(user);
    if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
    if (offset == 0) XXH3_64bits_reset(&a->upload_hash), a->upload_hash_valid = true;  // sent again from the start
    else if (std::uint64_t(offset) != a->upload_pos) a->upload_hash_valid = false;
    a->upload_pos = std::uint64_t(offset);
    return CURL_SEEKFUNC_OK;
}

// Starts one attempt of st; false (st failed) when it cannot.
bool s3_client::engine::start_attempt(const std::shared_ptr<s3_pending::state>& st, bool hedge) {
    const request_spec& s = st->spec;
    auto* a = new attempt;
    a->req = st;
    a->hedge = hedge;
    a->start = clock_type::now();
    XXH3_64bits_reset(&a->upload_hash);
    if (!s.upload_path.empty()) {
        struct stat sb {};
        std::string why;
        a->upload_fd = detail::open_regular_file(s.upload_path, sb, why);
        if (a->upload_fd < 0 || std::uint64_t(sb.st_size) != s.upload_size) {
            if (a->upload_fd >= 0) ::close(a->upload_fd);
            delete a;
            finish(st, st->what + ": " + s.upload_path + ": " +
                           (why.empty() ? "changed size since the push began" : why));
            return false;
        }
    }
    CURL* e = curl.easy_init();
    if (!e) {
        if (a->upload_fd >= 0) ::close(a->upload_fd);
        delete a;
        finish(st, st->what + ": libcurl: cannot create a handle");
        return false;
    }
    a->easy = e;
    const std::string url = url_of(s);
    curl.easy_setopt(e, CURLOPT_URL, url.c_str());
    curl.easy_setopt(e, CURLOPT_PRIVATE, a);
    curl.easy_setopt(e, CURLOPT_ERRORBUFFER, a->errbuf);
    curl.easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl.easy_setopt(e, CURLOPT_SHARE, share);
    curl.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl.easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl.easy_setopt(e, CURLOPT_AWS_SIGV4, sigv4.c_str());
    curl.easy_setopt(e, CURLOPT_USERNAME, cfg.access_key.c_str());
    curl.easy_setopt(e, CURLOPT_PASSWORD, cfg.secret_key.c_str());
    curl.easy_setopt(e, CURLOPT_WRITEFUNCTION, &engine::on_write);
    curl.easy_setopt(e, CURLOPT_WRITEDATA, a);
    curl.easy_setopt(e, CURLOPT_HEADERFUNCTION, &engine::on_header);
    curl.easy_setopt(e, CURLOPT_HEADERDATA, a);
    curl.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, long(cfg.connect_timeout_ms));
    std::uint64_t bytes = s.ranged ? s.length : s.upload_path.empty() ? s.upload.size() : s.upload_size;
    const std::uint64_t size_ms = bytes * 1000 / std::max<std::uint64_t>(cfg.min_bytes_per_second, 1);
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(a->start - st->begin).count();
    const std::uint64_t left = std::uint64_t(std::max<long long>(1, cfg.deadline_ms - elapsed));
    curl.easy_setopt(e, CURLOPT_TIMEOUT_MS, long(std::min<std::uint64_t>(std::uint64_t(cfg.attempt_timeout_ms) + size_ms, left)));
    curl.easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl.easy_setopt(e, CURLOPT_LOW_SPEED_TIME, long(std::max(1, cfg.stall_timeout_ms / 1000)));
    curl.easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    // No "Expect:" override here: curl 7.88 signs every header it is given, also the empty
    // ones it then does not send, and the server's signature would differ.
    curl.easy_setopt(e, CURLOPT_EXPECT_100_TIMEOUT_MS, 300L);
    if (!cfg.session_token.empty())
        a->headers = curl.slist_append(a->headers, ("x-amz-security-token: " + cfg.session_token).c_str());
    if (s.ranged) {
        const std::string range = std::to_string(s.offset) + "-" + std::to_string(s.offset + s.length - 1);
        curl.easy_setopt(e, CURLOPT_RANGE, range.c_str());
        a->body.reserve(static_cast<std::size_t>(s.length));
    }
    switch (s.method) {
        case verb::get: break;
        case verb::head: curl.easy_setopt(e, CURLOPT_NOBODY, 1L); break;
        case verb::del: curl.easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE"); break;
        case verb::put:
            curl.easy_setopt(e, CURLOPT_UPLOAD, 1L);
            curl.easy_setopt(e, CURLOPT_READFUNCTION, &engine::on_read);
            curl.easy_setopt(e, CURLOPT_READDATA, a);
            curl.easy_setopt(e, CURLOPT_SEEKFUNCTION, &engine::on_seek);
            curl.easy_setopt(e, CURLOPT_SEEKDATA, a);
            curl.easy_setopt(e, CURLOPT_INFILESIZE_LARGE, curl_off_t(bytes));
            break;
    }
    curl.easy_setopt(e, CURLOPT_HTTPHEADER, a->headers);
    curl.multi_add_handle(multi, e);
    running.push_back(a);
    st->live.push_back(a);
    ++st->started;
    if (!hedge) ++st->retries_started;
    if (s.method == verb::get) ++gets_started;
    if (hedge) ++hedges_started;
    {
        std::lock_guard<std::mutex> lock(m);
        ++stats_.attempts;
        if (s.method == verb::get) ++stats_.gets;
        if (hedge) ++stats_.hedges;
        if (!hedge && st->retries_started > 1) ++stats_.retries;
    }
    return true;
}

void s3_client::engine::drop_attempt(attempt* a) {
    curl.multi_remove_handle(multi, a->easy);
    curl.easy_cleanup(a->easy);
    curl.slist_free_all(a->headers);
    if (a->upload_fd >= 0) ::close(a->upload_fd);
    running.erase(std::remove(running.begin(), running.end(), a), running.end());
    auto& live = a->req->live;
    live.erase(std::remove(live.begin(), live.end(), a), live.end());
    delete a;
}

// Completes st (failed when `failure` is not empty), cancelling its other attempts.
void s3_client::engine::finish(const std::shared_ptr<s3_pending::state>& st, const std::string& failure) {
    while (!st->live.empty()) drop_attempt(st->live.back());
    std::lock_guard<std::mutex> lock(st->m);
    st->done = true;
    st->failure = failure;
    st->cv.notify_all();
}

double s3_client::engine::hedge_after_ms(std::uint64_t bytes) const {
    if (cfg.hedge_percentile <= 0) return std::numeric_limits<double>::infinity();
    const double scale = 1.0 + double(bytes) / double(1 << 20);
    if (durations.size() < 20) return std::max(double(cfg.hedge_min_ms), 1000.0) * scale;
    std::vector<double> d = durations;
    const std::size_t k = std::min(d.size() - 1, std::size_t(double(d.size()) * cfg.hedge_percentile));
    std::nth_element(d.begin(), d.begin() + std::ptrdiff_t(k), d.end());
    return std::max(double(cfg.hedge_min_ms), d[k] * scale);
}

void s3_client::engine::record_duration(double ms, std::uint64_t bytes) {
    const double v = ms / (1.0 + double(bytes) / double(1 << 20));
    if (durations.size() < 256) durations.push_back(v);
    else durations[duration_next++ % 256] = v;
}

// An attempt ended: evaluate it.
void s3_client::engine::complete(attempt* a, CURLcode code) {
    std::shared_ptr<s3_pending::state> st = a->req;
    const request_spec& s = st->spec;
    long status = 0;
    curl.easy_getinfo(a->easy, CURLINFO_RESPONSE_CODE, &status);
    std::string problem;
    bool retry = true;
    bool ok = false;
    if (code != CURLE_OK) {
        if (a->too_long)
            problem = s.ranged ? "the body is longer than the " + std::to_string(s.length) + " bytes asked for"
                               : "larger than " + std::to_string(s.max_body) + " bytes";
        else if (a->upload_changed)
            problem = s.upload_path + ": cannot be read to the end (changed during the upload?)", retry = false;
        else if (code == CURLE_OUT_OF_MEMORY && !a->errbuf[0] && !a->headers_done)
            // libcurl keeps a response header line in a buffer of at most CURL_MAX_HTTP_HEADER
            // bytes and fails with "Out of memory", saying nothing more, when one is longer.
            problem = "the response has a header line longer than libcurl accepts (" +
                      std::to_string(CURL_MAX_HTTP_HEADER / 1024) + " KiB, CURL_MAX_HTTP_HEADER; " +
                      std::to_string(a->header_bytes) + " bytes of headers came before it)",
            retry = false;
        else if (std::strncmp(a->errbuf, "Too large response headers", 26) == 0)
            // ... and all of a response's header lines in at most 300 KiB (since curl 8.3, and
            // in Debian's 7.88.1 since its fix of CVE-2023-38039).
            problem = "the response's headers are larger than libcurl accepts (300 KiB in all): curl: " + std::string(a->errbuf),
            retry = false;
        else
            problem = std::string("curl: ") + (a->errbuf[0] ? a->errbuf : curl.easy_strerror(code));
        if (a->too_long && !s.ranged) retry = false;
        if (code == CURLE_PARTIAL_FILE) problem = "truncated body (" + problem + ")";
    } else if (status == 404 && s.allow_404) {
        ok = true;
    } else if (status >= 500 || status == 429 || status == 408) {
        const std::string why = s3_error_text(a->body);
        problem = "HTTP " + std::to_string(status) + (why.empty() ? "" : " " + why);
    } else if (status >= 300 && !(s.bucket_create && status == 409)) {
        const std::string why = s3_error_text(a->body);
        problem = "HTTP " + std::to_string(status) + (why.empty() ? "" : " " + why);
        retry = false;
    } else if (s.ranged) {
        const std::string expect = "bytes " + std::to_string(s.offset) + "-" + std::to_string(s.offset + s.length - 1) + "/";
        if (status != 206) {
            problem = "HTTP " + std::to_string(status) + " to a ranged GET (206 expected)";
        } else if (a->content_range.rfind(expect, 0) != 0 ||
                   (s.object_size && a->content_range != expect + std::to_string(s.object_size))) {
            problem = "wrong Content-Range \"" + a->content_range + "\" (asked for " + expect +
                      (s.object_size ? std::to_string(s.object_size) : "*") + ")";
        } else if (a->body.size() != s.length) {
            problem = "truncated body: " + std::to_string(a->body.size()) + " of " + std::to_string(s.length) + " bytes";
        } else {
            ok = true;
        }
    } else if (s.method == verb::get && a->has_content_length && a->body.size() != a->content_length) {
        problem = "truncated body: " + std::to_string(a->body.size()) + " of " + std::to_string(a->content_length) + " bytes";
    } else {
        ok = true;
    }
    const double ms = std::chrono::duration<double, std::milli>(clock_type::now() - a->start).count();
    if (ok) {
        if (s.method == verb::get && status != 404) record_duration(ms, a->body.size());
        {
            std::lock_guard<std::mutex> lock(m);
            if (s.method == verb::get) stats_.bytes_received += a->body.size();
            if (s.method == verb::put) stats_.bytes_sent += s.upload_path.empty() ? s.upload.size() : s.upload_size;
            if (a->hedge) ++stats_.hedge_wins;
        }
        {
            std::lock_guard<std::mutex> lock(st->m);
            st->found = status != 404;
            st->body = std::move(a->body);
            st->etag = a->etag;
            st->content_length = a->has_content_length ? a->content_length : 0;
            st->sent_hash_known = !s.upload_path.empty() && a->upload_hash_valid && a->upload_pos == s.upload_size;
            st->sent_hash = XXH3_64bits_digest(&a->upload_hash);
        }
        finish(st, {});
        return;
    }
    st->last_failure = problem;
    drop_attempt(a);
    if (!st->live.empty()) return;  // a hedge or the original is still running
    const auto now = clock_type::now();
    const double elapsed = std::chrono::duration<double, std::milli>(now - st->begin).count();
    if (!retry || st->retries_started >= cfg.max_attempts || elapsed >= cfg.deadline_ms) {
        std::string why = retry ? (elapsed >= cfg.deadline_ms ? " (gave up after " + std::to_string(int(elapsed)) + " ms, the limit)"
                                                               : "")
                                : "";
        finish(st, st->what + ": " + problem + " (" + std::to_string(st->started) + " attempt" +
                       (st->started == 1 ? "" : "s") + ")" + why);
        return;
    }
    const int exp = std::min(st->retries_started - 1, 16);
    const double cap = std::min<double>(cfg.backoff_max_ms, double(cfg.backoff_base_ms) * double(1 << exp));
    std::uniform_real_distribution<double> jitter(0.5, 1.0);
    double wait = cap * jitter(rng);
    if (elapsed + wait >= cfg.deadline_ms) wait = std::max(0.0, cfg.deadline_ms - elapsed - 1);
    st->retry_at = now + std::chrono::microseconds(static_cast<long long>(wait * 1000));
    waiting.push_back(st);
}

void s3_client::engine::loop() {
    for (;;) {
        {
            std::lock_guard<std::mutex> lock(m);
            if (stop) break;
            while (!incoming.empty()) {
                ready.push_back(std::move(incoming.front()));
                incoming.pop_front();
            }
        }
        const auto now = clock_type::now();
        // Backoffs that are over.
        for (std::size_t i = 0; i < waiting.size();) {
            if (waiting[i]->retry_at <= now) {
                ready.push_back(waiting[i]);
                waiting[i] = waiting.back();
                waiting.pop_back();
            } else {
                ++i;
            }
        }
        while (!ready.empty() && int(running.size()) < cfg.max_connections) {
            auto st = ready.front();
            ready.pop_front();
            start_attempt(st, false);
        }
        // Hedges for slow GETs, and the deadline of every request.
        std::vector<std::shared_ptr<s3_pending::state>> late;
        for (attempt* a : running) {
            const auto& st = a->req;
            const double since = std::chrono::duration<double, std::milli>(now - st->begin).count();
            if (since > cfg.deadline_ms + 1000) late.push_back(st);
        }
        for (auto& st : late)
            if (!st->live.empty())
                finish(st, st->what + ": no complete answer within " + std::to_string(cfg.deadline_ms) + " ms (" +
                               std::to_string(st->started) + " attempts; last: " +
                               (st->last_failure.empty() ? "still running" : st->last_failure) + ")");
        if (cfg.hedge_percentile > 0) {
            std::vector<std::shared_ptr<s3_pending::state>> to_hedge;
            for (attempt* a : running) {
                const auto& st = a->req;
                if (st->spec.method != verb::get || st->hedged || st->live.size() != 1) continue;
                const double ms = std::chrono::duration<double, std::milli>(now - a->start).count();
                if (ms > hedge_after_ms(st->spec.ranged ? st->spec.length : 0) &&
                    double(hedges_started) < 2.0 + cfg.hedge_budget * double(gets_started))
                    to_hedge.push_back(st);
            }
            for (auto& st : to_hedge) {
                st->hedged = true;
                start_attempt(st, true);
            }
        }
        int still = 0;
        curl.multi_perform(multi, &still);
        int queued = 0;
        while (CURLMsg* msg = curl.multi_info_read(multi, &queued)) {
            if (msg->msg != CURLMSG_DONE) continue;
            attempt* a = nullptr;
            curl.easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &a);
            if (a) complete(a, msg->data.result);
        }
        int timeout = 20;
        if (!ready.empty() && int(running.size()) < cfg.max_connections) timeout = 0;
        for (auto& st : waiting) {
            const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(st->retry_at - clock_type::now()).count();
            timeout = int(std::max<long long>(0, std::min<long long>(timeout, ms)));
        }
        curl.multi_poll(multi, nullptr, 0, timeout, nullptr);
    }
    // Shutting down: whatever is left fails.
    while (!running.empty()) {
        auto st = running.back()->req;
        finish(st, st->what + ": the client was closed");
    }
    for (auto& st : ready) finish(st, st->what + ": the client was closed");
    for (auto& st : waiting) finish(st, st->what + ": the client was closed");
    std::lock_guard<std::mutex> lock(m);
    for (auto& st : incoming) {
        std::lock_guard<std::mutex> l2(st->m);
        st->done = true;
        st->failure = st->what + ": the client was closed";
        st->cv.notify_all();
    }
}

bool s3_pending::ready() const {
    std::lock_guard<std::mutex> lock(state_->m);
    return state_->done;
}

bool s3_pending::sent_xxh3(std::uint64_t& hash) const {
    std::lock_guard<std::mutex> lock(state_->m);
    hash = state_->sent_hash;
    return state_->done && state_->failure.empty() && state_->sent_hash_known;
}

const std::vector<unsigned char>& s3_pending::wait() const {
    std::unique_lock<std::mutex> lock(state_->m);
    state_->cv.wait(lock, [&] { return state_->done; });
    if (!state_->failure.empty()) throw error(state_->failure);
    return state_->body;
}

s3_client::s3_client(s3_config config) : engine_(std::make_unique<engine>(std::move(config))) {}
s3_client::~s3_client() {
    if (engine_ && engine_->pid != ::getpid()) (void)engine_.release();  // a fork's copy: its thread is not here
}

s3_client::engine& s3_client::eng() const {
    if (engine_->pid != ::getpid()) {
        static std::mutex m;
        std::lock_guard<std::mutex> lock(m);
        auto& self = const_cast<std::unique_ptr<engine>&>(engine_);
        if (self->pid != ::getpid()) {
            s3_config c = self->cfg;
            (void)self.release();  // the parent's engine, copied by fork: never used or freed here
            self = std::make_unique<engine>(std::move(c));
        }
    }
    return *engine_;
}

const s3_config& s3_client::config() const { return eng().cfg; }

s3_stats s3_client::stats() const {
    std::lock_guard<std::mutex> lock(eng().m);
    return eng().stats_;
}

}  // namespace shardpack::remote
