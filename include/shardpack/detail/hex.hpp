// 64-bit hashes as the format names them in file names and manifests (spec 1, Hex strings):
// 16 lowercase hex digits, zero-padded. Every writer and reader formats and parses them here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace shardpack::detail {

inline std::string hex16(std::uint64_t value) {
    static const char digits[] = "0123456789abcdef";
    std::string text(16, '0');
    for (int i = 15; i >= 0; --i, value >>= 4) text[std::size_t(i)] = digits[value & 15];
    return text;
}

// 16 lowercase hex digits to their value; false for anything else.
inline bool parse_hex16(const std::string& text, std::uint64_t& value) {
    if (text.size() != 16) return false;
    std::uint64_t v = 0;
    for (char c : text) {
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return false;
        v = (v << 4) | std::uint64_t(d);
    }
    value = v;
    return true;
}

}  // namespace shardpack::detail
