// Turns a record's decoded bytes into what is stored: zstd band frames (format 1.1, codec 2),
// one zstd frame for the whole record (format 1.0, codec 1), or the raw bytes when compression
// is off or does not pay. One compressor per thread.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "format/stored_record.hpp"
#include "shardpack/detail/format.hpp"

struct ZSTD_CCtx_s;

namespace shardpack {

enum class record_codec {
    zstd,         // codec 2: one frame per band of rows of the image and of the label (a band zstd does not shrink stored raw)
    zstd_record,  // codec 1: one frame per record (readable by 1.0 readers); raw where it is not smaller
    none,         // raw records throughout
    automatic,    // codec 2, each band compressed only where zstd saves at least half of it, else stored raw
};

// --compression auto keeps a band compressed only when zstd saves at least this fraction of its
// bytes (frame <= (1 - saving) * band), else stores the band raw. Why 1/2: scripts/bench/README.md, "Choosing the codec".
inline constexpr std::uint64_t auto_min_saving_num = 1, auto_min_saving_den = 2;

// Band height for codec 2 when none is asked for: as many rows as make about this many image
// bytes (at least 1 row, at most the image). Measured in scripts/bench/README.md, "Format 1.1: band frames".
inline constexpr std::uint64_t default_band_bytes = 256 * 1024;

// True when a writer with this codec declares the band-frame feature (and format 1.1).
inline bool uses_band_frames(record_codec c) { return c == record_codec::zstd || c == record_codec::automatic; }
inline bool uses_record_frames(record_codec c) { return c == record_codec::zstd_record; }

class record_compressor {
public:
    // `band_rows`: rows per band for codec 2; 0 picks them from default_band_bytes.
    record_compressor(record_codec codec, int level, const detail::schema_record& schema = {}, std::uint32_t band_rows = 0);
    ~record_compressor();
    record_compressor(const record_compressor&) = delete;
    record_compressor& operator=(const record_compressor&) = delete;

    // Fills `out` (its capacity is reused) from `decoded`.
    void compress(const std::vector<unsigned char>& decoded, stored_record& out);

    // The band height codec 2 uses for a record of this layout.
    std::uint32_t band_rows_for(const detail::record_layout& r) const;

private:
    record_codec codec_;
    int level_;
    detail::schema_record schema_;
    std::uint32_t band_rows_;
    ZSTD_CCtx_s* cctx_ = nullptr;

    std::size_t compress_frame(const unsigned char* src, std::size_t n, std::vector<unsigned char>& out, std::size_t at);
    bool compress_bands(const std::vector<unsigned char>& decoded, stored_record& out);  // true: some band compressed
};

}  // namespace shardpack
