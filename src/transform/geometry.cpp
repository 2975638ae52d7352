#include "transform/geometry.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "errors.hpp"

// SSE2 kernels on x86-64 (always present there); portable scalar code elsewhere or when built
// with -DSHARDPACK_TRANSFORM_SSE2=0. Both give the same bytes.
#ifndef SHARDPACK_TRANSFORM_SSE2
#if defined(__SSE2__) || defined(_M_X64)
#define SHARDPACK_TRANSFORM_SSE2 1
#else
#define SHARDPACK_TRANSFORM_SSE2 0
#endif
#endif
#if SHARDPACK_TRANSFORM_SSE2
#include <emmintrin.h>
#endif

namespace shardpack {

namespace {

constexpr std::uint32_t max_axis_len = std::uint32_t(1) << 30;

// Fixed point of the coefficients: 1.0 == 1 << coeff_bits.
constexpr int coeff_bits = 14;
constexpr std::int32_t coeff_one = std::int32_t(1) << coeff_bits;

// ---------------------------------------------------------------------------------------------
// Planning

// Rounds num / den to nearest (halves up), for den > 0.
std::uint64_t div_round(std::uint64_t num, std::uint64_t den) { return (2 * num + den) / (2 * den); }

std::uint32_t checked_len(std::uint64_t v, const char* what) {
    if (v > max_axis_len)
        throw input_error(std::string("the ") + what + " size " + std::to_string(v) + " is too large (limit " +
                          std::to_string(max_axis_len) + " pixels per side)");
    return static_cast<std::uint32_t>(v);
}

// The source is scaled to `scaled`, then a window of `target` is cropped from it (or it is padded
// to `target`); `center` chooses tf.image.resize_with_crop_or_pad's centred offsets over 0.
axis_plan crop_or_pad(std::uint32_t src, std::uint32_t scaled, std::uint32_t target, bool center) {
    axis_plan a;
    a.src_len = src;
    a.scaled_len = scaled;
    a.out_len = target;
    if (scaled >= target) {
        a.crop_offset = center ? (scaled - target) / 2 : 0;
        a.pad_before = 0;
        a.content_len = target;
    } else {
        a.crop_offset = 0;
        a.pad_before = center ? (target - scaled) / 2 : 0;
        a.content_len = scaled;
    }
    return a;
}

// ---------------------------------------------------------------------------------------------
// Filter taps of one output pixel

double triangle_filter(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

double sinc(double x) {
    if (x == 0.0) return 1.0;
    x *= 3.14159265358979323846;
    return std::sin(x) / x;
}

double lanczos3_filter(double x) { return (-3.0 <= x && x < 3.0) ? sinc(x) * sinc(x / 3.0) : 0.0; }

enum class kernel { box_area, triangle, lanczos3 };

kernel kernel_for(resample_filter f, std::uint32_t src, std::uint32_t scaled) {
    switch (f) {
        case resample_filter::area: return scaled < src ? kernel::box_area : kernel::triangle;
        case resample_filter::bilinear: return kernel::triangle;
        case resample_filter::lanczos: return kernel::lanczos3;
    }
    return kernel::triangle;
}

// The weights of output (scaled-axis) pixel c: source pixels [first, first + weights.size()),
// normalised to sum 1, without zero weights at either end.
void pixel_weights(std::uint32_t src, std::uint32_t scaled, std::uint32_t c, kernel k, std::uint32_t& first,
                   std::vector<double>& weights) {
    weights.clear();
    if (k == kernel::box_area) {
        // Exact area coverage (OpenCV INTER_AREA for downscaling). In units of 1 / scaled source
        // pixels: the output pixel covers [c * src, (c + 1) * src), source pixel i covers
        // [i * scaled, (i + 1) * scaled).
        const std::uint64_t start = std::uint64_t(c) * src, end = start + src;
        const std::uint64_t i0 = start / scaled;
        const std::uint64_t i1 = std::min<std::uint64_t>((end + scaled - 1) / scaled, src);
        first = static_cast<std::uint32_t>(i0);
        for (std::uint64_t i = i0; i < i1; ++i) {
            const std::uint64_t lo = std::max(start, i * scaled), hi = std::min(end, (i + 1) * scaled);
            weights.push_back(double(hi - lo) / double(src));
        }
    } else {
        // Pillow's ImagingResample: centre (c + 0.5) * scale, support widened when downscaling.
        const double scale = double(src) / double(scaled);
        const double filterscale = std::max(scale, 1.0);
        const double support = (k == kernel::lanczos3 ? 3.0 : 1.0) * filterscale;
        const double center = (double(c) + 0.5) * scale;
        const double ss = 1.0 / filterscale;
        const double lo = std::floor(center - support + 0.5), hi = std::floor(center + support + 0.5);
        const std::int64_t xmin = std::max<std::int64_t>(static_cast<std::int64_t>(lo), 0);
        const std::int64_t xmax = std::min<std::int64_t>(static_cast<std::int64_t>(hi), src);
        first = static_cast<std::uint32_t>(xmin);
        double total = 0.0;
        for (std::int64_t x = xmin; x < xmax; ++x) {
            const double d = (double(x) - center + 0.5) * ss;
            const double w = k == kernel::lanczos3 ? lanczos3_filter(d) : triangle_filter(d);
            weights.push_back(w);
            total += w;
        }
        if (total != 0.0)
            for (double& w : weights) w /= total;
    }
    // Trim zero weights at the ends (they would only widen the rows the decoder must deliver).
    std::size_t b = 0, e = weights.size();
    while (e > b && weights[e - 1] == 0.0) --e;
    while (b < e && weights[b] == 0.0) ++b;
    if (b == e) {  // cannot happen for sane sizes; fall back to nearest
        axis_plan a;
        a.src_len = src;
        a.scaled_len = scaled;
        first = nearest_source(a, c);
        weights.assign(1, 1.0);
        return;
    }
    if (e != weights.size()) weights.resize(e);
    if (b) {
        weights.erase(weights.begin(), weights.begin() + static_cast<std::ptrdiff_t>(b));
        first += static_cast<std::uint32_t>(b);
    }
}

// Quantises normalised weights to coefficients summing to exactly coeff_one (so a constant
// image stays constant): each coefficient is the step between rounded running sums, which
// spreads the rounding evenly (no coefficient is off by 1 or more) and keeps non-negative
// weights non-negative.
void quantise(const std::vector<double>& weights, std::int16_t* out, std::int64_t& abs_sum) {
    double running = 0.0;
    std::int32_t prev = 0;
    abs_sum = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
        running += weights[i];
        const std::int32_t r =
            i + 1 == weights.size() ? coeff_one : static_cast<std::int32_t>(std::lround(running * coeff_one));
        out[i] = static_cast<std::int16_t>(r - prev);
        abs_sum += std::abs(r - prev);
        prev = r;
    }
}

// fixed_window: every output pixel reads exactly `taps` source pixels, all inside the source
// (windows near the end are moved back, their coefficients padded with zeros): the horizontal
// pass then runs a loop of constant length.
void build_table(resample_axis_table& t, const axis_plan& a, resample_filter f, bool fixed_window) {
    if (t.valid && t.filter == f && t.plan == a && t.fixed_window == fixed_window) return;
    t.fixed_window = fixed_window;
    t.valid = false;
    t.plan = a;
    t.filter = f;
    const kernel kern = kernel_for(f, a.src_len, a.scaled_len);
    const std::uint32_t n = a.content_len;
    t.first.resize(n);
    t.count.resize(n);
    std::vector<double> w;
    // Windows first, to size the fixed stride.
    std::uint32_t taps = 1;
    std::vector<std::vector<double>> all(n);
    for (std::uint32_t j = 0; j < n; ++j) {
        std::uint32_t first = 0;
        pixel_weights(a.src_len, a.scaled_len, a.crop_offset + j, kern, first, w);
        t.first[j] = first;
        t.count[j] = static_cast<std::uint32_t>(w.size());
        taps = std::max(taps, t.count[j]);
        all[j] = w;
    }
    t.taps = taps;
    t.coeffs.assign(std::size_t(n) * taps, 0);
    std::int64_t max_abs = 0;
    t.has_negative = false;
    t.span_first = n ? t.first[0] : 0;
    t.span_end = 0;
    for (std::uint32_t j = 0; j < n; ++j) {
        std::int64_t s = 0;
        std::int16_t* q = t.coeffs.data() + std::size_t(j) * taps;
        quantise(all[j], q, s);
        if (fixed_window) {
            if (t.first[j] + taps > a.src_len) {
                const std::uint32_t shift = t.first[j] + taps - a.src_len;
                std::copy_backward(q, q + t.count[j], q + t.count[j] + shift);
                std::fill(q, q + shift, std::int16_t(0));
                t.first[j] -= shift;
            }
            t.count[j] = taps;
        }
        max_abs = std::max(max_abs, s);
        for (std::uint32_t k2 = 0; k2 < taps; ++k2) t.has_negative |= q[k2] < 0;
        t.span_first = std::min(t.span_first, t.first[j]);
        t.span_end = std::max(t.span_end, t.first[j] + t.count[j]);
    }
    if (fixed_window) {
        const std::uint32_t pairs = (taps + 1) / 2;
        t.coeff_pairs.assign(std::size_t(n) * pairs, 0);
        for (std::uint32_t j = 0; j < n; ++j)
            for (std::uint32_t k = 0; k < taps; ++k) {
                const auto lane = std::uint32_t(std::uint16_t(t.coeffs[std::size_t(j) * taps + k])) << (16 * (k & 1));
                auto& slot = t.coeff_pairs[std::size_t(j) * pairs + k / 2];
                slot = static_cast<std::int32_t>(std::uint32_t(slot) | lane);
            }
    } else {
        t.coeff_pairs.clear();
    }
    // The horizontal pass multiplies int16 values: keep its sums inside int32.
    t.wide_accumulator = max_abs * 32768 + (std::int64_t(1) << (coeff_bits + 7)) > INT32_MAX;
    t.valid = true;
}

// ---------------------------------------------------------------------------------------------
// Kernels
//
// Vertical pass first (rows are contiguous: SIMD over the bytes of a row), over the columns the
// horizontal pass reads, into an int16 row with 7 (6 for lanczos) fractional bits; then the
// horizontal pass per output pixel. Pixel arithmetic is all integer (SIMD and scalar paths give the same
// bytes); only the coefficient tables are computed in double.

// Combines `count` source rows with coefficients w over n bytes: acc = sum rows[k][i] * w[k]
// (coefficients with coeff_bits), then (acc + round) >> shift saturated to int16 into mid, or
// (ToU8, shift == coeff_bits) clamped to 0..255 into out8.
template <bool ToU8>
void vertical_row(const std::uint8_t* const* rows, const std::int16_t* w, std::uint32_t count, std::size_t n, int shift,
                  std::int16_t* mid, std::uint8_t* out8) {
    const std::int32_t round = std::int32_t(1) << (shift - 1);
    std::size_t i = 0;
#if SHARDPACK_TRANSFORM_SSE2
    const __m128i zero = _mm_setzero_si128();
    const __m128i vround = _mm_set1_epi32(round);
    const __m128i vshift = _mm_cvtsi32_si128(shift);
    for (; i + 16 <= n; i += 16) {
        __m128i s0 = vround, s1 = vround, s2 = vround, s3 = vround;
        std::uint32_t k = 0;
        for (; k + 1 < count; k += 2) {
            const auto pair = static_cast<std::int32_t>(std::uint32_t(std::uint16_t(w[k])) |
                                                        (std::uint32_t(std::uint16_t(w[k + 1])) << 16));
            const __m128i c = _mm_set1_epi32(pair);
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[k] + i));
            const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[k + 1] + i));
            const __m128i alo = _mm_unpacklo_epi8(a, zero), ahi = _mm_unpackhi_epi8(a, zero);
            const __m128i blo = _mm_unpacklo_epi8(b, zero), bhi = _mm_unpackhi_epi8(b, zero);
            s0 = _mm_add_epi32(s0, _mm_madd_epi16(_mm_unpacklo_epi16(alo, blo), c));
            s1 = _mm_add_epi32(s1, _mm_madd_epi16(_mm_unpackhi_epi16(alo, blo), c));
            s2 = _mm_add_epi32(s2, _mm_madd_epi16(_mm_unpacklo_epi16(ahi, bhi), c));
            s3 = _mm_add_epi32(s3, _mm_madd_epi16(_mm_unpackhi_epi16(ahi, bhi), c));
        }
        if (k < count) {
            const __m128i c = _mm_set1_epi32(std::int32_t(std::uint16_t(w[k])));
            const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[k] + i));
            const __m128i alo = _mm_unpacklo_epi8(a, zero), ahi = _mm_unpackhi_epi8(a, zero);
            s0 = _mm_add_epi32(s0, _mm_madd_epi16(_mm_unpacklo_epi16(alo, zero), c));
            s1 = _mm_add_epi32(s1, _mm_madd_epi16(_mm_unpackhi_epi16(alo, zero), c));
            s2 = _mm_add_epi32(s2, _mm_madd_epi16(_mm_unpacklo_epi16(ahi, zero), c));
            s3 = _mm_add_epi32(s3, _mm_madd_epi16(_mm_unpackhi_epi16(ahi, zero), c));
        }
        const __m128i m0 = _mm_packs_epi32(_mm_sra_epi32(s0, vshift), _mm_sra_epi32(s1, vshift));
        const __m128i m1 = _mm_packs_epi32(_mm_sra_epi32(s2, vshift), _mm_sra_epi32(s3, vshift));
        if constexpr (ToU8) {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out8 + i), _mm_packus_epi16(m0, m1));
        } else {
            _mm_storeu_si128(reinterpret_cast<__m128i*>(mid + i), m0);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(mid + i + 8), m1);
        }
    }
