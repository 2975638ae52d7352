// A small JSON value with a strict parser and a deterministic printer: enough for the manifest
// and the reports, and no dependency for the reader's users. Objects keep insertion order, so
// the same value always prints to the same bytes (builds are byte-identical, manifests included).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "error.hpp"

namespace shardpack::detail {

class json {
public:
    using array_t = std::vector<json>;
    using object_t = std::vector<std::pair<std::string, json>>;

    json() = default;
    json(std::nullptr_t) {}
    json(bool b) : v_(b) {}
    json(int i) : v_(std::int64_t(i)) {}
    json(long i) : v_(std::int64_t(i)) {}
    json(long long i) : v_(std::int64_t(i)) {}
    json(unsigned u) : v_(std::uint64_t(u)) {}
    json(unsigned long u) : v_(std::uint64_t(u)) {}
    json(unsigned long long u) : v_(std::uint64_t(u)) {}
    json(double d) : v_(d) {}
    json(const char* s) : v_(std::string(s)) {}
    json(std::string s) : v_(std::move(s)) {}
    json(std::string_view s) : v_(std::string(s)) {}
    json(array_t a) : v_(std::make_shared<array_t>(std::move(a))) {}
    json(object_t o) : v_(std::make_shared<object_t>(std::move(o))) {}

    static json array() { return json(array_t{}); }
    static json object() { return json(object_t{}); }

    bool is_null() const { return v_.index() == 0; }
    bool is_bool() const { return v_.index() == 1; }
    bool is_number() const { return v_.index() >= 2 && v_.index() <= 4; }
    bool is_string() const { return v_.index() == 5; }
    bool is_array() const { return v_.index() == 6; }
    bool is_object() const { return v_.index() == 7; }

    bool as_bool() const { return std::get<bool>(expect(is_bool(), "a boolean").v_); }
    const std::string& as_string() const { return std::get<std::string>(expect(is_string(), "a string").v_); }
    std::uint64_t as_u64() const {
        if (auto p = std::get_if<std::uint64_t>(&v_)) return *p;
        if (auto p = std::get_if<std::int64_t>(&v_); p && *p >= 0) return std::uint64_t(*p);
        throw error("JSON: expected a non-negative integer, not " + brief());
    }
    std::int64_t as_i64() const {
        expect(is_number(), "a number");
        if (auto p = std::get_if<std::int64_t>(&v_)) return *p;
        if (auto p = std::get_if<std::uint64_t>(&v_); p && *p <= std::uint64_t(INT64_MAX)) return std::int64_t(*p);
        throw error("JSON: expected an integer");
    }
    double as_double() const {
        expect(is_number(), "a number");
        if (auto p = std::get_if<double>(&v_)) return *p;
        if (auto p = std::get_if<std::int64_t>(&v_)) return double(*p);
        return double(std::get<std::uint64_t>(v_));
    }
    const array_t& as_array() const { return *std::get<std::shared_ptr<array_t>>(expect(is_array(), "an array").v_); }
    const object_t& as_object() const { return *std::get<std::shared_ptr<object_t>>(expect(is_object(), "an object").v_); }

    // Member access; throws naming the key when it is missing.
    const json& at(std::string_view key) const {
        if (const json* j = find(key)) return *j;
        throw error("JSON: missing field " + quoted(key));
    }
    // Members of a given type; an error names the key, what was expected and what is there:
    // "records": expected a non-negative integer, not 40.0
    std::uint64_t u64_at(std::string_view key) const { return member(key, &json::as_u64); }
    const std::string& string_at(std::string_view key) const { return member(key, &json::as_string); }
    const array_t& array_at(std::string_view key) const { return member(key, &json::as_array); }

