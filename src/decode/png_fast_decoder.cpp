#include "decode/png_fast_decoder.hpp"

#if SHARDPACK_HAVE_LIBDEFLATE
#include <libdeflate.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "decode/color_convert.hpp"
#include "decode/probe_counts.hpp"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#endif

namespace shardpack {

#if !SHARDPACK_HAVE_LIBDEFLATE

bool decode_png_fast(const std::uint8_t*, std::size_t, const decode_request&, image_u8&, decoded_info*) { return false; }

#else

namespace {

std::uint32_t load_be32(const std::uint8_t* p) {
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) | (std::uint32_t(p[2]) << 8) | p[3];
}

struct decompressor_deleter {
    void operator()(libdeflate_decompressor* d) const { libdeflate_free_decompressor(d); }
};

// Per-thread buffers and inflater: the packer decodes from many threads, each reusing these.
struct fast_scratch {
    std::unique_ptr<libdeflate_decompressor, decompressor_deleter> inflater{libdeflate_alloc_decompressor()};
    std::vector<std::uint8_t> idat, raw, rgba_row;
};

struct png_info {
    std::uint32_t width = 0, height = 0;
    unsigned color_type = 0, source_channels = 0;
    const std::uint8_t* palette = nullptr;
    std::size_t palette_entries = 0;
    const std::uint8_t* trns = nullptr;
    std::size_t trns_entries = 0;
};

// The Paeth predictor in the form that compiles to conditional moves: pa = |p - a| = |b - c|,
// pb = |a - c|, pc = |a + b - 2c|.
inline std::uint8_t paeth(int a, int b, int c) {
    const int pa = std::abs(b - c), pb = std::abs(a - c), pc = std::abs(a + b - 2 * c);
    const int ab = pb < pa ? b : a;
    const int pab = pb < pa ? pb : pa;
    return std::uint8_t(pc < pab ? c : ab);
}

#if defined(__SSE2__)
// Average and Paeth for 3- and 4-byte pixels, a pixel at a time in SSE2 lanes (the per-byte
// loops below carry a dependency from byte to byte); exact integer arithmetic, the same bytes.
// The algorithm of libpng's filter_sse2_intrinsics.c.
// Loads 4 bytes whatever Bpp is (one plain load: a 3-byte copy through memory would stall on
// store forwarding); a 3-byte pixel's 4th lane is never stored and no lane affects another.
// Rows are followed by at least one readable byte (the next row's filter byte, or the padding
// after the last row; the zero row is larger than any row).
inline __m128i load_pixel(const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return _mm_cvtsi32_si128(static_cast<int>(v));
}
template <int Bpp>
inline void store_pixel(std::uint8_t* p, __m128i v) {
    const auto x = static_cast<std::uint32_t>(_mm_cvtsi128_si32(v));
    std::memcpy(p, &x, Bpp);
}

template <int Bpp>
void unfilter_average_sse2(std::uint8_t* row, const std::uint8_t* prior, std::size_t n) {
    const __m128i one = _mm_set1_epi8(1);
    __m128i a = _mm_setzero_si128();
    for (std::size_t i = 0; i + Bpp <= n; i += Bpp) {
        const __m128i b = load_pixel(prior + i);
        // floor((a + b) / 2): _mm_avg_epu8 rounds up, minus 1 where a + b is odd.
        const __m128i avg = _mm_sub_epi8(_mm_avg_epu8(a, b), _mm_and_si128(_mm_xor_si128(a, b), one));
        a = _mm_add_epi8(load_pixel(row + i), avg);
        store_pixel<Bpp>(row + i, a);
    }
}

inline __m128i abs_i16(__m128i x) {
    const __m128i negative = _mm_cmplt_epi16(x, _mm_setzero_si128());
    return _mm_sub_epi16(_mm_xor_si128(x, negative), negative);
}
inline __m128i select(__m128i c, __m128i t, __m128i e) { return _mm_or_si128(_mm_and_si128(c, t), _mm_andnot_si128(c, e)); }

template <int Bpp>
void unfilter_paeth_sse2(std::uint8_t* row, const std::uint8_t* prior, std::size_t n) {
    const __m128i zero = _mm_setzero_si128();
    __m128i a = zero, b = zero, c = zero;  // left, up, up-left: 16-bit lanes
    for (std::size_t i = 0; i + Bpp <= n; i += Bpp) {
        c = b;
        b = _mm_unpacklo_epi8(load_pixel(prior + i), zero);
        __m128i d = _mm_unpacklo_epi8(load_pixel(row + i), zero);
        __m128i pa = _mm_sub_epi16(b, c), pb = _mm_sub_epi16(a, c);
        __m128i pc = _mm_add_epi16(pa, pb);
        pa = abs_i16(pa);
        pb = abs_i16(pb);
        pc = abs_i16(pc);
        const __m128i smallest = _mm_min_epi16(pc, _mm_min_epi16(pa, pb));
        const __m128i nearest = select(_mm_cmpeq_epi16(pa, smallest), a, select(_mm_cmpeq_epi16(pb, smallest), b, c));
        d = _mm_add_epi8(d, nearest);  // modulo 256 in the low byte; the high byte stays 0
        store_pixel<Bpp>(row + i, _mm_packus_epi16(d, d));
        a = d;
    }
}
#endif

// Undoes the row's filter in place; `prior` is the previous unfiltered row (zeros for row 0).
bool unfilter(std::uint8_t type, std::uint8_t* row, const std::uint8_t* prior, std::size_t n, std::size_t bpp) {
    switch (type) {
        case 0: return true;
        case 1:
            for (std::size_t i = bpp; i < n; ++i) row[i] = std::uint8_t(row[i] + row[i - bpp]);
            return true;
        case 2:
            for (std::size_t i = 0; i < n; ++i) row[i] = std::uint8_t(row[i] + prior[i]);
            return true;
        case 3:
#if defined(__SSE2__)
            if (bpp == 3) return unfilter_average_sse2<3>(row, prior, n), true;
            if (bpp == 4) return unfilter_average_sse2<4>(row, prior, n), true;
#endif
            for (std::size_t i = 0; i < bpp; ++i) row[i] = std::uint8_t(row[i] + (prior[i] >> 1));
            for (std::size_t i = bpp; i < n; ++i) row[i] = std::uint8_t(row[i] + ((row[i - bpp] + prior[i]) >> 1));
            return true;
        case 4:
#if defined(__SSE2__)
            if (bpp == 3) return unfilter_paeth_sse2<3>(row, prior, n), true;
            if (bpp == 4) return unfilter_paeth_sse2<4>(row, prior, n), true;
#endif
            for (std::size_t i = 0; i < bpp; ++i) row[i] = std::uint8_t(row[i] + prior[i]);
            for (std::size_t i = bpp; i < n; ++i) row[i] = std::uint8_t(row[i] + paeth(row[i - bpp], prior[i], prior[i - bpp]));
            return true;
        default: return false;
    }
}

// One unfiltered source row to the wanted layout, as libpng's transforms would give it.
bool convert_row(const png_info& in, const std::uint8_t* src, std::uint8_t* dst, std::uint32_t want,
                 std::vector<std::uint8_t>& rgba) {
    const std::size_t w = in.width;
    if (in.color_type == 3 && want == 3) {  // palette straight to RGB (alpha would be dropped)
        for (std::size_t x = 0; x < w; ++x, dst += 3) {
            const std::size_t i = src[x];
            if (i >= in.palette_entries) return false;
            std::memcpy(dst, in.palette + 3 * i, 3);
        }
        return true;
    }
    if (in.color_type == 3) {  // palette: expand to RGBA first
        rgba.resize(w * 4);
        for (std::size_t x = 0; x < w; ++x) {
            const std::size_t i = src[x];
            if (i >= in.palette_entries) return false;  // libpng decides what an invalid index means
            std::memcpy(&rgba[x * 4], in.palette + 3 * i, 3);
            rgba[x * 4 + 3] = i < in.trns_entries ? in.trns[i] : 255;
        }
        src = rgba.data();
    }
    const unsigned sc = in.color_type == 3 ? 4 : in.source_channels;
    const bool grey_source = in.color_type == 0 || in.color_type == 4;
    // The row already has the wanted layout (RGB as RGB, RGBA as RGBA, gray as gray): one
    // memcpy instead of a per-pixel loop (the common case of color masks and photos).
    if (in.color_type != 3 && sc == want && (grey_source == (want == 1))) {
        std::memcpy(dst, src, w * want);
        return true;
    }
    if (!grey_source && sc == 4 && want == 3) {  // RGBA -> RGB: alpha dropped
        for (std::size_t x = 0; x < w; ++x, src += 4, dst += 3) dst[0] = src[0], dst[1] = src[1], dst[2] = src[2];
        return true;
    }
    for (std::size_t x = 0; x < w; ++x) {
        const std::uint8_t* s = src + x * sc;
        std::uint8_t* d = dst + x * want;
        if (grey_source) {
            const std::uint8_t a = sc == 2 ? s[1] : 255;
            if (want == 1) d[0] = s[0];
            else {
                d[0] = d[1] = d[2] = s[0];
                if (want == 4) d[3] = a;
            }
        } else if (want == 1) {
            rgb_to_gray_pil(s, d, 1);
        } else {
            d[0] = s[0];
            d[1] = s[1];
            d[2] = s[2];
            if (want == 4) d[3] = sc == 4 ? s[3] : 255;
        }
    }
    return true;
}

}  // namespace