#endif
    for (; i < n; ++i) {
        std::int32_t acc = round;
        for (std::uint32_t k = 0; k < count; ++k) acc += std::int32_t(rows[k][i]) * w[k];
        std::int32_t v = acc >> shift;
        v = v < -32768 ? -32768 : v > 32767 ? 32767 : v;
        if constexpr (ToU8)
            out8[i] = static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
        else
            mid[i] = static_cast<std::int16_t>(v);
    }
}

template <typename T>
inline std::uint8_t to_u8(T v) {
    return static_cast<std::uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// Horizontal pass for one row: `in` holds source pixels from tx.span_first on, with C channels;
// the sums are shifted right by `shift` (coeff_bits + the input's fractional bits). The table
// has fixed windows of tx.taps pixels (T when T > 0).
template <int C, int T, typename In, typename Acc>
void horizontal_row(const In* in, const resample_axis_table& tx, int shift, std::uint8_t* out) {
    const Acc half = Acc(1) << (shift - 1);
    const std::uint32_t n = tx.plan.content_len, base = tx.span_first;
    const std::uint32_t taps = T > 0 ? std::uint32_t(T) : tx.taps;
    const std::uint32_t* first = tx.first.data();
    const std::int16_t* w = tx.coeffs.data();
    for (std::uint32_t j = 0; j < n; ++j, w += taps, out += C) {
        const In* p = in + std::size_t(first[j] - base) * C;
        Acc a0 = half, a1 = half, a2 = half, a3 = half;
        for (std::uint32_t k = 0; k < taps; ++k, p += C) {
            const Acc wk = w[k];
            a0 += Acc(p[0]) * wk;
            if constexpr (C > 1) a1 += Acc(p[1]) * wk;
            if constexpr (C > 2) a2 += Acc(p[2]) * wk;
            if constexpr (C > 3) a3 += Acc(p[3]) * wk;
        }
        out[0] = to_u8(a0 >> shift);
        if constexpr (C > 1) out[1] = to_u8(a1 >> shift);
        if constexpr (C > 2) out[2] = to_u8(a2 >> shift);
        if constexpr (C > 3) out[3] = to_u8(a3 >> shift);
    }
}

template <int C, typename In, typename Acc>
void horizontal_taps(const In* in, const resample_axis_table& tx, int shift, std::uint8_t* out) {
    switch (tx.taps) {
        case 1: horizontal_row<C, 1, In, Acc>(in, tx, shift, out); break;
        case 2: horizontal_row<C, 2, In, Acc>(in, tx, shift, out); break;
        case 3: horizontal_row<C, 3, In, Acc>(in, tx, shift, out); break;
        case 4: horizontal_row<C, 4, In, Acc>(in, tx, shift, out); break;
        case 5: horizontal_row<C, 5, In, Acc>(in, tx, shift, out); break;
        case 6: horizontal_row<C, 6, In, Acc>(in, tx, shift, out); break;
        default: horizontal_row<C, 0, In, Acc>(in, tx, shift, out); break;
    }
}

template <typename In, typename Acc>
void horizontal_dispatch(const In* in, const resample_axis_table& tx, int shift, std::uint8_t* out,
                         std::uint32_t channels) {
    switch (channels) {
        case 1: horizontal_taps<1, In, Acc>(in, tx, shift, out); break;
        case 3: horizontal_taps<3, In, Acc>(in, tx, shift, out); break;
        case 4: horizontal_taps<4, In, Acc>(in, tx, shift, out); break;
        default: throw std::invalid_argument("apply_geometry: images have 1, 3 or 4 channels");
    }
}

#if SHARDPACK_TRANSFORM_SSE2
// One output pixel of the SIMD horizontal pass: the sums of its P coefficient pairs (P == 0:
// `pairs`, known at run time), shifted. The two taps of a pair are interleaved channel by
// channel ([r0 r1 g0 g1 b0 b1 . .]) and multiplied-added with the pair. Reads up to one int16
// past the last pixel of a window (the caller pads the row).
template <int C, int P>
inline __m128i horizontal_pixel_sse2(const std::int16_t* p, const std::int32_t* wp, std::uint32_t pairs, __m128i vround,
                                     __m128i vshift) {
    __m128i acc = vround;
    const std::uint32_t count = P > 0 ? std::uint32_t(P) : pairs;
    for (std::uint32_t m = 0; m < count; ++m, p += 2 * C) {
        const __m128i a = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
        const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + C));
        acc = _mm_add_epi32(acc, _mm_madd_epi16(_mm_unpacklo_epi16(a, b), _mm_set1_epi32(wp[m])));
    }
    return _mm_sra_epi32(acc, vshift);
}

