#include "format/record_compressor.hpp"

#include <zstd.h>

#include <cstring>
#include <stdexcept>
#include <string>

#include "shardpack/detail/band_frames.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {
using namespace detail;

record_compressor::record_compressor(record_codec codec, int level, const schema_record& schema, std::uint32_t band_rows)
    : codec_(codec), level_(level), schema_(schema), band_rows_(band_rows) {
    if (codec_ == record_codec::none) return;
    cctx_ = ZSTD_createCCtx();
    if (!cctx_) throw std::bad_alloc();
    // Single-threaded frames with the content size recorded: the bytes depend only on the input
    // and the level, never on the thread count.
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_compressionLevel, level_);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_contentSizeFlag, 1);
    ZSTD_CCtx_setParameter(cctx_, ZSTD_c_checksumFlag, 0);  // the index holds an XXH3 of the frame
}

record_compressor::~record_compressor() { ZSTD_freeCCtx(cctx_); }

std::uint32_t record_compressor::band_rows_for(const record_layout& r) const {
    if (band_rows_) return band_rows_ < r.height ? band_rows_ : r.height;
    const std::uint64_t row = r.image_bytes / r.height;
    const std::uint64_t rows = row ? default_band_bytes / row : r.height;
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

// Codec 2 (formats/shardpack-v1.md, 10.3): the record's bytes before the image verbatim, the band
// table, then the image bands' frames and the label bands' frames.
bool record_compressor::compress_bands(const std::vector<unsigned char>& decoded, stored_record& out) {
    bool any_compressed = false;
    const record_layout r = parse_record(schema_, decoded.data(), decoded.size());
    const std::uint32_t rows = band_rows_for(r);
    const std::uint32_t bands = (r.height + rows - 1) / rows;
    const std::uint32_t regions = r.label_bytes ? 2 : 1;
    const std::uint32_t frames = bands * regions;
    const std::size_t table = static_cast<std::size_t>(r.image_offset) + band_table_fixed_size;
    std::vector<unsigned char>& b = out.bytes;
    b.assign(decoded.begin(), decoded.begin() + static_cast<std::ptrdiff_t>(r.image_offset));
    b.resize(table + 8 * std::size_t(frames), 0);
    store_u32(b.data() + r.image_offset, rows);
    store_u32(b.data() + r.image_offset + 4, frames);
    for (std::uint32_t region = 0; region < regions; ++region) {
        const std::uint64_t start = region == 0 ? r.image_offset : r.label_offset;
        const std::uint64_t row_bytes = (region == 0 ? r.image_bytes : r.label_bytes) / r.height;
        for (std::uint32_t band = 0; band < bands; ++band) {
            const std::uint64_t first = std::uint64_t(band) * rows;
            const std::uint64_t last = std::min<std::uint64_t>(first + rows, r.height);
            const unsigned char* src = decoded.data() + start + first * row_bytes;
            const std::size_t band_bytes = static_cast<std::size_t>((last - first) * row_bytes);
            const std::size_t at = b.size();
            const std::size_t c = compress_frame(src, band_bytes, b, at);
            // A band that zstd does not shrink enough is stored as it is: read with a memcpy.
            const std::size_t keep_below = codec_ == record_codec::automatic
                                               ? band_bytes - band_bytes * auto_min_saving_num / auto_min_saving_den + 1
                                               : band_bytes;
            if (c < keep_below) {
                store_u64(b.data() + table + 8 * std::size_t(region * bands + band), c);
                any_compressed = true;
            } else {
                b.resize(at);
                b.insert(b.end(), src, src + band_bytes);
                store_u64(b.data() + table + 8 * std::size_t(region * bands + band), band_bytes | band_stored_raw);
            }
        }
    }
    return any_compressed;
}

void record_compressor::compress(const std::vector<unsigned char>& decoded, stored_record& out) {
    out.decoded_size = decoded.size();
    bool stored_compressed = false;
    if (codec_ == record_codec::zstd_record) {
        compress_frame(decoded.data(), decoded.size(), out.bytes, 0);
        stored_compressed = out.bytes.size() < decoded.size();
        out.codec = codec_zstd;
    } else if (codec_ != record_codec::none) {
        // Kept when some band is compressed and the whole is smaller than the record; a record
        // whose bands are all raw is stored raw (codec 0), read in place from the mapping.
        stored_compressed = compress_bands(decoded, out) && out.bytes.size() < decoded.size();
        out.codec = codec_zstd_bands;
    }
    if (!stored_compressed) {
        out.bytes.assign(decoded.begin(), decoded.end());
        out.codec = codec_raw;
    }
    out.checksum = XXH3_64bits(out.bytes.data(), out.bytes.size());
}

}  // namespace shardpack
