// The conversions read_into and read_batch make from a record's stored bytes into the caller's
// buffers (sample_buffers): image pixels as uint8 or normalized float, interleaved or planar;
// segmentation labels as one-hot or class ids, whatever the stored layout; class ids. They work
// on spans of pixels, so a band-frame record converts band by band (record_read.hpp).
// Part of reader.hpp, which includes it after the declarations it uses: include
// <shardpack/reader.hpp>, not this file.
#pragma once
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>  // SSSE3 shuffles for channel planes, AVX2 float conversions (compiled for them only where used)
#endif

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "endian.hpp"
#include "error.hpp"
#include "format.hpp"

namespace shardpack {

namespace detail {

// The class id of pixel p of a stored segmentation label, or the ignore value.
inline std::uint32_t stored_class(const schema_record& s, const unsigned char* label, std::size_t p) {
    if (s.label_layout == layout_code::index)
        return s.label_dtype_bytes == 1 ? label[p] : load_u16(label + 2 * p);
    const unsigned char* v = label + p * s.class_count;
    for (std::uint32_t c = 0; c < s.class_count; ++c)
        if (v[c]) return c;
    return s.ignore_value;
}

// The index of the lowest nonzero byte of v (v != 0), bytes numbered from the least significant.
inline std::uint32_t lowest_set_byte(std::uint64_t v) {
#if defined(__GNUC__) || defined(__clang__)
    return static_cast<std::uint32_t>(__builtin_ctzll(v)) / 8;
#else
    std::uint32_t c = 0;
    while (!(v & 0xff)) {
        v >>= 8;
        ++c;
    }
    return c;
#endif
}

// Calls f(p, stored_class(s, label, p)) for every pixel p in order, choosing the stored layout
// once: the per-pixel loop then keeps everything in registers (stores through uint8_t pointers
// may alias anything, so a loop that read the schema per pixel would reload it every time).
template <class F>
inline void for_each_stored_class(const schema_record& s, const unsigned char* label, std::size_t pixels, F&& f) {
    const std::uint32_t k = s.class_count, ignore = s.ignore_value;
    if (s.label_layout == layout_code::index && s.label_dtype_bytes == 1) {
        for (std::size_t p = 0; p < pixels; ++p) f(p, std::uint32_t(label[p]));
    } else if (s.label_layout == layout_code::index) {
        for (std::size_t p = 0; p < pixels; ++p) f(p, std::uint32_t(load_u16(label + 2 * p)));
    } else {
        std::size_t p = 0;
        if (k <= 8) {
            // One 8-byte load per pixel: its lowest nonzero byte is the class. A search byte by
            // byte branches on the data, and random class boundaries mispredict most of those
            // branches (it cost more than decompressing the record). The last few pixels, whose
            // load would run past the label, take the loop below.
            const std::uint64_t mask = k == 8 ? ~std::uint64_t(0) : (std::uint64_t(1) << (8 * k)) - 1;
            const std::size_t fast = pixels * k >= 8 ? (pixels * k - 8) / k + 1 : 0;
            for (; p < fast; ++p) {
                const std::uint64_t v = load_u64(label + p * k) & mask;
                f(p, v ? lowest_set_byte(v) : ignore);
            }
        }
        for (; p < pixels; ++p) {
            const unsigned char* v = label + p * k;
            std::uint32_t c = 0;
            while (c < k && !v[c]) ++c;
            f(p, c < k ? c : ignore);
        }
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
// Three uint8 planes from 3-channel pixels with SSSE3 byte shuffles, 16 pixels a step (the
// compiler's own code for the scalar loop, SSE2 only, moved about a third as many bytes a
// second). Compiled for SSSE3 whatever the build's flags, and called only where the CPU has it.
__attribute__((target("ssse3"))) inline std::size_t planes3_ssse3(const unsigned char* src, std::uint8_t* out0,
                                                                   std::uint8_t* out1, std::uint8_t* out2,
                                                                   std::size_t count) {
    // mask[plane][vector][j]: the byte of input vector `vector` (of the 3 that hold 16 pixels)
    // that goes to byte j of `plane`, or 0x80 (zero).
    alignas(16) static const auto masks = [] {
        std::array<std::array<std::array<std::uint8_t, 16>, 3>, 3> m{};
        for (int plane = 0; plane < 3; ++plane)
            for (int v = 0; v < 3; ++v)
                for (int j = 0; j < 16; ++j) {
                    const int at = 3 * j + plane;
                    m[plane][v][j] = at / 16 == v ? std::uint8_t(at % 16) : std::uint8_t(0x80);
                }
        return m;
    }();
    std::uint8_t* out[3] = {out0, out1, out2};
    __m128i shuffle[3][3];
    for (int plane = 0; plane < 3; ++plane)
        for (int v = 0; v < 3; ++v)
            shuffle[plane][v] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(masks[plane][v].data()));
    std::size_t p = 0;
    for (; p + 16 <= count; p += 16, src += 48) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
        for (int plane = 0; plane < 3; ++plane) {
            const __m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, shuffle[plane][0]), _mm_shuffle_epi8(b, shuffle[plane][1])),
                                           _mm_shuffle_epi8(c, shuffle[plane][2]));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out[plane] + p), v);
        }
    }
    return p;  // pixels done; the caller does the rest
}

