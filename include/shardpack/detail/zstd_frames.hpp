// An upper bound on what stored zstd bytes can decompress to, from the frame and block headers
// alone (RFC 8878), so that a reader refuses an index entry whose decoded_size the stored bytes
// cannot hold before it allocates decoded_size bytes: a few hundred damaged or hostile bytes
// must not make it allocate gigabytes. The same bound as ZSTD_decompressBound(), which libzstd
// offers only in its experimental API.
#pragma once
#include <cstddef>
#include <cstdint>

#include "endian.hpp"

namespace shardpack::detail {

inline constexpr std::uint32_t zstd_frame_magic = 0xFD2FB528u;
inline constexpr std::uint32_t zstd_skippable_magic_mask = 0xFFFFFFF0u;
inline constexpr std::uint32_t zstd_skippable_magic = 0x184D2A50u;
inline constexpr std::uint64_t zstd_block_max = 128 * 1024;  // most a compressed block decodes to

// The most the zstd frames (and skippable frames) in [p, p + n) can decompress to: raw and RLE
// blocks give exactly their Block_Size, a compressed block at most 128 KiB. Where the bytes stop
// being well-formed frames, the bound covers only what came before (zstd refuses the rest), plus
// one block for the one being read.
inline std::uint64_t zstd_decoded_bound(const unsigned char* p, std::size_t n) {
    std::uint64_t bound = 0;
    std::size_t at = 0;
    while (n - at >= 4) {
        const std::uint32_t magic = load_u32(p + at);
        if ((magic & zstd_skippable_magic_mask) == zstd_skippable_magic) {
            if (n - at < 8) return bound;
            const std::uint64_t skip = load_u32(p + at + 4);
            if (skip > n - at - 8) return bound;
            at += 8 + static_cast<std::size_t>(skip);
            continue;
        }
        if (magic != zstd_frame_magic || n - at < 5) return bound + zstd_block_max;
        const unsigned fhd = p[at + 4];
        const unsigned fcs_flag = fhd >> 6, single_segment = (fhd >> 5) & 1, checksum = (fhd >> 2) & 1, did_flag = fhd & 3;
        static const unsigned did_bytes[4] = {0, 1, 2, 4};
        static const unsigned fcs_bytes[4] = {0, 2, 4, 8};
        const std::size_t header = 5 + (single_segment ? 0 : 1) + did_bytes[did_flag] +
                                   (fcs_flag == 0 && single_segment ? 1 : fcs_bytes[fcs_flag]);
        if (n - at < header) return bound + zstd_block_max;
        at += header;
        for (;;) {
            if (n - at < 3) return bound + zstd_block_max;
            const std::uint32_t bh = std::uint32_t(p[at]) | (std::uint32_t(p[at + 1]) << 8) | (std::uint32_t(p[at + 2]) << 16);
            at += 3;
            const bool last = bh & 1;
            const unsigned type = (bh >> 1) & 3;
            const std::uint32_t size = bh >> 3;
            std::size_t consumed = 0;
            switch (type) {
                case 0: bound += size; consumed = size; break;            // raw
                case 1: bound += size; consumed = 1; break;               // RLE: one byte, repeated
                case 2: bound += zstd_block_max; consumed = size; break;  // compressed
                default: return bound + zstd_block_max;                   // reserved: zstd refuses it
            }
            if (consumed > n - at) return bound + zstd_block_max;
            at += consumed;
            if (last) break;
        }
        if (checksum) {
            if (n - at < 4) return bound;
            at += 4;
        }
    }
    return at == n ? bound : bound + zstd_block_max;
}

}  // namespace shardpack::detail