bool decode_png_fast(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                     decoded_info* info) {
    static const std::uint8_t signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    if (size < 8 + 25 || std::memcmp(data, signature, 8) != 0) return false;
    thread_local fast_scratch scratch;
    if (!scratch.inflater) return false;

    png_info in;
    scratch.idat.clear();
    bool seen_ihdr = false, seen_iend = false;
    std::size_t pos = 8;
    while (pos + 12 <= size && !seen_iend) {
        const std::uint32_t length = load_be32(data + pos);
        if (length > size - pos - 12) return false;
        const std::uint8_t* type = data + pos + 4;
        const std::uint8_t* body = type + 4;
        if (libdeflate_crc32(0, type, length + 4) != load_be32(body + length)) return false;
        if (!seen_ihdr) {
            probe_counting::count(probe_counting::header_parses);
            if (std::memcmp(type, "IHDR", 4) != 0 || length != 13) return false;
            in.width = load_be32(body);
            in.height = load_be32(body + 4);
            const unsigned depth = body[8];
            in.color_type = body[9];
            if (depth != 8 || body[10] != 0 || body[11] != 0 || body[12] != 0) return false;  // not interlaced
            static const unsigned channels_of[7] = {1, 0, 3, 1, 2, 0, 4};
            if (in.color_type > 6 || channels_of[in.color_type] == 0) return false;
            in.source_channels = channels_of[in.color_type];
            if (in.width == 0 || in.height == 0 || in.width > max_decode_dimension || in.height > max_decode_dimension)
                return false;
            seen_ihdr = true;
        } else if (std::memcmp(type, "PLTE", 4) == 0) {
            if (length % 3 != 0 || length == 0 || length > 768) return false;
            in.palette = body;
            in.palette_entries = length / 3;
        } else if (std::memcmp(type, "tRNS", 4) == 0) {
            if (in.color_type != 3) return false;  // a gray/RGB color key: libpng's job
            in.trns = body;
            in.trns_entries = length;
        } else if (std::memcmp(type, "IDAT", 4) == 0) {
            scratch.idat.insert(scratch.idat.end(), body, body + length);
        } else if (std::memcmp(type, "IEND", 4) == 0) {
            seen_iend = true;
        } else if (!(type[0] & 0x20)) {
            return false;  // an unknown critical chunk
        }
        pos += std::size_t(length) + 12;
    }
    if (!seen_iend || scratch.idat.empty() || (in.color_type == 3 && !in.palette)) return false;

    const std::uint32_t want = channel_count(req.layout);
    const std::size_t stride = std::size_t(in.width) * in.source_channels;
    const std::uint64_t raw_size = std::uint64_t(in.height) * (stride + 1);
    // Deflate cannot expand more than 1032:1, so a stream this short cannot hold the rows: leave
    // it to libpng's error rather than allocate for it.
    if (raw_size > max_decoded_bytes || raw_size / 1032 > scratch.idat.size()) return false;
    // The output may have more channels than the file (gray as RGBA: 4 times): over the decode
    // limit, libpng's path refuses it with the usual message, before anything is allocated.
    const std::uint32_t rows = (req.max_rows == 0 || req.max_rows >= in.height) ? in.height : req.max_rows;
    if (std::uint64_t(in.width) * rows * want > max_decoded_bytes) return false;
    // + 4: the SIMD unfilter reads a pixel's 4 bytes, one past the last row's end.
    scratch.raw.resize(static_cast<std::size_t>(raw_size) + 4);
    std::size_t produced = 0, consumed = 0;
    if (libdeflate_zlib_decompress_ex(scratch.inflater.get(), scratch.idat.data(), scratch.idat.size(), scratch.raw.data(),
                                      static_cast<std::size_t>(raw_size), &consumed, &produced) != LIBDEFLATE_SUCCESS ||
        produced != raw_size)
        return false;
    // Much data after the zlib stream: libpng's path decides (it bounds such data), so that both
    // paths take the same files.
    if (scratch.idat.size() - consumed > max_png_trailing_idat_bytes) return false;

    out.width = in.width;
    out.height = rows;
    out.channels = want;
    out.pixels.resize(std::size_t(in.width) * rows * want);
    const std::size_t bpp = in.source_channels;
    static const std::uint8_t zeros[4 * 65536] = {};
    const std::uint8_t* prior = zeros;
    for (std::uint32_t y = 0; y < rows; ++y) {
        if (decode_interrupted(req)) return false;  // libpng's path then stops at once, with its message
        std::uint8_t* line = scratch.raw.data() + std::size_t(y) * (stride + 1);
        if (!unfilter(line[0], line + 1, prior, stride, bpp)) return false;
        if (!convert_row(in, line + 1, out.pixels.data() + std::size_t(y) * in.width * want, want, scratch.rgba_row))
            return false;
        prior = line + 1;
    }
    if (info) *info = decoded_info{in.width, in.height};
    return true;
}

#endif

}  // namespace shardpack