// Horizontal pass over int16 pixels of C = 3 or 4 channels. Same integer results as
// horizontal_row (sums fit int32: !tx.wide_accumulator). Two pixels a step, packed together,
// each stored with one 4-byte store (little-endian: channel c in byte c): with 3 channels its
// fourth byte is the next pixel's first, which the next store writes; a row's last pixel
// stores 3 bytes. (One pixel a step with a 3-byte memcpy, which went through the stack, made
// apply_geometry 1.4x slower: 135 vs 95 us for 313x235 -> 224x224, 3 taps, a 500x375 JPEG
// packed at 224; scripts/bench/README.md, "cls pack, round 5".)
template <int C, int P>
void horizontal_row_sse2_pairs(const std::int16_t* in, const resample_axis_table& tx, int shift, std::uint8_t* out) {
    const std::uint32_t n = tx.plan.content_len, base = tx.span_first, pairs = (tx.taps + 1) / 2;
    const std::uint32_t* first = tx.first.data();
    const std::int32_t* wp = tx.coeff_pairs.data();
    const __m128i vround = _mm_set1_epi32(std::int32_t(1) << (shift - 1));
    const __m128i vshift = _mm_cvtsi32_si128(shift);
    std::uint32_t j = 0;
    for (; j + 2 < n; j += 2, wp += 2 * pairs, out += 2 * C) {
        const __m128i v0 = horizontal_pixel_sse2<C, P>(in + std::size_t(first[j] - base) * C, wp, pairs, vround, vshift);
        const __m128i v1 = horizontal_pixel_sse2<C, P>(in + std::size_t(first[j + 1] - base) * C, wp + pairs, pairs, vround, vshift);
        const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(v0, v1), _mm_setzero_si128());
        const auto lo = static_cast<std::uint32_t>(_mm_cvtsi128_si32(packed));
        const auto hi = static_cast<std::uint32_t>(_mm_cvtsi128_si32(_mm_srli_si128(packed, 4)));
        std::memcpy(out, &lo, 4);
        std::memcpy(out + C, &hi, 4);
    }
    for (; j < n; ++j, wp += pairs, out += C) {
        const __m128i v = horizontal_pixel_sse2<C, P>(in + std::size_t(first[j] - base) * C, wp, pairs, vround, vshift);
        const __m128i packed = _mm_packus_epi16(_mm_packs_epi32(v, v), _mm_setzero_si128());
        const auto bytes = static_cast<std::uint32_t>(_mm_cvtsi128_si32(packed));
        if (C == 4 || j + 1 < n) {
            std::memcpy(out, &bytes, 4);
        } else {
            out[0] = static_cast<std::uint8_t>(bytes);
            out[1] = static_cast<std::uint8_t>(bytes >> 8);
            out[2] = static_cast<std::uint8_t>(bytes >> 16);
        }
    }
}

