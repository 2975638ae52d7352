// A record as it goes into a shard: its stored bytes (a zstd frame or the raw record), how to
// decode them, and the checksum of the stored bytes. Made by the parallel compress stage, so
// the serial write stage only copies bytes.
#pragma once
#include <cstdint>
#include <vector>

namespace shardpack {

// The codec a shard's compressed records use (any record may also be stored raw), which fixes
// the required feature bits and the minor version the shard declares (spec 4, 10).
enum class shard_codec {
    raw,                // codec 0 only (format 1.0)
    zstd_record,        // codec 1: one zstd frame per record (1.0; feature bit 0)
    zstd_bands,         // codec 2: zstd band frames (1.1; feature bit 1)
    zstd_region_bands,  // codec 3, a band height per region, and codec 2 (1.3; feature bits 1 and 2)
};

struct stored_record {
    std::vector<unsigned char> bytes;
    std::uint64_t decoded_size = 0;
    std::uint64_t checksum = 0;  // XXH3-64 of `bytes`
    std::uint32_t codec = 0;     // detail::codec_raw or detail::codec_zstd
};

// A stored record's bytes wherever they lie: in a stored_record, or in a previous build's shard.
struct record_view {
    const unsigned char* data = nullptr;
    std::uint64_t stored_size = 0;
    std::uint64_t decoded_size = 0;
    std::uint64_t checksum = 0;
    std::uint32_t codec = 0;
};

inline record_view view_of(const stored_record& r) {
    return {r.bytes.data(), r.bytes.size(), r.decoded_size, r.checksum, r.codec};
}

}  // namespace shardpack
