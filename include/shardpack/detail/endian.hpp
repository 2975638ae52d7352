// Little-endian loads and stores. Every integer in a shardpack file is read through these, never
// by casting bytes to structs: the bytes may be unaligned and the host may be big-endian.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace shardpack::detail {

inline std::uint16_t load_u16(const unsigned char* p) {
    return static_cast<std::uint16_t>(p[0] | (p[1] << 8));
}
inline std::uint32_t load_u32(const unsigned char* p) {
    return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16) |
           (std::uint32_t(p[3]) << 24);
}
inline std::uint64_t load_u64(const unsigned char* p) {
    return std::uint64_t(load_u32(p)) | (std::uint64_t(load_u32(p + 4)) << 32);
}
inline void store_u16(unsigned char* p, std::uint16_t v) {
    p[0] = static_cast<unsigned char>(v);
    p[1] = static_cast<unsigned char>(v >> 8);
}
inline void store_u32(unsigned char* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
// Whether a host's uint16 has the file's byte order, so uint16 arrays can be copied as they are.
inline bool little_endian_host() {
    const std::uint16_t one = 1;
    unsigned char first = 0;
    std::memcpy(&first, &one, 1);
    return first == 1;
}
inline void store_u64(unsigned char* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

}  // namespace shardpack::detail