template <int C>
void horizontal_row_sse2(const std::int16_t* in, const resample_axis_table& tx, int shift, std::uint8_t* out) {
    switch ((tx.taps + 1) / 2) {
        case 1: horizontal_row_sse2_pairs<C, 1>(in, tx, shift, out); break;
        case 2: horizontal_row_sse2_pairs<C, 2>(in, tx, shift, out); break;
        case 3: horizontal_row_sse2_pairs<C, 3>(in, tx, shift, out); break;
        default: horizontal_row_sse2_pairs<C, 0>(in, tx, shift, out); break;
    }
}
#endif

template <typename In>
void horizontal(const In* in, const resample_axis_table& tx, int shift, std::uint8_t* out, std::uint32_t channels) {
#if SHARDPACK_TRANSFORM_SSE2
    if constexpr (std::is_same_v<In, std::int16_t>) {
        if (!tx.wide_accumulator && (channels == 3 || channels == 4)) {
            if (channels == 3)
                horizontal_row_sse2<3>(in, tx, shift, out);
            else
                horizontal_row_sse2<4>(in, tx, shift, out);
            return;
        }
    }
#endif
    if (tx.wide_accumulator)
        horizontal_dispatch<In, std::int64_t>(in, tx, shift, out, channels);
    else
        horizontal_dispatch<In, std::int32_t>(in, tx, shift, out, channels);
}

