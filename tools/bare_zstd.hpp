// The floor a reader of the same bytes is measured against: bare zstd on a record's stored bytes,
// with none of the reader's checks or conversions. Shared by tools/bench_read.cpp and
// scripts/bench/py_bare_zstd.cpp (the Python benchmark's in-process floor), so that both time the
// same work. Needs the reader's headers (for the format's constants and record layout) and zstd.
#pragma once
#include <zstd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "shardpack/reader.hpp"

namespace shardpack::bench {

// One record's stored bytes, as the index locates them.
struct stored_frames {
    const unsigned char* data = nullptr;
    std::size_t stored = 0, decoded = 0;
    std::uint32_t codec = 0;
};

// Decodes record `record`'s stored bytes into `out` (decoded bytes): codec 1, one
// ZSTD_decompressDCtx of the frame; band frames (codec 2, format 1.1; codec 3, format 1.3, the
// same with the label's own band height), the prefix copied and one ZSTD_decompressDCtx per frame
// at its place, found from the band table with no checks; raw, a memcpy; another codec, an error
// (it would otherwise be timed as a copy). Throws std::runtime_error naming the record.
inline void bare_decode(ZSTD_DCtx* dctx, const stored_frames& r, const detail::schema_record& schema, unsigned char* out,
                        std::size_t record) {
    namespace d = detail;
    auto fail = [record](const char* what) {
        throw std::runtime_error("record " + std::to_string(record) + ": bare zstd: " + what);
    };
    if (r.codec == d::codec_zstd) {
        const std::size_t got = ZSTD_decompressDCtx(dctx, out, r.decoded, r.data, r.stored);
        if (ZSTD_isError(got) || got != r.decoded) fail("the frame did not decode to its size");
    } else if (d::is_band_codec(r.codec)) {
        const auto lay = d::make_record_layout(schema, d::load_u32(r.data), d::load_u32(r.data + 4),
                                               static_cast<std::int32_t>(d::load_u32(r.data + 8)), d::load_u32(r.data + 12));
        std::memcpy(out, r.data, std::size_t(lay.image_offset));
        const unsigned char* table = r.data + lay.image_offset;
        const bool per_region = r.codec == d::codec_zstd_region_bands;
        const std::size_t fixed = per_region ? d::region_band_table_fixed_size : d::band_table_fixed_size;
        const std::uint32_t rows = d::load_u32(table), frames = d::load_u32(table + fixed - 4);
        const std::uint32_t label_rows = per_region ? d::load_u32(table + 4) : rows;
        const std::uint32_t bands = (lay.height + rows - 1) / rows;
        const unsigned char* frame = table + fixed + 8 * std::size_t(frames);
        for (std::uint32_t f = 0; f < frames; ++f) {
            const bool label = f >= bands;
            const std::uint32_t band = label ? f - bands : f;
            const std::size_t row_bytes = std::size_t(label ? lay.label_bytes : lay.image_bytes) / lay.height;
            const std::size_t band_rows = label ? label_rows : rows;
            const std::size_t first = std::size_t(band) * band_rows, last = std::min<std::size_t>(first + band_rows, lay.height);
            unsigned char* dst = out + (label ? lay.label_offset : lay.image_offset) + first * row_bytes;
            const std::uint64_t entry = d::load_u64(table + fixed + 8 * std::size_t(f));
            const std::size_t n = std::size_t(entry & ~d::band_stored_raw);
            if (entry & d::band_stored_raw) {
                std::memcpy(dst, frame, n);
            } else {
                const std::size_t got = ZSTD_decompressDCtx(dctx, dst, (last - first) * row_bytes, frame, n);
                if (ZSTD_isError(got) || got != (last - first) * row_bytes) fail("a band frame did not decode to its band");
            }
            frame += n;
        }
        if (lay.label_bytes)
            std::memset(out + lay.image_offset + lay.image_bytes, 0, std::size_t(lay.label_offset - lay.image_offset - lay.image_bytes));
    } else if (r.codec == d::codec_raw) {
        std::memcpy(out, r.data, r.stored);
    } else {
        fail(("unknown codec " + std::to_string(r.codec)).c_str());
    }
}

}  // namespace shardpack::bench
