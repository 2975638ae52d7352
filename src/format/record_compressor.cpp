#include "format/record_compressor.hpp"

#include <zstd.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "shardpack/detail/band_frames.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {
using namespace detail;

record_compressor::record_compressor(record_codec codec, int level, const schema_record& schema, std::uint32_t band_rows,
                                     std::uint32_t label_band_rows)
    : codec_(codec), level_(level), schema_(schema), band_rows_(band_rows), label_band_rows_(label_band_rows),
      per_region_(shard_codec_for(codec, schema, label_band_rows ? 0 : band_rows) == shard_codec::zstd_region_bands) {
    if (codec_ == record_codec::none) return;
    cctx_ = ZSTD_createCCtx();
    if (!cctx_) throw std::bad_alloc();
    // Single-threaded frames with the content size recorded: the bytes depend only on the input
    // and the level, never on the thread count. Every frame (a record's, or each band's, a fresh
    // frame from the same context) is made with these settings and nothing else (spec 10.1, 10.3).
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_contentSizeFlag, 1);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 0);  // the index holds an XXH3 of the frame
}

record_compressor::~record_compressor() { ZSTD_freeCCtx(cctx_); }

std::uint32_t record_compressor::band_rows_for(const record_layout& r, std::uint64_t band_bytes) const {
    if (band_rows_) return band_rows_ < r.height ? band_rows_ : r.height;
    const std::uint64_t row = r.image_bytes / r.height;
    const std::uint64_t rows = row ? band_bytes / row : r.height;
    return static_cast<std::uint32_t>(rows < 1 ? 1 : rows > r.height ? r.height : rows);
}

// Appends one frame of `src` at out[at...]; returns its size.
std::size_t record_compressor::compress_frame(const unsigned char* src, std::size_t n, std::vector<unsigned char>& out,
                                              std::size_t at) {
    out.resize(at + ZSTD_compressBound(n));
    const std::size_t c = ZSTD_compress2(cctx_, out.data() + at, out.size() - at, src, n);
    if (ZSTD_isError(c)) throw std::runtime_error(std::string("zstd: ") + ZSTD_getErrorName(c));
    out.resize(at + c);
    return c;
}

