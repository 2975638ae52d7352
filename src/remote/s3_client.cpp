#include "remote/s3_client.hpp"

#include <curl/curl.h>  // types and constants; the functions come from curl_library()
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "remote/curl_library.hpp"
#include "shardpack/detail/error.hpp"
#include "shardpack/detail/regular_file.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack::remote {

using clock_type = std::chrono::steady_clock;

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

std::string trim(const std::string& s) {
    std::size_t a = 0, b = s.size();
    while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
    while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
    return s.substr(a, b - a);
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// The sections of an AWS ini file: section name -> key -> value. Unreadable or missing: empty.
std::map<std::string, std::map<std::string, std::string>> read_ini(const std::string& path) {
    std::map<std::string, std::map<std::string, std::string>> out;
    std::string text;
    try {
        text = detail::read_regular_file(path, 1 << 20);
    } catch (const error&) {
        return out;
    }
    std::string section;
    std::size_t at = 0;
    while (at < text.size()) {
        std::size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        std::string line = trim(text.substr(at, end - at));
        at = end + 1;
        if (line.empty() || line[0] == '#' || line[0] == ';') continue;
        if (line.front() == '[' && line.back() == ']') {
            section = trim(line.substr(1, line.size() - 2));
            continue;
        }
        const std::size_t eq = line.find('=');
        if (eq == std::string::npos) continue;
        out[section][lower(trim(line.substr(0, eq)))] = trim(line.substr(eq + 1));
    }
    return out;
}

int env_int(const char* name, int fallback, int lo, int hi) {
    const std::string v = env(name);
    if (v.empty()) return fallback;
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    if (!end || *end || n < lo || n > hi)
        throw error(std::string(name) + "=" + v + ": expected a whole number from " + std::to_string(lo) + " to " +
                    std::to_string(hi));
    return int(n);
}

double env_double(const char* name, double fallback, double lo, double hi) {
    const std::string v = env(name);
    if (v.empty()) return fallback;
    char* end = nullptr;
    const double n = std::strtod(v.c_str(), &end);
    if (!end || *end || !(n >= lo && n <= hi))
        throw error(std::string(name) + "=" + v + ": expected a number from " + std::to_string(lo) + " to " +
                    std::to_string(hi));
    return n;
}

bool valid_bucket_name(const std::string& b) {
    if (b.size() < 3 || b.size() > 63) return false;
    for (char c : b)
        if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
              c == '.'))
            return false;
    return std::isalnum(static_cast<unsigned char>(b.front())) && std::isalnum(static_cast<unsigned char>(b.back()));
}

// The text of the first <tag>...</tag> at or after `from`, entities decoded; `next` is set past it.
bool xml_element(const std::string& xml, const std::string& tag, std::size_t from, std::string& value,
                 std::size_t* next = nullptr) {
    const std::string open = "<" + tag + ">", close = "</" + tag + ">";
    const std::size_t a = xml.find(open, from);
    if (a == std::string::npos) return false;
    const std::size_t b = xml.find(close, a + open.size());
    if (b == std::string::npos) return false;
    const std::string raw = xml.substr(a + open.size(), b - a - open.size());
    value.clear();
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] != '&') {
            value += raw[i];
            continue;
        }
        const std::size_t semi = raw.find(';', i);
        if (semi == std::string::npos) {
            value += raw[i];
            continue;
        }
        const std::string ent = raw.substr(i + 1, semi - i - 1);
        if (ent == "amp") value += '&';
        else if (ent == "lt") value += '<';
        else if (ent == "gt") value += '>';
        else if (ent == "quot") value += '"';
        else if (ent == "apos") value += '\'';
        else if (!ent.empty() && ent[0] == '#') {
            const long code = ent.size() > 1 && (ent[1] == 'x' || ent[1] == 'X') ? std::strtol(ent.c_str() + 2, nullptr, 16)
                                                                                  : std::strtol(ent.c_str() + 1, nullptr, 10);
            if (code > 0 && code < 128) value += char(code);
            else value += "?";
        } else {
            value += raw.substr(i, semi - i + 1);
        }
        i = semi;
    }
    if (next) *next = b + close.size();
    return true;
}

std::string strip_quotes(std::string s) {
    if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
    return s;
}

// "Code: Message" of an S3 error body, or "".
std::string s3_error_text(const std::vector<unsigned char>& body) {
    const std::string xml(body.begin(), body.begin() + std::ptrdiff_t(std::min<std::size_t>(body.size(), 4096)));
    std::string code, message;
    xml_element(xml, "Code", 0, code);
    xml_element(xml, "Message", 0, message);
    if (code.empty()) return {};
    return code + (message.empty() ? "" : ": " + message);
}

}  // namespace

