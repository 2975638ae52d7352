#include "cli/log_sanitizer.hpp"

#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>

#include <cstdio>

namespace shardpack {

namespace {

// The length of the well-formed UTF-8 sequence at text[i], or 0 (as the JSON writer's check).
std::size_t utf8_length(std::string_view s, std::size_t i) {
    const auto byte = [&](std::size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
    const auto cont = [&](std::size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
    const unsigned c = byte(i);
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
        const unsigned c1 = byte(i + 1);
        if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F)) return 0;
        return cont(i + 1) && cont(i + 2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
        const unsigned c1 = byte(i + 1);
        if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F)) return 0;
        return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    return 0;
}

std::string escape(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        const std::size_t n = utf8_length(text, i);
        if (c == '\n') out += "\\n";
        else if (c == '\r') out += "\\r";
        else if (c == '\t') out += "\\t";
        else if (c < 0x20 || c == 0x7F || n == 0) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\x%02X", c);
            out += buf;
        } else {
            out.append(text.substr(i, n));
            i += n;
            continue;
        }
        ++i;
    }
    return out;
}

// Moves a cut position back to the start of a UTF-8 sequence (escaped text is valid UTF-8).
std::size_t char_start(std::string_view s, std::size_t pos) {
    while (pos > 0 && pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0u) == 0x80u) --pos;
    return pos;
}

std::string cut_long_tokens(std::string_view text) {
    std::string out;
    std::size_t i = 0;
    while (i < text.size()) {
        if (text[i] == ' ') {
            out += ' ';
            ++i;
            continue;
        }
        std::size_t end = text.find(' ', i);
        if (end == std::string_view::npos) end = text.size();
        const std::string_view token = text.substr(i, end - i);
        if (token.size() <= log_token_max) {
            out.append(token);
        } else {
            const std::size_t head = char_start(token, log_token_keep);
            const std::size_t tail = char_start(token, token.size() - log_token_keep);
            out.append(token.substr(0, head));
            out += "[..." + std::to_string(tail - head) + " bytes...]";
            out.append(token.substr(tail));
        }
        i = end;
    }
    return out;
}

class sanitizing_formatter final : public spdlog::formatter {
public:
    explicit sanitizing_formatter(std::string pattern)
        : pattern_(std::move(pattern)), inner_(std::make_unique<spdlog::pattern_formatter>(pattern_)) {}
    void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
        const std::string clean = sanitize_log_text(std::string_view(msg.payload.data(), msg.payload.size()));
        spdlog::details::log_msg copy = msg;
        copy.payload = spdlog::string_view_t(clean.data(), clean.size());
        inner_->format(copy, dest);
        msg.color_range_start = copy.color_range_start;  // the color sink reads them from msg
        msg.color_range_end = copy.color_range_end;
    }
    std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<sanitizing_formatter>(pattern_); }

private:
    std::string pattern_;
    std::unique_ptr<spdlog::pattern_formatter> inner_;
};

}  // namespace

std::string sanitize_log_text(std::string_view text) { return cut_long_tokens(escape(text)); }

std::unique_ptr<spdlog::formatter> make_sanitizing_formatter(const std::string& pattern) {
    return std::make_unique<sanitizing_formatter>(pattern);
}

}  // namespace shardpack