    // `s` as a JSON string literal ("..." with control bytes, '"', '\\' and bytes that are not
    // UTF-8 escaped as write_string does): for messages that name a key or a file, whatever
    // bytes it holds (a NUL would cut a message off at what()).
    static std::string quoted(std::string_view s) {
        std::string out;
        write_string(out, s);
        return out;
    }
    // What a message shows of this value: a number or literal as JSON writes it (a fraction
    // keeps its ".0"), a string quoted (its first 64 bytes), "an array", "an object".
    std::string brief() const {
        switch (v_.index()) {
            case 4: {  // the shortest text that reads back as the same double
                const double d = std::get<double>(v_);
                char buf[40];
                // From the integer part's digit count, so that 20.0 prints 20.0, not 2e+01.
                const double a = std::fabs(d);
                int digits = a >= 1 && a < 1e17 ? int(std::floor(std::log10(a))) + 1 : 1;
                for (; digits <= 17; ++digits) {
                    std::snprintf(buf, sizeof buf, "%.*g", digits, d);
                    if (std::strtod(buf, nullptr) == d) break;
                }
                std::string t = buf;
                if (t.find_first_of(".eEni") == std::string::npos) t += ".0";
                return t;
            }
            case 5: {
                const auto& text = std::get<std::string>(v_);
                return text.size() <= 64 ? quoted(text) : quoted(text.substr(0, 64)) + "...";
            }
            case 6: return "an array";
            case 7: return "an object";
            default: return dump(-1);
        }
    }
    const json* find(std::string_view key) const {
        for (const auto& kv : as_object())
            if (kv.first == key) return &kv.second;
        return nullptr;
    }
    // Appends (objects) or replaces an existing member of that name.
    json& set(std::string key, json value) {
        auto& o = mutable_object();
        for (auto& kv : o)
            if (kv.first == key) return kv.second = std::move(value);
        o.emplace_back(std::move(key), std::move(value));
        return o.back().second;
    }
    json& push(json value) {
        auto& a = *std::get<std::shared_ptr<array_t>>(expect(is_array(), "an array").v_);
        a.push_back(std::move(value));
        return a.back();
    }

    // indent < 0: one line; otherwise pretty-printed with that many spaces.
    std::string dump(int indent = 2) const {
        std::string out;
        write(out, indent, 0);
        if (indent >= 0) out += '\n';
        return out;
    }

    // max_values bounds the number of values (a reader's defence against a manifest made of
    // millions of tiny values: each costs a json of ~40 bytes, 20 times its text).
    static json parse(std::string_view text, std::size_t max_values = SIZE_MAX) {
        parser p{text, 0, 0, max_values};
        p.skip_ws();
        json v = p.value();
        p.skip_ws();
        if (p.pos != text.size()) p.fail("unexpected text after the value");
        return v;
    }

private:
    std::variant<std::nullptr_t, bool, std::int64_t, std::uint64_t, double, std::string,
                 std::shared_ptr<array_t>, std::shared_ptr<object_t>> v_;

    const json& expect(bool ok, const char* what) const {
        if (!ok) throw error(std::string("JSON: expected ") + what + ", not " + brief());
        return *this;
    }
    template <class T>
    T member(std::string_view key, T (json::*read)() const) const {
        const json& v = at(key);
        try {
            return (v.*read)();
        } catch (const error& e) {
            const std::string what = e.what();
            throw error(quoted(key) + ": " + (what.rfind("JSON: ", 0) == 0 ? what.substr(6) : what));
        }
    }
    object_t& mutable_object() {
        expect(is_object(), "an object");
        auto& p = std::get<std::shared_ptr<object_t>>(v_);
        if (p.use_count() > 1) p = std::make_shared<object_t>(*p);  // copy on write
        return *p;
    }

    // The length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no
    // surrogates, nothing above U+10FFFF), or 0 where the byte starts none.
    static std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
        const auto byte = [&](std::size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
        const unsigned c = byte(i);
        const auto cont = [&](std::size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
        if (c < 0x80) return 1;
        if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
        if (c >= 0xE0 && c <= 0xEF) {
            const unsigned c1 = byte(i + 1);
            if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) return 0;  // overlong; surrogate
            return cont(i + 1) && cont(i + 2) ? 3 : 0;
        }
        if (c >= 0xF0 && c <= 0xF4) {
            const unsigned c1 = byte(i + 1);
            if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;  // overlong; > U+10FFFF
            return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
        }
        return 0;
    }