inline bool cpu_has_ssse3() {
    static const bool has = __builtin_cpu_supports("ssse3");
    return has;
}

// One-hot bytes from uint8 class ids, interleaved (dst[p * k + c] = ids[p] == c), for k of 1 to
// 16 classes, 16 pixels a step: their 16 * k output bytes are k vectors, and byte i of vector j
// belongs to pixel (16 * j + i) / k and class (16 * j + i) % k, so each vector is a shuffle of
// the 16 ids compared with a constant. One pass of full-width stores: a zeroed output and then
// one byte stored a pixel went over the output twice, the second time byte by byte; the write of
// the output (6 bytes a pixel for 6 classes) is now what it costs (an AVX2 version, 32-byte
// stores, was no faster). An id of k or more (the ignore value) matches no class: zeros, as the
// scalar code writes. Compiled for SSSE3 whatever the build's flags, called only where the CPU
// has it.
struct one_hot_shuffle {
    alignas(16) std::uint8_t pick[16][16];     // [j][i]: the pixel (0-15) byte i of vector j comes from
    alignas(16) std::uint8_t classes[16][16];  // [j][i]: the class it stands for
};
inline const one_hot_shuffle& one_hot_shuffle_for(std::size_t k) {  // 1 <= k <= 16
    static const auto tables = [] {
        std::array<one_hot_shuffle, 17> t{};
        for (std::size_t n = 1; n <= 16; ++n)
            for (std::size_t j = 0; j < n; ++j)
                for (std::size_t i = 0; i < 16; ++i) {
                    t[n].pick[j][i] = static_cast<std::uint8_t>((16 * j + i) / n);
                    t[n].classes[j][i] = static_cast<std::uint8_t>((16 * j + i) % n);
                }
        return t;
    }();
    return tables[k];
}
__attribute__((target("ssse3"))) inline std::size_t one_hot_from_ids_ssse3(const unsigned char* ids, std::uint8_t* dst,
                                                                            std::size_t count, std::size_t k) {
    const one_hot_shuffle& t = one_hot_shuffle_for(k);
    const __m128i one = _mm_set1_epi8(1);
    std::size_t p = 0;
    for (; p + 16 <= count; p += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ids + p));
        std::uint8_t* out = dst + p * k;
        for (std::size_t j = 0; j < k; ++j) {
            const __m128i picked = _mm_shuffle_epi8(v, _mm_load_si128(reinterpret_cast<const __m128i*>(t.pick[j])));
            const __m128i hit = _mm_cmpeq_epi8(picked, _mm_load_si128(reinterpret_cast<const __m128i*>(t.classes[j])));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16 * j), _mm_and_si128(hit, one));
        }
    }
    return p;  // pixels done; the caller does the rest
}