std::string uri_encode(const std::string& text, bool keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : text) {
        if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
            out += char(c);
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

bool is_s3_url(const std::string& text) { return text.rfind("s3://", 0) == 0; }

s3_location parse_s3_url(const std::string& text) {
    if (!is_s3_url(text)) throw error(text + ": not an s3:// URL (s3://BUCKET/PREFIX)");
    const std::string rest = text.substr(5);
    const std::size_t slash = rest.find('/');
    s3_location loc;
    loc.bucket = rest.substr(0, slash);
    if (!valid_bucket_name(loc.bucket))
        throw error(text + ": \"" + loc.bucket +
                    "\" is not a bucket name (3 to 63 lower-case letters, digits, '-' and '.', starting and ending with a letter or digit)");
    std::string prefix = slash == std::string::npos ? std::string() : rest.substr(slash + 1);
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    if (!prefix.empty() && prefix.front() == '/') throw error(text + ": the prefix starts with '/' (s3://BUCKET/PREFIX)");
    for (unsigned char c : prefix)
        if (c < 0x20 || c == 0x7f) throw error(text + ": the prefix holds a control character");
    if (prefix.find("//") != std::string::npos) throw error(text + ": the prefix holds an empty path segment (\"//\")");
    for (std::size_t a = 0; a <= prefix.size() && !prefix.empty();) {
        std::size_t b = prefix.find('/', a);
        if (b == std::string::npos) b = prefix.size();
        const std::string seg = prefix.substr(a, b - a);
        if (seg == "." || seg == "..") throw error(text + ": the prefix holds a \".\" or \"..\" segment");
        a = b + 1;
    }
    loc.prefix = prefix;
    return loc;
}

s3_config s3_config::from_environment() {
    s3_config c;
    const std::string home = env("HOME");
    const std::string profile = env("AWS_PROFILE").empty() ? "default" : env("AWS_PROFILE");
    const std::string cred_path =
        !env("AWS_SHARED_CREDENTIALS_FILE").empty() ? env("AWS_SHARED_CREDENTIALS_FILE") : home + "/.aws/credentials";
    const std::string config_path = !env("AWS_CONFIG_FILE").empty() ? env("AWS_CONFIG_FILE") : home + "/.aws/config";
    c.access_key = env("AWS_ACCESS_KEY_ID");
    c.secret_key = env("AWS_SECRET_ACCESS_KEY");
    c.session_token = env("AWS_SESSION_TOKEN");
    std::map<std::string, std::string> conf;
    {
        auto ini = read_ini(config_path);
        const auto it = ini.find(profile == "default" ? "default" : "profile " + profile);
        if (it != ini.end()) conf = it->second;
    }
    if (!c.access_key.empty() || !c.secret_key.empty()) {
        if (c.access_key.empty() || c.secret_key.empty())
            throw error("AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together");
        c.credentials_source = "environment (AWS_ACCESS_KEY_ID)";
    } else {
        auto ini = read_ini(cred_path);
        const auto it = ini.find(profile);
        if (it != ini.end()) {
            c.access_key = it->second["aws_access_key_id"];
            c.secret_key = it->second["aws_secret_access_key"];
            c.session_token = it->second["aws_session_token"];
        }
        if (c.access_key.empty() && conf.count("aws_access_key_id")) {
            c.access_key = conf["aws_access_key_id"];
            c.secret_key = conf["aws_secret_access_key"];
            c.session_token = conf["aws_session_token"];
        }
        if (c.access_key.empty() || c.secret_key.empty())
            throw error("no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or give profile \"" + profile +
                        "\" an aws_access_key_id and aws_secret_access_key in " + cred_path);
        c.credentials_source = "profile " + profile + " of " + cred_path;
    }
    std::string region = env("AWS_REGION");
    if (region.empty()) region = env("AWS_DEFAULT_REGION");
    if (region.empty() && conf.count("region")) region = conf["region"];
    if (!region.empty()) c.region = region;
    for (char ch : c.region)
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-'))
            throw error("region \"" + c.region + "\" is not a region name");
    std::string endpoint = env("AWS_ENDPOINT_URL_S3");
    if (endpoint.empty()) endpoint = env("AWS_ENDPOINT_URL");
    if (endpoint.empty() && conf.count("endpoint_url")) endpoint = conf["endpoint_url"];
    if (endpoint.empty()) {
        c.endpoint = "https://s3." + c.region + ".amazonaws.com";
        c.path_style = false;
    } else {
        while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
        if (endpoint.rfind("http://", 0) != 0 && endpoint.rfind("https://", 0) != 0)
            throw error("endpoint \"" + endpoint + "\" must start with http:// or https://");
        const std::size_t host_at = endpoint.find("://") + 3;
        if (endpoint.find('/', host_at) != std::string::npos || endpoint.size() == host_at)
            throw error("endpoint \"" + endpoint + "\" must be scheme://host[:port] with no path");
        c.endpoint = endpoint;
        c.path_style = true;
    }
    c.max_attempts = env_int("SHARDPACK_S3_MAX_ATTEMPTS", c.max_attempts, 1, 20);
    c.attempt_timeout_ms = env_int("SHARDPACK_S3_TIMEOUT_MS", c.attempt_timeout_ms, 100, 3600000);
    c.connect_timeout_ms = std::min(c.connect_timeout_ms, c.attempt_timeout_ms);
    c.stall_timeout_ms = std::min(env_int("SHARDPACK_S3_STALL_MS", c.stall_timeout_ms, 1000, 3600000), c.attempt_timeout_ms);
    c.deadline_ms = env_int("SHARDPACK_S3_DEADLINE_MS", c.deadline_ms, 100, 24 * 3600000);
    c.max_connections = env_int("SHARDPACK_S3_CONNECTIONS", c.max_connections, 1, 256);
    c.hedge_percentile = env_double("SHARDPACK_S3_HEDGE_PERCENTILE", c.hedge_percentile, 0.0, 0.999);
    c.hedge_min_ms = env_int("SHARDPACK_S3_HEDGE_MIN_MS", c.hedge_min_ms, 1, 3600000);
    return c;
}

// ---------------------------------------------------------------------------------------------
// The engine: one thread, one curl multi handle.

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

    explicit engine(s3_config c) : cfg(std::move(c)) {
        sigv4 = "aws:amz:" + cfg.region + ":s3";
        multi = curl.multi_init();
        share = curl.share_init();
        if (!multi || !share) throw error("libcurl: cannot create a transfer handle");
        curl.share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
        curl.multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, long(cfg.max_connections) + 4);
        thread = std::thread([this] { loop(); });
    }

    ~engine() {
        {
            std::lock_guard<std::mutex> lock(m);
            stop = true;
        }
        curl.multi_wakeup(multi);
        thread.join();
        curl.multi_cleanup(multi);
        curl.share_cleanup(share);
    }

    std::string url_of(const request_spec& s) const {
        const std::size_t host_at = cfg.endpoint.find("://") + 3;
        std::string url = cfg.path_style ? cfg.endpoint + "/" + s.bucket
                                         : cfg.endpoint.substr(0, host_at) + s.bucket + "." + cfg.endpoint.substr(host_at);
        if (!s.key.empty()) url += "/" + uri_encode(s.key, true);
        else if (!cfg.path_style) url += "/";
        if (!s.query.empty()) url += "?" + s.query;
        return url;
    }

    void submit(const std::shared_ptr<s3_pending::state>& st) {
        st->begin = clock_type::now();
        {
            std::lock_guard<std::mutex> lock(m);
            if (stop) throw error("s3 client is shutting down");
            incoming.push_back(st);
            ++stats_.requests;
        }
        curl.multi_wakeup(multi);
    }

    static size_t on_write(char* data, size_t size, size_t n, void* user) {
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

    static size_t on_header(char* data, size_t size, size_t n, void* user) {
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

    static size_t on_read(char* dst, size_t size, size_t n, void* user) {
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

    static int on_seek(void* user, curl_off_t offset, int origin) {
        auto* a = static_cast<attempt*>(user);
        if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
        if (offset == 0) XXH3_64bits_reset(&a->upload_hash), a->upload_hash_valid = true;  // sent again from the start
        else if (std::uint64_t(offset) != a->upload_pos) a->upload_hash_valid = false;
        a->upload_pos = std::uint64_t(offset);
        return CURL_SEEKFUNC_OK;
    }

    // Starts one attempt of st; false (st failed) when it cannot.
    bool start_attempt(const std::shared_ptr<s3_pending::state>& st, bool hedge) {
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

    void drop_attempt(attempt* a) {
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
    void finish(const std::shared_ptr<s3_pending::state>& st, const std::string& failure) {
        while (!st->live.empty()) drop_attempt(st->live.back());
        std::lock_guard<std::mutex> lock(st->m);
        st->done = true;
        st->failure = failure;
        st->cv.notify_all();
    }

    double hedge_after_ms(std::uint64_t bytes) const {
        if (cfg.hedge_percentile <= 0) return std::numeric_limits<double>::infinity();
        const double scale = 1.0 + double(bytes) / double(1 << 20);
        if (durations.size() < 20) return std::max(double(cfg.hedge_min_ms), 1000.0) * scale;
        std::vector<double> d = durations;
        const std::size_t k = std::min(d.size() - 1, std::size_t(double(d.size()) * cfg.hedge_percentile));
        std::nth_element(d.begin(), d.begin() + std::ptrdiff_t(k), d.end());
        return std::max(double(cfg.hedge_min_ms), d[k] * scale);
    }

    void record_duration(double ms, std::uint64_t bytes) {
        const double v = ms / (1.0 + double(bytes) / double(1 << 20));
        if (durations.size() < 256) durations.push_back(v);
        else durations[duration_next++ % 256] = v;
    }

    // An attempt ended: evaluate it.
    void complete(attempt* a, CURLcode code) {
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

    void loop() {
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
};

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

s3_stats s3_client::stats() const {
    std::lock_guard<std::mutex> lock(eng().m);
    return eng().stats_;
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