// Codecs 2 and 3 (formats/shardpack-v1.md, 10.3): the record's bytes before the image verbatim,
// the band table, then the image bands' frames and the label bands' frames.
bool record_compressor::compress_bands(const std::vector<unsigned char>& decoded, const record_layout& r, stored_record& out) {
    bool any_compressed = false;
    std::uint32_t image_rows = band_rows_for(r);
    std::uint32_t label_rows = r.label_bytes ? image_rows : 0;
    bool label_one_frame = false;
    if (per_region_ && r.label_bytes && label_band_rows_) {
        label_rows = std::min(label_band_rows_, r.height);
    } else if (per_region_ && r.label_bytes) {
        // Measured on this record: the label plane is one frame when zstd shrinks it at least
        // label_one_frame_min_ratio times, and the image then in bands of region_image_band_bytes;
        // else both are cut at the image's height of default_band_bytes.
        const std::size_t c = compress_frame(decoded.data() + r.label_offset, static_cast<std::size_t>(r.label_bytes), label_frame_, 0);
        if (c * label_one_frame_min_ratio <= r.label_bytes) {
            label_rows = r.height;
            label_one_frame = true;
            image_rows = band_rows_for(r, region_image_band_bytes);
        }
    }
    const std::uint32_t image_bands = (r.height + image_rows - 1) / image_rows;
    const std::uint32_t label_bands = label_rows ? (r.height + label_rows - 1) / label_rows : 0;
    const std::uint32_t frames = image_bands + label_bands;
    const std::size_t fixed = per_region_ ? region_band_table_fixed_size : band_table_fixed_size;
    const std::size_t table = static_cast<std::size_t>(r.image_offset) + fixed;
    std::vector<unsigned char>& b = out.bytes;
    b.assign(decoded.begin(), decoded.begin() + static_cast<std::ptrdiff_t>(r.image_offset));
    b.resize(table + 8 * std::size_t(frames), 0);
    store_u32(b.data() + r.image_offset, image_rows);
    if (per_region_) store_u32(b.data() + r.image_offset + 4, label_rows);
    store_u32(b.data() + table - 4, frames);
    std::uint32_t frame = 0;
    for (std::uint32_t region = 0; region < (label_bands ? 2u : 1u); ++region) {
        const std::uint64_t start = region == 0 ? r.image_offset : r.label_offset;
        const std::uint64_t row_bytes = (region == 0 ? r.image_bytes : r.label_bytes) / r.height;
        const std::uint32_t rows = region == 0 ? image_rows : label_rows;
        for (std::uint32_t band = 0; band < (region == 0 ? image_bands : label_bands); ++band, ++frame) {
            const std::uint64_t first = std::uint64_t(band) * rows;
            const std::uint64_t last = std::min<std::uint64_t>(first + rows, r.height);
            const unsigned char* src = decoded.data() + start + first * row_bytes;
            const std::size_t band_bytes = static_cast<std::size_t>((last - first) * row_bytes);
            const std::size_t at = b.size();
            std::size_t c = 0;
            if (region == 1 && label_one_frame) {
                c = label_frame_.size();  // the frame the rule measured: the same bytes compress_frame makes
                b.insert(b.end(), label_frame_.begin(), label_frame_.end());
            } else {
                c = compress_frame(src, band_bytes, b, at);
            }
            // A band that zstd does not shrink enough is stored as it is: read with a memcpy.
            const std::size_t keep_below = codec_ == record_codec::automatic
                                               ? band_bytes - band_bytes * auto_min_saving_num / auto_min_saving_den + 1
                                               : band_bytes;
            if (c < keep_below) {
                store_u64(b.data() + table + 8 * std::size_t(frame), c);
                any_compressed = true;
            } else {
                b.resize(at);
                b.insert(b.end(), src, src + band_bytes);
                store_u64(b.data() + table + 8 * std::size_t(frame), band_bytes | band_stored_raw);
            }
        }
    }
    return any_compressed;
}

void record_compressor::compress(std::vector<unsigned char>& decoded, const record_layout& layout, stored_record& out) {
    if (layout.total_bytes != decoded.size())
        throw std::logic_error("record_compressor: a layout of " + std::to_string(layout.total_bytes) + " bytes for a record of " +
                               std::to_string(decoded.size()));
    if (!try_compress(decoded, &layout, out)) out.bytes.swap(decoded);  // raw: the record's own buffer, not a copy
    out.checksum = XXH3_64bits(out.bytes.data(), out.bytes.size());
}

void record_compressor::compress(const std::vector<unsigned char>& decoded, stored_record& out) {
    if (!try_compress(decoded, nullptr, out)) out.bytes.assign(decoded.begin(), decoded.end());
    out.checksum = XXH3_64bits(out.bytes.data(), out.bytes.size());
}

bool record_compressor::try_compress(const std::vector<unsigned char>& decoded, const record_layout* layout, stored_record& out) {
    out.decoded_size = decoded.size();
    bool stored_compressed = false;
    if (codec_ == record_codec::zstd_record) {
        compress_frame(decoded.data(), decoded.size(), out.bytes, 0);
        stored_compressed = out.bytes.size() < decoded.size();
        out.codec = codec_zstd;
    } else if (codec_ != record_codec::none) {
        // Kept when some band is compressed and the whole is smaller than the record; a record
        // whose bands are all raw is stored raw (codec 0), read in place from the mapping.
        stored_compressed =
            compress_bands(decoded, layout ? *layout : parse_record(schema_, decoded.data(), decoded.size()), out) &&
            out.bytes.size() < decoded.size();
        out.codec = per_region_ ? codec_zstd_region_bands : codec_zstd_bands;
    }
    if (!stored_compressed) out.codec = codec_raw;
    return stored_compressed;
}

}  // namespace shardpack