// dst[i] = (float(src[i]) / 255 - mean[i % n]) / stddev[i % n], 24 values a step (n: 1, 3 or
// 4 interleaved channels; 24 is a multiple of each), with AVX2, bit for bit the scalar
// expression's values. `reciprocal` false: each lane does the expression's three IEEE
// single-precision operations in its order (vector divisions). `reciprocal` true: each quotient
// a / b as q = a * RN(1 / b) corrected once, q + (a - q * b) * RN(1 / b), with fused
// multiply-adds (a - q * b is then exact): the correctly rounded quotient except in rare cases,
// and about three times as fast as two divisions, so the caller uses it only where
// reciprocal_is_exact found it equal to the divisions for every byte value of every channel.
// (The lookup table this replaces ran at about one value a cycle.) Returns the values done (a
// multiple of 24); the caller does the rest.
__attribute__((target("avx2,fma"))) inline std::size_t normalize_avx2(const unsigned char* src, float* dst,
                                                                      std::size_t count, std::size_t n, const float* mean,
                                                                      const float* stddev, bool reciprocal) {
    alignas(32) float m[24], sd[24], inv[24];
    for (std::size_t i = 0; i < 24; ++i) {
        m[i] = mean[i % n];
        sd[i] = stddev[i % n];
        inv[i] = 1.0f / sd[i];
    }
    const __m256 scale = _mm256_set1_ps(255.0f), inv_scale = _mm256_set1_ps(1.0f / 255.0f);
    __m256 mv[3], sv[3], iv[3];
    for (int k = 0; k < 3; ++k) {
        mv[k] = _mm256_load_ps(m + 8 * k);
        sv[k] = _mm256_load_ps(sd + 8 * k);
        iv[k] = _mm256_load_ps(inv + 8 * k);
    }
    std::size_t i = 0;
    // (No lambdas or helpers: they would not be compiled for AVX2.)
    if (reciprocal) {
        for (; i + 24 <= count; i += 24)
            for (int k = 0; k < 3; ++k) {
                const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i + 8 * k));
                const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
                const __m256 q = _mm256_mul_ps(v, inv_scale);
                const __m256 t = _mm256_fmadd_ps(_mm256_fnmadd_ps(q, scale, v), inv_scale, q);  // RN(v / 255)
                const __m256 u = _mm256_sub_ps(t, mv[k]);
                const __m256 r = _mm256_mul_ps(u, iv[k]);
                _mm256_storeu_ps(dst + i + 8 * k, _mm256_fmadd_ps(_mm256_fnmadd_ps(r, sv[k], u), iv[k], r));
            }
    } else {
        for (; i + 24 <= count; i += 24)
            for (int k = 0; k < 3; ++k) {
                const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i + 8 * k));
                const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
                _mm256_storeu_ps(dst + i + 8 * k, _mm256_div_ps(_mm256_sub_ps(_mm256_div_ps(v, scale), mv[k]), sv[k]));
            }
    }
    return i;
}

inline bool cpu_has_avx2_fma() {
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
}

// Whether normalize_avx2's reciprocal steps give, for every byte value of each of the n
// channels, the bits of the scalar expression. Asked once per thread and normalisation (the
// answer is remembered): 256 values and divisions a channel.
inline bool reciprocal_is_exact(const normalization& norm, std::size_t n) {
    struct answer {
        normalization norm;
        std::size_t n = 0;
        bool exact = false;
    };
    thread_local answer last;
    if (last.n == n && std::memcmp(last.norm.mean, norm.mean, n * sizeof(float)) == 0 &&
        std::memcmp(last.norm.stddev, norm.stddev, n * sizeof(float)) == 0)
        return last.exact;
    unsigned char values[264] = {};  // 0..255, then padding to a multiple of 24
    for (int v = 0; v < 256; ++v) values[v] = static_cast<unsigned char>(v);
    float fast[264];
    bool exact = true;
    for (std::size_t c = 0; c < n && exact; ++c) {
        normalize_avx2(values, fast, 264, 1, &norm.mean[c], &norm.stddev[c], true);
        for (int v = 0; v < 256 && exact; ++v) {
            const float want = (float(v) / 255.0f - norm.mean[c]) / norm.stddev[c];
            exact = std::memcmp(&fast[v], &want, sizeof(float)) == 0;
        }
    }
    last.norm = norm;
    last.n = n;
    last.exact = exact;
    return exact;
}
#endif