    // Strings are byte strings (paths, class names). Valid UTF-8 is written as it is; each byte
    // that is not part of valid UTF-8 is written as the escaped lone surrogate \udcXX (XX the
    // byte, 80..ff), Python's "surrogateescape": the output is valid JSON for any bytes, and the
    // parser below (or Python's s.encode("utf-8", "surrogateescape")) gives the bytes back.
    static void write_string(std::string& out, std::string_view s) {
        out += '"';
        for (std::size_t i = 0; i < s.size();) {
            const unsigned char c = static_cast<unsigned char>(s[i]);
            switch (c) {
                case '"': out += "\\\""; ++i; continue;
                case '\\': out += "\\\\"; ++i; continue;
                case '\n': out += "\\n"; ++i; continue;
                case '\r': out += "\\r"; ++i; continue;
                case '\t': out += "\\t"; ++i; continue;
                default: break;
            }
            char buf[8];
            if (c < 0x20) {
                std::snprintf(buf, sizeof buf, "\\u%04x", c);
                out += buf;
                ++i;
                continue;
            }
            const std::size_t n = utf8_sequence_length(s, i);
            if (n == 0) {
                std::snprintf(buf, sizeof buf, "\\udc%02x", c);
                out += buf;
                ++i;
                continue;
            }
            out.append(s, i, n);
            i += n;
        }
        out += '"';
    }

    void write(std::string& out, int indent, int depth) const {
        auto newline = [&](int d) {
            if (indent < 0) return;
            out += '\n';
            out.append(std::size_t(indent * d), ' ');
        };
        switch (v_.index()) {
            case 0: out += "null"; break;
            case 1: out += std::get<bool>(v_) ? "true" : "false"; break;
            case 2: out += std::to_string(std::get<std::int64_t>(v_)); break;
            case 3: out += std::to_string(std::get<std::uint64_t>(v_)); break;
            case 4: {
                const double d = std::get<double>(v_);
                if (!std::isfinite(d)) { out += "null"; break; }
                if (d == 0.0) { out += "0"; break; }  // -0.0 too: "-0" would read back as the integer 0
                char buf[32];
                std::snprintf(buf, sizeof buf, "%.6g", d);
                out += buf;
                break;
            }
            case 5: write_string(out, std::get<std::string>(v_)); break;
            case 6: {
                const auto& a = as_array();
                out += '[';
                for (std::size_t i = 0; i < a.size(); ++i) {
                    if (i) out += ',';
                    newline(depth + 1);
                    a[i].write(out, indent, depth + 1);
                }
                if (!a.empty()) newline(depth);
                out += ']';
                break;
            }
            case 7: {
                const auto& o = as_object();
                out += '{';
                for (std::size_t i = 0; i < o.size(); ++i) {
                    if (i) out += ',';
                    newline(depth + 1);
                    write_string(out, o[i].first);
                    out += indent < 0 ? ":" : ": ";
                    o[i].second.write(out, indent, depth + 1);
                }
                if (!o.empty()) newline(depth);
                out += '}';
                break;
            }
        }
    }

    struct parser {
        std::string_view s;
        std::size_t pos;
        int depth;
        std::size_t values_left;