// The rows of output row t of the y table, offset to byte col0.
const std::uint8_t* const* row_pointers(const image_u8& src, const resample_axis_table& ty, std::uint32_t t,
                                        std::size_t col0, std::vector<const std::uint8_t*>& rows) {
    const std::uint32_t first = ty.first[t], count = ty.count[t];
    rows.resize(std::max<std::size_t>(rows.size(), count));
    for (std::uint32_t k = 0; k < count; ++k) rows[k] = src.row(first + k) + col0;
    return rows.data();
}

// The weights of every content pixel of one resampled axis, in double: the wide resampler's
// table (16-bit samples, or channel counts other than 1, 3 and 4).
struct wide_axis_table {
    std::vector<std::uint32_t> first, count;
    std::vector<std::size_t> at;  // where pixel j's weights start in `weights`
    std::vector<double> weights;
    std::uint32_t span_first = 0, span_end = 0;
};

void build_wide_table(wide_axis_table& t, const axis_plan& a, resample_filter f) {
    const kernel kern = kernel_for(f, a.src_len, a.scaled_len);
    const std::uint32_t n = a.content_len;
    t.first.resize(n);
    t.count.resize(n);
    t.at.resize(n);
    t.weights.clear();
    t.span_first = UINT32_MAX;
    t.span_end = 0;
    std::vector<double> w;
    for (std::uint32_t j = 0; j < n; ++j) {
        pixel_weights(a.src_len, a.scaled_len, a.crop_offset + j, kern, t.first[j], w);
        t.count[j] = static_cast<std::uint32_t>(w.size());
        t.at[j] = t.weights.size();
        t.weights.insert(t.weights.end(), w.begin(), w.end());
        t.span_first = std::min(t.span_first, t.first[j]);
        t.span_end = std::max(t.span_end, t.first[j] + t.count[j]);
    }
    if (n == 0) t.span_first = 0;
}