// normalize_avx2's values for `count` interleaved values of n channels (1, 3 or 4) in any
// build: the vector loop where the CPU has AVX2 and FMA, the scalar expression one value at a
// time for the rest.
inline void normalize_interleaved(const unsigned char* src, float* dst, std::size_t count, std::size_t n,
                                  const normalization& norm) {
    std::size_t i = 0;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    if (cpu_has_avx2_fma()) i = normalize_avx2(src, dst, count, n, norm.mean, norm.stddev, reciprocal_is_exact(norm, n));
#endif
    for (; i < count; ++i) dst[i] = (float(src[i]) / 255.0f - norm.mean[i % n]) / norm.stddev[i % n];
}

// convert_pixels' planar case for image channels: N (1, 3 or 4) planes written in one pass (the
// planes past N are null).
template <std::size_t N, class T, class Convert>
inline void planar_pixels(const unsigned char* __restrict src, T* __restrict out0, T* __restrict out1, T* __restrict out2,
                          T* __restrict out3, std::size_t count, std::integral_constant<std::size_t, N>, Convert convert) {
    std::size_t p = 0;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    if constexpr (N == 3 && std::is_same_v<T, std::uint8_t> &&
                  std::is_same_v<decltype(convert(0, 0)), unsigned char>) {  // the identity: uint8 planes
        if (cpu_has_ssse3()) {
            p = planes3_ssse3(src, out0, out1, out2, count);
            src += 3 * p;
        }
    }
#endif
    for (; p < count; ++p, src += N) {
        out0[p] = convert(0, src[0]);
        if constexpr (N > 1) out1[p] = convert(1, src[1]);
        if constexpr (N > 2) out2[p] = convert(2, src[2]);
        if constexpr (N > 3) out3[p] = convert(3, src[3]);
    }
}

// dst = convert(c, src) for every value of `count` interleaved pixels of CH values each, written
// interleaved (dst[p * CH + c]) or planar (dst[c * plane + p]: `plane` is the whole record's
// pixel count, so that a band of rows lands at its place in every plane). `ch` is a
// std::integral_constant for image channels, so the inner loops know it at compile time, or a
// std::size_t (one-hot planes).
template <class Channels, class T, class Convert>
inline void convert_pixels(const unsigned char* src, T* dst, std::size_t count, std::size_t plane, Channels ch,
                           bool planar, Convert convert) {
    const std::size_t n = ch;
    if constexpr (!std::is_same_v<Channels, std::size_t>) {
        if (planar) {
            // Image channels (known at compile time): one pass writing every plane per pixel,
            // which the compiler turns into vector shuffles (a pass of strided loads per plane
            // took about twice as long).
            planar_pixels(src, dst, Channels{} > 1 ? dst + plane : nullptr, Channels{} > 2 ? dst + 2 * plane : nullptr,
                          Channels{} > 3 ? dst + 3 * plane : nullptr, count, ch, convert);
            return;
        }
    }
    if (planar) {
        for (std::size_t c = 0; c < n; ++c) {
            T* out = dst + c * plane;
            const unsigned char* s = src + c;
            for (std::size_t p = 0; p < count; ++p) out[p] = convert(c, s[p * n]);
        }
    } else {
        for (std::size_t p = 0; p < count; ++p, src += n, dst += n)
            for (std::size_t c = 0; c < n; ++c) dst[c] = convert(c, src[c]);
    }
}

// Calls f(std::integral_constant<std::size_t, channels>) for the channel counts the schema allows.
template <class F>
inline void with_channels(std::size_t channels, F&& f) {
    switch (channels) {
        case 1: f(std::integral_constant<std::size_t, 1>{}); break;
        case 3: f(std::integral_constant<std::size_t, 3>{}); break;
        case 4: f(std::integral_constant<std::size_t, 4>{}); break;
        default: throw error("read_into: " + std::to_string(channels) + " channels");  // refused at open
    }
}

inline void need(std::size_t capacity, std::size_t want, const char* what) {
    if (capacity < want)
        throw error(std::string("read_into: ") + what + " buffer holds " + std::to_string(capacity) + " elements, " +
                    std::to_string(want) + " are needed");
}