        [[noreturn]] void fail(const std::string& why) const {
            throw error("JSON: " + why + " at byte " + std::to_string(pos));
        }
        void skip_ws() {
            while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t')) ++pos;
        }
        bool eat(char c) {
            skip_ws();
            if (pos < s.size() && s[pos] == c) { ++pos; return true; }
            return false;
        }
        void literal(std::string_view word) {
            if (s.substr(pos, word.size()) != word) fail("unknown literal");
            pos += word.size();
        }
        json value() {
            skip_ws();
            if (pos >= s.size()) fail("unexpected end");
            if (++depth > 64) fail("nesting too deep");
            if (values_left-- == 0) fail("too many values");
            json v;
            switch (s[pos]) {
                case '{': v = object_value(); break;
                case '[': v = array_value(); break;
                case '"': v = json(string_value()); break;
                case 't': literal("true"); v = json(true); break;
                case 'f': literal("false"); v = json(false); break;
                case 'n': literal("null"); break;
                default: v = number_value();
            }
            --depth;
            return v;
        }
        json object_value() {
            ++pos;
            object_t o;
            if (eat('}')) return json(std::move(o));
            do {
                skip_ws();
                if (pos >= s.size() || s[pos] != '"') fail("expected a member name");
                std::string key = string_value();
                if (!eat(':')) fail("expected ':'");
                o.emplace_back(std::move(key), value());
            } while (eat(','));
            if (!eat('}')) fail("expected ',' or '}'");
            return json(std::move(o));
        }
        json array_value() {
            ++pos;
            array_t a;
            if (eat(']')) return json(std::move(a));
            do a.push_back(value());
            while (eat(','));
            if (!eat(']')) fail("expected ',' or ']'");
            return json(std::move(a));
        }
        static void append_utf8(std::string& out, std::uint32_t cp) {
            if (cp < 0x80) out += char(cp);
            else if (cp < 0x800) { out += char(0xC0 | (cp >> 6)); out += char(0x80 | (cp & 0x3F)); }
            else if (cp < 0x10000) {
                out += char(0xE0 | (cp >> 12)); out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F));
            } else {
                out += char(0xF0 | (cp >> 18)); out += char(0x80 | ((cp >> 12) & 0x3F));
                out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F));
            }
        }
        std::uint32_t hex4() {
            if (s.size() - pos < 4) fail("short \\u escape");
            std::uint32_t v = 0;
            for (int i = 0; i < 4; ++i) {
                const char c = s[pos++];
                v <<= 4;
                if (c >= '0' && c <= '9') v |= std::uint32_t(c - '0');
                else if (c >= 'a' && c <= 'f') v |= std::uint32_t(c - 'a' + 10);
                else if (c >= 'A' && c <= 'F') v |= std::uint32_t(c - 'A' + 10);
                else fail("bad \\u escape");
            }
            return v;
        }
        std::string string_value() {
            ++pos;
            std::string out;
            while (true) {
                if (pos >= s.size()) fail("unterminated string");
                const char c = s[pos++];
                if (c == '"') return out;
                if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
                if (c != '\\') { out += c; continue; }
                if (pos >= s.size()) fail("unterminated escape");
                switch (s[pos++]) {
                    case '"': out += '"'; break;
                    case '\\': out += '\\'; break;
                    case '/': out += '/'; break;
                    case 'b': out += '\b'; break;
                    case 'f': out += '\f'; break;
                    case 'n': out += '\n'; break;
                    case 'r': out += '\r'; break;
                    case 't': out += '\t'; break;
                    case 'u': {
                        std::uint32_t cp = hex4();
                        if (cp >= 0xDC80 && cp <= 0xDCFF) {  // a byte escaped by write_string
                            out += char(cp - 0xDC00);
                            break;
                        }
                        if (cp >= 0xDC00 && cp <= 0xDFFF) fail("lone low surrogate");
                        if (cp >= 0xD800 && cp < 0xDC00) {
                            if (s.substr(pos, 2) != "\\u") fail("lone surrogate");
                            pos += 2;
                            const std::uint32_t lo = hex4();
                            if (lo < 0xDC00 || lo > 0xDFFF) fail("bad surrogate pair");
                            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        }
                        append_utf8(out, cp);
                        break;
                    }
                    default: fail("bad escape");
                }
            }
        }
        std::size_t digits() {
            const std::size_t from = pos;
            while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') ++pos;
            return pos - from;
        }
        // RFC 8259's grammar exactly: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
        json number_value() {
            const std::size_t start = pos;
            if (pos < s.size() && s[pos] == '-') ++pos;
            const std::size_t int_start = pos;
            const std::size_t int_digits = digits();
            if (int_digits == 0) fail("expected a value");
            bool is_int = true;
            if (int_digits > 1 && s[int_start] == '0') fail("bad number (a leading zero)");
            if (pos < s.size() && s[pos] == '.') {
                ++pos;
                is_int = false;
                if (digits() == 0) fail("bad number (no digit after '.')");
            }
            if (pos < s.size() && (s[pos] == 'e' || s[pos] == 'E')) {
                ++pos;
                is_int = false;
                if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) ++pos;
                if (digits() == 0) fail("bad number (no digit in the exponent)");
            }
            const std::string tok(s.substr(start, pos - start));
            try {
                std::size_t used = 0;
                json v;
                if (is_int && tok[0] == '-') v = json(static_cast<long long>(std::stoll(tok, &used)));
                else if (is_int) v = json(static_cast<unsigned long long>(std::stoull(tok, &used)));
                else v = json(std::stod(tok, &used));
                if (used != tok.size()) fail("bad number");
                return v;
            } catch (const std::logic_error&) {
                fail("bad number '" + tok + "'");
            }
        }
    };
};

}  // namespace shardpack::detail
