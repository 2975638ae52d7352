// The S3 client's text: s3:// URLs, bucket names, URI encoding and S3's XML answers.
#include "remote/s3_url_xml.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "remote/s3_client.hpp"
#include "shardpack/detail/error.hpp"

namespace shardpack::remote {

namespace {

bool valid_bucket_name(const std::string& b) {
    if (b.size() < 3 || b.size() > 63) return false;
    for (char c : b)
        if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-' ||
              c == '.'))
            return false;
    return std::isalnum(static_cast<unsigned char>(b.front())) && std::isalnum(static_cast<unsigned char>(b.back()));
}

}  // namespace

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

bool xml_element(const std::string& xml, const std::string& tag, std::size_t from, std::string& value,
                 std::size_t* next) {
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

std::string s3_error_text(const std::vector<unsigned char>& body) {
    const std::string xml(body.begin(), body.begin() + std::ptrdiff_t(std::min<std::size_t>(body.size(), 4096)));
    std::string code, message;
    xml_element(xml, "Code", 0, code);
    xml_element(xml, "Message", 0, message);
    if (code.empty()) return {};
    return code + (message.empty() ? "" : ": " + message);
}

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

}  // namespace shardpack::remote