// Pixels [first, first + count) of a record of `pixels` pixels: the unit the conversions below
// work in, so that a record can be converted band by band while each band's decompressed rows
// are still in the cache (dataset::read_slot), or whole (dataset::fill: first 0, count pixels).
struct pixel_span {
    std::size_t first = 0, count = 0, pixels = 0;
};

// Images of more than 4 channels take one normalisation for all (reader.hpp, normalization):
// its first channel's, once every channel's values are checked equal.
inline normalization uniform_normalization(const normalization& norm, std::size_t channels) {
    if (channels <= 4) return norm;
    for (int c = 1; c < 4; ++c)
        if (norm.mean[c] != norm.mean[0] || norm.stddev[c] != norm.stddev[0])
            throw error("read_into: a normalisation per channel is defined for up to 4 channels; this dataset has " +
                        std::to_string(channels) + " (give every channel the same mean and stddev)");
    return norm;
}

// The uint16 image outputs (image_u16, image_f32) of a uint16 record's span (format 1.4): values
// as stored, or (v / 65535 - mean[c]) / stddev[c].
inline void fill_image_span_u16(const schema_record& s, const unsigned char* image, pixel_span span, const sample_buffers& out,
                                std::size_t slot) {
    const std::size_t ch_n = s.channels, image_n = span.pixels * ch_n, values = span.count * ch_n;
    const bool planar = out.channels_first && ch_n > 1;
    if (out.image_u8)
        throw error("read_into: this dataset stores uint16 images; read them as uint16 (image_u16) or float (image_f32)");
    if (out.image_u16) {
        need(out.image_capacity, (slot + 1) * image_n, "image");
        std::uint16_t* dst = out.image_u16 + slot * image_n;
        if (!planar && little_endian_host()) {
            std::memcpy(dst + span.first * ch_n, image, values * 2);
        } else if (!planar) {
            for (std::size_t i = 0; i < values; ++i) dst[span.first * ch_n + i] = load_u16(image + 2 * i);
        } else {
            for (std::size_t p = 0; p < span.count; ++p)
                for (std::size_t c = 0; c < ch_n; ++c)
                    dst[c * span.pixels + span.first + p] = load_u16(image + 2 * (p * ch_n + c));
        }
    }
    if (out.image_f32) {
        need(out.image_capacity, (slot + 1) * image_n, "image");
        const normalization norm = uniform_normalization(out.norm, ch_n);
        float* dst = out.image_f32 + slot * image_n;
        for (std::size_t p = 0; p < span.count; ++p)
            for (std::size_t c = 0; c < ch_n; ++c) {
                const std::size_t m = ch_n > 4 ? 0 : c;
                const float v = (float(load_u16(image + 2 * (p * ch_n + c))) / 65535.0f - norm.mean[m]) / norm.stddev[m];
                dst[planar ? c * span.pixels + span.first + p : (span.first + p) * ch_n + c] = v;
            }
    }
}

