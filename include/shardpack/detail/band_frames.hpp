// Band frames (formats/shardpack-v1.md section 10.3): a record stored as its header and key
// verbatim, a band table, then one zstd frame per band of rows of the image and of the label.
// Codec 2 (format 1.1) has one band height for both regions; codec 3 (format 1.3) one per region,
// so that a label plane that compresses very well can be one frame while the image keeps bands.
// The image and label frames decompress straight into their destinations (the caller's buffers
// where the layout allows), and a crop decompresses only the bands its rows lie in.
#pragma once
#include <zstd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "endian.hpp"
#include "error.hpp"
#include "format.hpp"
#include "zstd_frames.hpp"

namespace shardpack::detail {

inline constexpr std::size_t band_table_fixed_size = 8;          // codec 2: u32 band_rows, u32 frame_count
inline constexpr std::size_t region_band_table_fixed_size = 12;  // codec 3: u32 image_band_rows, u32 label_band_rows, u32 frame_count
// In a frame_sizes entry: the band is stored raw (its bytes verbatim) instead of as a zstd frame.
inline constexpr std::uint64_t band_stored_raw = std::uint64_t(1) << 63;

inline bool is_band_codec(std::uint32_t codec) { return codec == codec_zstd_bands || codec == codec_zstd_region_bands; }

// A band-frame record's band table, checked against its layout and stored size.
struct band_table {
    std::uint32_t image_band_rows = 0, label_band_rows = 0;  // rows per band; the label's 0 without a label
    std::uint32_t image_bands = 0, label_bands = 0;          // ceil(height / rows) each; 0 without a label
    const unsigned char* sizes = nullptr;   // frame_count u64 compressed sizes
    const unsigned char* frames = nullptr;  // the first frame; the others follow back to back
    std::uint64_t image_row_bytes = 0, label_row_bytes = 0;

