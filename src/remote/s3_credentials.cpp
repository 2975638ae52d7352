// The S3 client's settings: credentials, region and endpoint from the environment and the AWS
// CLI's files, and the SHARDPACK_S3_* limits.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include "remote/s3_client.hpp"
#include "remote/s3_url_xml.hpp"
#include "shardpack/detail/error.hpp"
#include "shardpack/detail/regular_file.hpp"

namespace shardpack::remote {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
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

}  // namespace

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

}  // namespace shardpack::remote