// The image outputs of `out` (slot `slot`) for the span's pixels; `image` holds those pixels as
// stored (interleaved).
inline void fill_image_span(const schema_record& s, const unsigned char* image, pixel_span span, const sample_buffers& out,
                            std::size_t slot) {
    if (s.image_dtype_bytes == 2) return fill_image_span_u16(s, image, span, out, slot);
    const std::size_t ch_n = s.channels, image_n = span.pixels * ch_n;
    const bool planar = out.channels_first;
    if (out.image_u16) {  // uint8 values, widened as they are
        need(out.image_capacity, (slot + 1) * image_n, "image");
        std::uint16_t* dst = out.image_u16 + slot * image_n + (planar ? span.first : span.first * ch_n);
        convert_pixels(image, dst, span.count, span.pixels, ch_n, planar && ch_n > 1,
                       [](std::size_t, unsigned char v) { return std::uint16_t(v); });
    }
    // Channel counts other than 1, 3 and 4 (the bands of format 1.4) take the loops that learn
    // the count at run time.
    const bool fixed_count = ch_n == 1 || ch_n == 3 || ch_n == 4;
    if (out.image_u8) {
        need(out.image_capacity, (slot + 1) * image_n, "image");
        std::uint8_t* dst = out.image_u8 + slot * image_n;
        if (!planar || ch_n == 1) std::memcpy(dst + span.first * ch_n, image, span.count * ch_n);
        else if (!fixed_count)
            convert_pixels(image, dst + span.first, span.count, span.pixels, ch_n, true,
                           [](std::size_t, unsigned char v) { return v; });
        else with_channels(ch_n, [&](auto ch) {
            convert_pixels(image, dst + span.first, span.count, span.pixels, ch, true,
                           [](std::size_t, unsigned char v) { return v; });
        });
    }
    if (out.image_f32) {
        need(out.image_capacity, (slot + 1) * image_n, "image");
        const normalization norm = uniform_normalization(out.norm, ch_n);
        if ((!planar || ch_n == 1) && ch_n <= 4) {  // interleaved values in, interleaved out: no lookup table to make
            normalize_interleaved(image, out.image_f32 + slot * image_n + span.first * ch_n, span.count * ch_n, ch_n, norm);
            return;
        }
        float table[4][256];  // per-channel lookup: one multiply-free load per value
        for (std::size_t c = 0; c < std::min<std::size_t>(ch_n, 4); ++c)
            for (int v = 0; v < 256; ++v)
                table[c][v] = (float(v) / 255.0f - norm.mean[c]) / norm.stddev[c];
        float* dst = out.image_f32 + slot * image_n + (planar ? span.first : span.first * ch_n);
        if (!fixed_count) {  // more than 4 channels share table 0 (uniform_normalization)
            convert_pixels(image, dst, span.count, span.pixels, ch_n, planar,
                           [&table](std::size_t c, unsigned char v) { return table[c < 4 ? c : 0][v]; });
            return;
        }
        with_channels(ch_n, [&](auto ch) {
            convert_pixels(image, dst, span.count, span.pixels, ch, planar,
                           [&table](std::size_t c, unsigned char v) { return table[c][v]; });
        });
    }
}

// 0/1 bytes, ids[p] == c, for `count` uint8 ids: one plane of a planar one-hot output.
inline void plane_from_ids(const unsigned char* __restrict ids, std::uint8_t* __restrict dst, std::size_t count, std::uint8_t c) {
    std::size_t p = 0;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    const __m128i want = _mm_set1_epi8(static_cast<char>(c)), one = _mm_set1_epi8(1);
    for (; p + 16 <= count; p += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ids + p));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + p), _mm_and_si128(_mm_cmpeq_epi8(v, want), one));
    }
#endif
    for (; p < count; ++p) dst[p] = ids[p] == c;
}

// dst[i] = T(bytes[i]) for `count` bytes: 0/1 one-hot values as float, uint8 class ids as
// uint16 or int64 (SSE2, 16 values a step: the compiler leaves such a loop scalar at -O2).
template <class T>
inline void widen_bytes(const std::uint8_t* __restrict bytes, T* __restrict dst, std::size_t count) {
    std::size_t i = 0;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, std::uint16_t> || std::is_same_v<T, std::int64_t>) {
        const __m128i zero = _mm_setzero_si128();
        for (; i + 16 <= count; i += 16) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + i));
            const __m128i lo = _mm_unpacklo_epi8(v, zero), hi = _mm_unpackhi_epi8(v, zero);  // 8 uint16 each
            if constexpr (std::is_same_v<T, std::uint16_t>) {
                _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), lo);
                _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 8), hi);
            } else {
                const __m128i q[4] = {_mm_unpacklo_epi16(lo, zero), _mm_unpackhi_epi16(lo, zero), _mm_unpacklo_epi16(hi, zero),
                                      _mm_unpackhi_epi16(hi, zero)};  // 4 uint32 each
                for (int j = 0; j < 4; ++j) {
                    if constexpr (std::is_same_v<T, float>) {
                        _mm_storeu_ps(dst + i + 4 * j, _mm_cvtepi32_ps(q[j]));
                    } else {
                        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 4 * j), _mm_unpacklo_epi32(q[j], zero));
                        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i + 4 * j + 2), _mm_unpackhi_epi32(q[j], zero));
                    }
                }
            }
        }
    }