    std::uint32_t regions() const { return label_bands ? 2 : 1; }
    std::uint32_t frame_count() const { return image_bands + label_bands; }
    std::uint32_t band_rows(std::uint32_t region) const { return region == 0 ? image_band_rows : label_band_rows; }
    std::uint32_t bands(std::uint32_t region) const { return region == 0 ? image_bands : label_bands; }
    std::uint32_t first_frame(std::uint32_t region) const { return region == 0 ? 0 : image_bands; }
    std::uint64_t row_bytes(std::uint32_t region) const { return region == 0 ? image_row_bytes : label_row_bytes; }
    std::uint64_t frame_size(std::uint32_t f) const { return load_u64(sizes + 8 * std::size_t(f)) & ~band_stored_raw; }
    bool frame_raw(std::uint32_t f) const { return (load_u64(sizes + 8 * std::size_t(f)) & band_stored_raw) != 0; }
    std::uint32_t band_begin(std::uint32_t region, std::uint32_t b) const { return b * band_rows(region); }
    std::uint32_t band_end(std::uint32_t region, std::uint32_t b, std::uint32_t height) const {
        const std::uint64_t e = std::uint64_t(b + 1) * band_rows(region);
        return e < height ? std::uint32_t(e) : height;
    }
};

// The stored bytes of a band-frame record begin with the decoded record's first image_offset
// bytes, so the layout comes from them. Checks everything that locates the frames, and that each
// zstd frame is exactly one frame that can hold its band (10.3 rules 2-4 up to decompression).
inline band_table parse_band_table(const record_layout& r, const unsigned char* stored, std::uint64_t stored_size,
                                   std::uint32_t codec = codec_zstd_bands) {
    const bool per_region = codec == codec_zstd_region_bands;
    const std::size_t fixed = per_region ? region_band_table_fixed_size : band_table_fixed_size;
    if (stored_size < r.image_offset + fixed)
        throw error("band record of " + std::to_string(stored_size) + " bytes ends before its band table");
    const unsigned char* t = stored + r.image_offset;
    band_table b;
    b.image_band_rows = load_u32(t);
    if (per_region) b.label_band_rows = load_u32(t + 4);
    else if (r.label_bytes) b.label_band_rows = b.image_band_rows;
    const std::uint32_t frame_count = load_u32(t + fixed - 4);
    if (b.image_band_rows == 0 || b.image_band_rows > r.height)
        throw error("band rows " + std::to_string(b.image_band_rows) + " is not between 1 and the height " + std::to_string(r.height));
    if (r.label_bytes && (b.label_band_rows == 0 || b.label_band_rows > r.height))
        throw error("label band rows " + std::to_string(b.label_band_rows) + " is not between 1 and the height " +
                    std::to_string(r.height));
    if (!r.label_bytes && b.label_band_rows != 0)
        throw error("label band rows " + std::to_string(b.label_band_rows) + " in a record without a label (0 expected)");
    b.image_bands = (r.height + b.image_band_rows - 1) / b.image_band_rows;
    b.label_bands = r.label_bytes ? (r.height + b.label_band_rows - 1) / b.label_band_rows : 0;
    if (frame_count != b.frame_count())
        throw error("band table lists " + std::to_string(frame_count) + " frames, " + std::to_string(b.frame_count()) +
                    " expected");
    const std::uint64_t table_end = r.image_offset + fixed + 8 * std::uint64_t(frame_count);
    if (stored_size < table_end) throw error("band table runs past the stored record");
    b.sizes = t + fixed;
    b.frames = stored + table_end;
    b.image_row_bytes = r.image_bytes / r.height;
    b.label_row_bytes = r.label_bytes / r.height;
    // Each size must fit in what is left of the record after the frames before it, so the sizes
    // never add up past stored_size (no sum that wraps around 2^64 can pass). Each frame's block
    // headers must be able to hold its band before anything is allocated or written for it: a
    // few damaged or hostile bytes must not claim gigabytes.
    std::uint64_t left = stored_size - table_end;
    const unsigned char* frame = b.frames;
    for (std::uint32_t f = 0; f < frame_count; ++f) {
        const std::uint64_t n = b.frame_size(f);
        if (n > left) throw error("band frame " + std::to_string(f) + " runs past the stored record");
        const std::uint32_t region = f < b.image_bands ? 0 : 1;
        const std::uint32_t band = f - b.first_frame(region);
        const std::uint64_t want =
            std::uint64_t(b.band_end(region, band, r.height) - b.band_begin(region, band)) * b.row_bytes(region);
        if (b.frame_raw(f)) {
            if (n != want)
                throw error("raw band " + std::to_string(f) + " is " + std::to_string(n) + " bytes, its band is " + std::to_string(want));
            frame += n;
            left -= n;
            continue;
        }
        // One zstd frame and nothing else: no skippable frame, no second frame after it.
        const std::size_t one = ZSTD_findFrameCompressedSize(frame, static_cast<std::size_t>(n));
        if (!ZSTD_isError(one) && one != n)
            throw error("band frame " + std::to_string(f) + " is followed by " + std::to_string(n - one) +
                        " more bytes in its entry (a band is exactly one zstd frame)");
        const std::uint64_t bound = zstd_decoded_bound(frame, static_cast<std::size_t>(n));
        if (bound < want)
            throw error("band frame " + std::to_string(f) + " holds at most " + std::to_string(bound) + " bytes, its band is " +
                        std::to_string(want));
        frame += n;
        left -= n;
    }
    if (left != 0) throw error(std::to_string(left) + " bytes follow the last band frame");
    return b;
}

// Frame `f` must declare its band's size: a frame of another size is damage, refused before any
// byte of it is decoded.
inline void check_band_content_size(const unsigned char* frame, std::uint64_t frame_size, std::uint64_t band_bytes,
                                    std::uint32_t f) {
    const unsigned long long content = ZSTD_getFrameContentSize(frame, static_cast<std::size_t>(frame_size));
    if (content != band_bytes)
        throw error("band frame " + std::to_string(f) + " declares " +
                    (content == ZSTD_CONTENTSIZE_ERROR || content == ZSTD_CONTENTSIZE_UNKNOWN ? std::string("no valid size")
                                                                                             : std::to_string(content) + " bytes") +
                    ", its band is " + std::to_string(band_bytes));
}

// Decompresses frame `f` (`frame` points at it) into exactly `bytes` bytes at `dst`.
inline void decompress_band(ZSTD_DCtx* dctx, const unsigned char* frame, std::uint64_t frame_size, unsigned char* dst,
                            std::uint64_t bytes, std::uint32_t f) {
    check_band_content_size(frame, frame_size, bytes, f);
    const std::size_t n = ZSTD_decompressDCtx(dctx, dst, static_cast<std::size_t>(bytes), frame, static_cast<std::size_t>(frame_size));
    if (ZSTD_isError(n)) throw error("band frame " + std::to_string(f) + ": zstd: " + ZSTD_getErrorName(n));
    if (n != bytes)
        throw error("band frame " + std::to_string(f) + " decompressed to " + std::to_string(n) + " bytes, its band is " +
                    std::to_string(bytes));
}

// Decompresses the first `bytes` bytes of frame `f`'s band, which holds `band_bytes` in all, into
// `dst`, with streaming zstd stopped once they are out: a crop that ends early in a tall band (a
// label stored as one frame) skips decoding the rest. libzstd decodes each block into its own
// window buffer (at most the frame's content size, kept in the context) and copies it out: per
// byte about 1.2x a one-shot decode for one-hot label frames and 1.4x for index maps (they decode
// at nearly memcpy speed), so the caller does this only where it skips at least 1/8 of the band
// (measured: 256x256 crops of 512x512 one-hot records 4% faster, 512x512 crops of 1080p index
// records the same). Without the rest of the frame, damage there goes unseen here: the record's
// checksum (verified before) covers it.
inline void decompress_band_prefix(ZSTD_DCtx* dctx, const unsigned char* frame, std::uint64_t frame_size, unsigned char* dst,
                                   std::uint64_t bytes, std::uint64_t band_bytes, std::uint32_t f) {
    check_band_content_size(frame, frame_size, band_bytes, f);
    const std::size_t reset = ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);  // a stream begins
    if (ZSTD_isError(reset)) throw error(std::string("zstd: ") + ZSTD_getErrorName(reset));
    ZSTD_inBuffer in{frame, static_cast<std::size_t>(frame_size), 0};
    ZSTD_outBuffer out{dst, static_cast<std::size_t>(bytes), 0};
    while (out.pos < out.size) {
        const std::size_t in_before = in.pos, out_before = out.pos;
        const std::size_t r = ZSTD_decompressStream(dctx, &out, &in);
        if (ZSTD_isError(r)) throw error("band frame " + std::to_string(f) + ": zstd: " + ZSTD_getErrorName(r));
        if (out.pos < out.size && (r == 0 || (in.pos == in_before && out.pos == out_before)))
            throw error("band frame " + std::to_string(f) + " ends after " + std::to_string(out.pos) + " bytes, its band is " +
                        std::to_string(band_bytes));
    }
}