// Sample i of a row of 1- or 2-byte samples.
inline double sample_at(const std::uint8_t* row, std::size_t i, std::uint32_t bytes) {
    if (bytes == 1) return row[i];
    std::uint16_t v;
    std::memcpy(&v, row + 2 * i, 2);
    return v;
}

inline void store_sample(std::uint8_t* row, std::size_t i, double v, std::uint32_t bytes) {
    const double top = bytes == 1 ? 255.0 : 65535.0;
    const double r = std::floor(v + 0.5);
    const double c = r < 0.0 ? 0.0 : r > top ? top : r;
    if (bytes == 1) {
        row[i] = static_cast<std::uint8_t>(c);
    } else {
        const auto u = static_cast<std::uint16_t>(c);
        std::memcpy(row + 2 * i, &u, 2);
    }
}

// apply_geometry's resampling for 16-bit samples and for any channel count: the same plan and
// filter weights as the 8-bit path, applied in double precision (16-bit values need more than the
// 14-bit coefficients and 7-bit intermediates of the fixed-point kernels), separable (vertical,
// then horizontal, clamped and rounded once at the end), over the output's window only.
void resample_wide(const image_u8& src, const geometry_plan& plan, resample_filter filter, image_u8& out) {
    const axis_plan &ax = plan.x, &ay = plan.y;
    const std::uint32_t C = src.channels, B = src.sample_bytes;
    wide_axis_table tx, ty;
    // A copied axis is an identity table: one weight of 1 at the window's pixel.
    const auto identity = [](wide_axis_table& t, const axis_plan& a) {
        t.first.resize(a.content_len);
        t.count.assign(a.content_len, 1);
        t.at.resize(a.content_len);
        t.weights.assign(a.content_len, 1.0);
        for (std::uint32_t j = 0; j < a.content_len; ++j) {
            t.first[j] = a.crop_offset + j;
            t.at[j] = j;
        }
        t.span_first = a.crop_offset;
        t.span_end = a.crop_offset + a.content_len;
    };
    if (ax.copy()) identity(tx, ax); else build_wide_table(tx, ax, filter);
    if (ay.copy()) identity(ty, ay); else build_wide_table(ty, ay, filter);
    check_source_fits("image", src.width, src.height, ax.src_len, ty.span_end);
    const std::size_t cols = std::size_t(tx.span_end - tx.span_first) * C;
    std::vector<double> mid(cols);
    const std::size_t out_x0 = std::size_t(ax.pad_before) * C;
    for (std::uint32_t t = 0; t < ay.content_len; ++t) {
        std::fill(mid.begin(), mid.end(), 0.0);
        const double* wy = ty.weights.data() + ty.at[t];
        for (std::uint32_t k = 0; k < ty.count[t]; ++k) {
            const std::uint8_t* row = src.row(ty.first[t] + k);
            const std::size_t base = std::size_t(tx.span_first) * C;
            for (std::size_t i = 0; i < cols; ++i) mid[i] += wy[k] * sample_at(row, base + i, B);
        }
        std::uint8_t* dst = out.row(ay.pad_before + t);
        for (std::uint32_t j = 0; j < ax.content_len; ++j) {
            const double* wx = tx.weights.data() + tx.at[j];
            const double* m = mid.data() + std::size_t(tx.first[j] - tx.span_first) * C;
            for (std::uint32_t c = 0; c < C; ++c) {
                double acc = 0.0;
                for (std::uint32_t k = 0; k < tx.count[j]; ++k) acc += wx[k] * m[std::size_t(k) * C + c];
                store_sample(dst, out_x0 + std::size_t(j) * C + c, acc, B);
            }
        }
    }
}

}  // namespace

void check_plan_consistent(const geometry_plan& plan, const char* caller) {
    for (const auto& [a, axis] : {std::pair{&plan.x, "x"}, std::pair{&plan.y, "y"}}) {
        const bool ok = a->src_len > 0 && a->scaled_len > 0 && std::uint64_t(a->crop_offset) + a->content_len <= a->scaled_len &&
                        std::uint64_t(a->pad_before) + a->content_len <= a->out_len;
        if (!ok) throw std::invalid_argument(std::string(caller) + ": inconsistent " + axis + " plan");
    }
}