#endif
    for (; i < count; ++i) dst[i] = T(bytes[i]);
}

// One-hot uint8 (dst[p * k + c] = ids[p] == c) from `count` uint8 class ids of k classes
// (k <= 255: uint8 ids allow no more), in one pass over the output.
inline void one_hot_bytes_from_ids(const unsigned char* ids, std::uint8_t* dst, std::size_t count, std::size_t k) {
    std::size_t p = 0;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    if (k <= 16 && cpu_has_ssse3()) p = one_hot_from_ids_ssse3(ids, dst, count, k);
#endif
    for (; p < count; ++p) {
        std::uint8_t* v = dst + p * k;
        for (std::size_t c = 0; c < k; ++c) v[c] = ids[p] == c;
    }
}

// fill_one_hot_span's case for uint8 class ids (the index layout of up to 255 classes).
// Interleaved: one-hot bytes in one pass (widened a cache-sized piece at a time for a wider T).
// Planar: plane by plane over pieces of the span small enough for the ids to stay in the cache.
template <class T>
inline void one_hot_from_ids(const unsigned char* ids, pixel_span span, std::size_t k, bool planar, T* dst) {
    constexpr std::size_t piece_bytes = 4096;
    alignas(16) std::uint8_t piece[piece_bytes];
    if (!planar) {
        T* at = dst + span.first * k;
        if constexpr (sizeof(T) == 1) {
            one_hot_bytes_from_ids(ids, reinterpret_cast<std::uint8_t*>(at), span.count, k);
        } else {
            const std::size_t step = piece_bytes / k;  // >= 16 pixels: k <= 255
            for (std::size_t p = 0; p < span.count; p += step) {
                const std::size_t n = std::min(step, span.count - p);
                one_hot_bytes_from_ids(ids + p, piece, n, k);
                widen_bytes(piece, at + p * k, n * k);
            }
        }
        return;
    }
    for (std::size_t p = 0; p < span.count; p += piece_bytes) {
        const std::size_t n = std::min(piece_bytes, span.count - p);
        for (std::size_t c = 0; c < k; ++c) {
            T* out = dst + c * span.pixels + span.first + p;
            if constexpr (sizeof(T) == 1) {
                plane_from_ids(ids + p, reinterpret_cast<std::uint8_t*>(out), n, static_cast<std::uint8_t>(c));
            } else {
                plane_from_ids(ids + p, piece, n, static_cast<std::uint8_t>(c));
                widen_bytes(piece, out, n);
            }
        }
    }
}

// A segmentation one-hot output (H*W*K, or K*H*W when planar) as 0/1 in T for the span's pixels,
// whatever the stored layout; `label` holds those pixels as stored.
template <class T>
inline void fill_one_hot_span(const schema_record& s, const unsigned char* label, pixel_span span, bool planar, T* dst) {
    const std::size_t k = s.class_count, first = span.first, count = span.count, pixels = span.pixels;
    if (s.label_layout == layout_code::one_hot && !planar) {
        if constexpr (sizeof(T) == 1) std::memcpy(dst + first * k, label, count * k);
        else for (std::size_t j = 0; j < count * k; ++j) dst[first * k + j] = T(label[j]);
    } else if (s.label_layout == layout_code::one_hot) {
        convert_pixels(label, dst + first, count, pixels, k, true, [](std::size_t, unsigned char v) { return T(v); });
    } else if (s.label_dtype_bytes == 1) {  // uint8 class ids
        one_hot_from_ids(label, span, k, planar, dst);
    } else if (planar) {
        for (std::size_t c = 0; c < k; ++c) std::fill(dst + c * pixels + first, dst + c * pixels + first + count, T(0));
        T* at = dst + first;
        for_each_stored_class(s, label, count, [at, k, pixels](std::size_t p, std::uint32_t c) {
            if (c < k) at[c * pixels + p] = T(1);
        });
    } else {
        T* at = dst + first * k;
        std::fill(at, at + count * k, T(0));
        for_each_stored_class(s, label, count, [at, k](std::size_t p, std::uint32_t c) {
            if (c < k) at[p * k + c] = T(1);
        });
    }
}