// Decompresses the bands that hold rows [row_begin, row_end) of the image (into image_dst, which
// stands for row 0) and of the label (into label_dst, likewise); a null destination skips that
// region. Rows outside the range may be written too (the rest of a band that holds some of
// them); rows of bands outside the range are left untouched.
inline void decompress_bands(ZSTD_DCtx* dctx, const band_table& b, std::uint32_t height, std::uint32_t row_begin,
                             std::uint32_t row_end, unsigned char* image_dst, unsigned char* label_dst) {
    const unsigned char* frame = b.frames;
    for (std::uint32_t region = 0; region < b.regions(); ++region) {
        unsigned char* dst = region == 0 ? image_dst : label_dst;
        const std::uint64_t row_bytes = b.row_bytes(region);
        for (std::uint32_t band = 0; band < b.bands(region); ++band) {
            const std::uint32_t f = b.first_frame(region) + band;
            const std::uint64_t size = b.frame_size(f);
            const std::uint32_t first = b.band_begin(region, band), last = b.band_end(region, band, height);
            if (dst && last > row_begin && first < row_end) {
                const std::uint64_t band_bytes = std::uint64_t(last - first) * row_bytes;
                if (b.frame_raw(f)) std::memcpy(dst + first * row_bytes, frame, static_cast<std::size_t>(size));  // size checked at parse
                else if (row_end < last && 8 * std::uint64_t(row_end - first) <= 7 * std::uint64_t(last - first))
                    decompress_band_prefix(dctx, frame, size, dst + first * row_bytes, std::uint64_t(row_end - first) * row_bytes,
                                           band_bytes, f);
                else decompress_band(dctx, frame, size, dst + first * row_bytes, band_bytes, f);
            }
            frame += size;
        }
    }
}

// Decompresses the bands of one region (0: the image, 1: the label) one at a time into `scratch`
// and calls f(first_row, end_row, rows) after each, `rows` holding the band's rows as stored (a
// raw band: its stored bytes, in place). A conversion in f then reads rows that are still in
// the cache.
template <class F>
inline void for_each_band(ZSTD_DCtx* dctx, const band_table& b, std::uint32_t height, std::uint32_t region,
                          std::vector<unsigned char>& scratch, F&& f) {
    const unsigned char* frame = b.frames;
    for (std::uint32_t g = 0; g < b.first_frame(region); ++g) frame += b.frame_size(g);
    const std::uint64_t row_bytes = b.row_bytes(region);
    for (std::uint32_t band = 0; band < b.bands(region); ++band) {
        const std::uint32_t g = b.first_frame(region) + band;
        const std::uint64_t size = b.frame_size(g);
        const std::uint32_t first = b.band_begin(region, band), last = b.band_end(region, band, height);
        const std::uint64_t bytes = std::uint64_t(last - first) * row_bytes;
        const unsigned char* rows = frame;  // size checked at parse
        if (!b.frame_raw(g)) {
            if (scratch.size() < bytes) scratch.resize(static_cast<std::size_t>(bytes));
            decompress_band(dctx, frame, size, scratch.data(), bytes, g);
            rows = scratch.data();
        }
        f(first, last, rows);
        frame += size;
    }
}

}  // namespace shardpack::detail