void check_source_fits(const char* what, std::uint32_t width, std::uint32_t rows, std::uint32_t plan_width,
                       std::uint32_t rows_needed) {
    if (width != plan_width)
        throw input_error(std::string(what) + " is " + std::to_string(width) + " pixels wide but the plan expects " +
                          std::to_string(plan_width));
    if (rows < rows_needed)
        throw input_error(std::string(what) + " has " + std::to_string(rows) + " rows but " + std::to_string(rows_needed) +
                          " are needed");
}

// ---------------------------------------------------------------------------------------------

std::uint32_t axis_plan::src_rows_needed() const {
    if (content_len == 0 || src_len == 0 || scaled_len == 0) return 0;
    const std::uint32_t last = crop_offset + content_len - 1;  // scaled-axis coordinate
    if (copy()) return last + 1;
    std::uint32_t n = nearest_source(*this, last) + 1;
    std::vector<double> w;
    std::uint32_t first = 0;
    pixel_weights(src_len, scaled_len, last, kernel_for(filter, src_len, scaled_len), first, w);
    n = std::max(n, first + static_cast<std::uint32_t>(w.size()));
    return std::min(n, src_len);
}

geometry_plan plan_geometry(std::uint32_t src_w, std::uint32_t src_h, const geometry_options& o) {
    if ((o.width == 0) != (o.height == 0))
        throw usage_error("--size needs both a width and a height greater than 0 (WxH)");
    const bool sized = o.width != 0;
    if (!sized && o.resize != resize_mode::none) throw usage_error("--resize other than 'none' needs --size WxH");
    if (src_w == 0 || src_h == 0)
        throw input_error("image is " + std::to_string(src_w) + "x" + std::to_string(src_h) + ": it has no pixels");
    checked_len(src_w, "source");
    checked_len(src_h, "source");
    if (sized) {
        checked_len(o.width, "target");
        checked_len(o.height, "target");
    }

    geometry_plan p;
    const std::uint32_t W = o.width, H = o.height;
    const std::uint64_t w = src_w, h = src_h;
    const bool center = o.crop == crop_mode::center;

    if (!sized || (o.resize == resize_mode::none && o.crop == crop_mode::none)) {
        p.x = crop_or_pad(src_w, src_w, src_w, false);
        p.y = crop_or_pad(src_h, src_h, src_h, false);
    } else {
        switch (o.resize) {
            case resize_mode::none:
                p.x = crop_or_pad(src_w, src_w, W, center);
                p.y = crop_or_pad(src_h, src_h, H, center);
                break;
            case resize_mode::stretch:
                p.x = crop_or_pad(src_w, W, W, false);
                p.y = crop_or_pad(src_h, H, H, false);
                break;
            case resize_mode::shorter: {
                // s = max(W / w, H / h): the scaled image covers the target.
                std::uint64_t sw, sh;
                if (std::uint64_t(W) * h >= std::uint64_t(H) * w) {
                    sw = W;
                    sh = std::max<std::uint64_t>(H, div_round(h * W, w));
                } else {
                    sh = H;
                    sw = std::max<std::uint64_t>(W, div_round(w * H, h));
                }
                const std::uint32_t sx = checked_len(sw, "scaled"), sy = checked_len(sh, "scaled");
                if (o.crop == crop_mode::none) {
                    p.x = crop_or_pad(src_w, sx, sx, false);
                    p.y = crop_or_pad(src_h, sy, sy, false);
                } else {
                    p.x = crop_or_pad(src_w, sx, W, center);
                    p.y = crop_or_pad(src_h, sy, H, center);
                }
                break;
            }
            case resize_mode::fit: {
                // s = min(W / w, H / h): the scaled image fits inside the target.
                std::uint64_t sw, sh;
                if (std::uint64_t(W) * h <= std::uint64_t(H) * w) {
                    sw = W;
                    sh = std::clamp<std::uint64_t>(div_round(h * W, w), 1, H);
                } else {
                    sh = H;
                    sw = std::clamp<std::uint64_t>(div_round(w * H, h), 1, W);
                }
                p.x = crop_or_pad(src_w, static_cast<std::uint32_t>(sw), W, center);
                p.y = crop_or_pad(src_h, static_cast<std::uint32_t>(sh), H, center);
                break;
            }
        }
    }
    p.x.filter = o.filter;
    p.y.filter = o.filter;
    return p;
}

image_u8 apply_geometry(const image_u8& src, const geometry_plan& plan, resample_filter filter) {
    image_u8 out;
    resample_scratch scratch;
    apply_geometry(src, plan, filter, out, scratch);
    return out;
}