// The segmentation label outputs of `out` (slot `slot`) for the span's pixels; `label` holds
// those pixels as stored.
inline void fill_label_span(const schema_record& s, const unsigned char* label, pixel_span span, const sample_buffers& out,
                            std::size_t slot) {
    const std::size_t pixels = span.pixels, one_hot_n = pixels * s.class_count;
    if (out.label_u8 || out.label_f32) need(out.label_capacity, (slot + 1) * one_hot_n, "label");
    if (out.label_u8) fill_one_hot_span(s, label, span, out.channels_first, out.label_u8 + slot * one_hot_n);
    if (out.label_f32) fill_one_hot_span(s, label, span, out.channels_first, out.label_f32 + slot * one_hot_n);
    if (out.label_index || out.label_index_i64 || out.label_index_u8)
        need(out.label_index_capacity, (slot + 1) * pixels, "label index");
    const std::size_t at = slot * pixels + span.first;
    if (out.label_index_u8) {
        // Class ids below 255 and the ignore value 255 fit; more classes would wrap.
        if (s.class_count > 255)
            throw error("read_into: uint8 label indices need at most 255 classes, the dataset has " +
                        std::to_string(s.class_count));
        std::uint8_t* dst = out.label_index_u8 + at;
        if (s.label_layout == layout_code::index && s.label_dtype_bytes == 1) std::memcpy(dst, label, span.count);
        else for_each_stored_class(s, label, span.count,
                                   [dst](std::size_t p, std::uint32_t c) { dst[p] = static_cast<std::uint8_t>(c); });
    }
    const bool u8_ids = s.label_layout == layout_code::index && s.label_dtype_bytes == 1;
    if (out.label_index) {
        std::uint16_t* dst = out.label_index + at;
        if (u8_ids) widen_bytes(label, dst, span.count);
        else for_each_stored_class(s, label, span.count,
                                   [dst](std::size_t p, std::uint32_t c) { dst[p] = static_cast<std::uint16_t>(c); });
    }
    if (out.label_index_i64) {
        std::int64_t* dst = out.label_index_i64 + at;
        if (u8_ids) widen_bytes(label, dst, span.count);
        else for_each_stored_class(s, label, span.count, [dst](std::size_t p, std::uint32_t c) { dst[p] = std::int64_t(c); });
    }
}

// The outputs of `out` that do not come from the image or label bytes: class ids, and a
// classification record's one-hot label.
inline void fill_record_labels(const schema_record& s, const record_layout& r, const sample_buffers& out, std::size_t slot) {
    if (out.class_id) out.class_id[slot] = r.class_id;
    if (out.class_id_i64) out.class_id_i64[slot] = r.class_id;
    if (s.task != task_code::classification) return;
    const std::size_t k = s.class_count;
    if (out.label_u8 || out.label_f32) need(out.label_capacity, (slot + 1) * k, "label");
    if (out.label_u8) {
        std::fill(out.label_u8 + slot * k, out.label_u8 + (slot + 1) * k, std::uint8_t(0));
        out.label_u8[slot * k + r.class_id] = 1;
    }
    if (out.label_f32) {
        std::fill(out.label_f32 + slot * k, out.label_f32 + (slot + 1) * k, 0.0f);
        out.label_f32[slot * k + r.class_id] = 1.0f;
    }
    if (out.label_index || out.label_index_i64 || out.label_index_u8)
        throw error("read_into: label_index is for segmentation datasets");
}

}  // namespace detail
inline std::vector<std::uint8_t> sample::one_hot() const {
    const auto& s = state_->schema;
    const std::size_t k = s.class_count;
    if (s.task == detail::task_code::classification) {
        std::vector<std::uint8_t> v(k, 0);
        v[std::size_t(layout_.class_id)] = 1;
        return v;
    }
    const std::size_t pixels = std::size_t(layout_.height) * layout_.width;
    std::vector<std::uint8_t> v(pixels * k, 0);
    sample_buffers out;
    out.label_u8 = v.data();
    out.label_capacity = v.size();
    dataset::fill(*this, out, 0);
    return v;
}

}  // namespace shardpack
