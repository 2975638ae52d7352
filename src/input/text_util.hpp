// Small text helpers shared by the input readers (internal to src/input).
#pragma once
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace shardpack::input_detail {

// Spaces and tabs around a cell are typos in hand-written lists, never meaningful in names or
// numbers. Paths are not trimmed: a file name may really start or end with a space.
inline std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

inline std::string lower_ascii(std::string_view s) {
    std::string out(s);
    for (char& c : out)
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    return out;
}

// An optional '-' then decimal digits, after trimming. Syntax only: the value may not fit.
inline bool is_integer(std::string_view s) {
    s = trim(s);
    if (!s.empty() && s.front() == '-') s.remove_prefix(1);
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

// The value of an is_integer() text; nullopt when it does not fit in 64 bits.
inline std::optional<std::int64_t> integer_value(std::string_view s) {
    s = trim(s);
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
    return v;
}

// "FILE:LINE: " as every message starts.
inline std::string where(std::string_view file, std::size_t line) {
    return std::string(file) + ":" + std::to_string(line) + ": ";
}

}  // namespace shardpack::input_detail