void apply_geometry(const image_u8& src, const geometry_plan& plan, resample_filter filter, image_u8& out) {
    resample_scratch scratch;
    apply_geometry(src, plan, filter, out, scratch);
}

void apply_geometry(const image_u8& src, const geometry_plan& plan, resample_filter filter, image_u8& out,
                    resample_scratch& scratch) {
    check_plan_consistent(plan, "apply_geometry");
    const std::uint32_t C = src.channels;
    if (C == 0 || src.pixels.size() < std::size_t(src.width) * src.height * src.pixel_bytes())
        throw std::invalid_argument("apply_geometry: the source image's buffer does not match its size");
    const axis_plan &ax = plan.x, &ay = plan.y;

    // Rows this call reads.
    std::uint32_t rows_needed = 0;
    if (ay.content_len && ax.content_len) {
        if (ay.copy()) {
            rows_needed = ay.crop_offset + ay.content_len;
        } else {
            build_table(scratch.y, ay, filter, false);
            rows_needed = scratch.y.span_end;
        }
    }
    check_source_fits("image", src.width, src.height, plan.x.src_len, rows_needed);

    out.width = ax.out_len;
    out.height = ay.out_len;
    out.channels = C;
    out.sample_bytes = src.sample_bytes;
    const std::size_t P = src.pixel_bytes();
    out.pixels.resize(std::size_t(out.width) * out.height * P);
    const bool padded = ax.content_len < ax.out_len || ay.content_len < ay.out_len;
    if (padded) std::fill(out.pixels.begin(), out.pixels.end(), std::uint8_t(0));
    if (!ax.content_len || !ay.content_len) return;

    if (ax.copy() && ay.copy()) {  // crop and pad: whole pixels of any size, copied
        const std::size_t src_x0 = std::size_t(ax.crop_offset) * P, out_x0 = std::size_t(ax.pad_before) * P;
        const std::size_t content_bytes = std::size_t(ax.content_len) * P;
        for (std::uint32_t t = 0; t < ay.content_len; ++t)
            std::memcpy(out.row(ay.pad_before + t) + out_x0, src.row(ay.crop_offset + t) + src_x0, content_bytes);
        return;
    }
    if (src.sample_bytes != 1 || (C != 1 && C != 3 && C != 4)) return resample_wide(src, plan, filter, out);

    const std::size_t out_x0 = std::size_t(ax.pad_before) * C;
    const std::size_t content_bytes = std::size_t(ax.content_len) * C;
    if (ay.copy()) {  // horizontal only, straight from the source rows
        build_table(scratch.x, ax, filter, true);
        const std::size_t col0 = std::size_t(scratch.x.span_first) * C;
        for (std::uint32_t t = 0; t < ay.content_len; ++t)
            horizontal<std::uint8_t>(src.row(ay.crop_offset + t) + col0, scratch.x, coeff_bits,
                                     out.row(ay.pad_before + t) + out_x0, C);
        return;
    }
    const resample_axis_table& ty = scratch.y;
    if (ax.copy()) {  // vertical only, straight to bytes
        const std::size_t col0 = std::size_t(ax.crop_offset) * C;
        for (std::uint32_t t = 0; t < ay.content_len; ++t) {
            const auto* rows = row_pointers(src, ty, t, col0, scratch.rows);
            vertical_row<true>(rows, ty.coeffs.data() + std::size_t(t) * ty.taps, ty.count[t], content_bytes, coeff_bits,
                               nullptr, out.row(ay.pad_before + t) + out_x0);
        }
        return;
    }
    // Both axes: vertical pass over the columns the horizontal pass reads, then horizontal.
    build_table(scratch.x, ax, filter, true);
    const resample_axis_table& tx = scratch.x;
    const std::size_t col0 = std::size_t(tx.span_first) * C;
    const std::size_t ncols = std::size_t(tx.span_end - tx.span_first) * C;
    // Non-negative weights keep values in 0..255: 7 fractional bits fit int16. Lanczos overshoots
    // (unclamped until the end, so the result is the exact separable filter): 6 bits.
    const int frac = ty.has_negative ? 6 : 7;
    scratch.mid.resize(ncols + 8);  // the SIMD horizontal pass reads a little past a window
    std::fill(scratch.mid.begin() + static_cast<std::ptrdiff_t>(ncols), scratch.mid.end(), std::int16_t(0));
    for (std::uint32_t t = 0; t < ay.content_len; ++t) {
        const auto* rows = row_pointers(src, ty, t, col0, scratch.rows);
        vertical_row<false>(rows, ty.coeffs.data() + std::size_t(t) * ty.taps, ty.count[t], ncols, coeff_bits - frac,
                            scratch.mid.data(), nullptr);
        horizontal<std::int16_t>(scratch.mid.data(), tx, coeff_bits + frac, out.row(ay.pad_before + t) + out_x0, C);
    }
}

}  // namespace shardpack
