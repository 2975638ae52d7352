#include "transform/geometry.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "errors.hpp"

namespace shardpack {

namespace {

constexpr std::uint32_t max_axis_len = std::uint32_t(1) << 30;

// Fixed point of the coefficients: 1.0 == 1 << coeff_bits.
constexpr int coeff_bits = 14;
constexpr std::int32_t coeff_one = std::int32_t(1) << coeff_bits;
// The vertical pass keeps 8 fractional bits for the horizontal pass (value * 256, 0..65280).
constexpr int mid_bits = 8;
constexpr std::int32_t mid_max = 255 << mid_bits;

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
        first = std::min(static_cast<std::uint32_t>((std::uint64_t(2 * std::uint64_t(c) + 1) * src) / (2 * std::uint64_t(scaled))),
                         src - 1);
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
// image stays constant), the rounding residue going to the largest weight.
void quantise(const std::vector<double>& weights, std::int16_t* out, std::int64_t& abs_sum) {
    std::int32_t total = 0;
    std::size_t largest = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) {
        const auto q = static_cast<std::int32_t>(std::lround(weights[i] * coeff_one));
        out[i] = static_cast<std::int16_t>(q);
        total += q;
        if (std::fabs(weights[i]) > std::fabs(weights[largest])) largest = i;
    }
    out[largest] = static_cast<std::int16_t>(out[largest] + (coeff_one - total));
    abs_sum = 0;
    for (std::size_t i = 0; i < weights.size(); ++i) abs_sum += std::abs(std::int32_t(out[i]));
}

void build_table(resample_axis_table& t, const axis_plan& a, resample_filter f) {
    if (t.valid && t.filter == f && t.plan == a) return;
    t.valid = false;
    t.plan = a;
    t.filter = f;
    const kernel k = kernel_for(f, a.src_len, a.scaled_len);
    const std::uint32_t n = a.content_len;
    t.first.resize(n);
    t.count.resize(n);
    std::vector<double> w;
    // First pass: windows, to size the fixed stride.
    std::uint32_t taps = 1;
    std::vector<std::vector<double>> all;  // only for the (rare) rebuild; n is the output size
    all.resize(n);
    for (std::uint32_t j = 0; j < n; ++j) {
        std::uint32_t first = 0;
        pixel_weights(a.src_len, a.scaled_len, a.crop_offset + j, k, first, w);
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
        quantise(all[j], t.coeffs.data() + std::size_t(j) * taps, s);
        max_abs = std::max(max_abs, s);
        for (std::uint32_t k = 0; k < taps; ++k) t.has_negative |= t.coeffs[std::size_t(j) * taps + k] < 0;
        t.span_first = std::min(t.span_first, t.first[j]);
        t.span_end = std::max(t.span_end, t.first[j] + t.count[j]);
    }
    // The second (horizontal) pass multiplies values up to mid_max: keep it inside int32.
    t.wide_accumulator = max_abs * mid_max + (std::int64_t(1) << (coeff_bits + mid_bits)) > INT32_MAX;
    t.valid = true;
}

// ---------------------------------------------------------------------------------------------
// Kernels

template <typename T>
inline T clamp_to(std::int64_t v, std::int64_t hi) {
    return static_cast<T>(v < 0 ? 0 : v > hi ? hi : v);
}

// Vertical pass for one output row: acc[i] = sum_k rows[first + k][col0 * C + i] * coeff[k].
void vertical_accumulate(const image_u8& src, const resample_axis_table& ty, std::uint32_t j, std::size_t col_byte0,
                         std::size_t n, std::int32_t* acc) {
    const std::uint32_t first = ty.first[j], count = ty.count[j];
    const std::int16_t* w = ty.coeffs.data() + std::size_t(j) * ty.taps;
    {
        const std::uint8_t* r = src.row(first) + col_byte0;
        const std::int32_t c = w[0];
        for (std::size_t i = 0; i < n; ++i) acc[i] = std::int32_t(r[i]) * c;
    }
    std::uint32_t k = 1;
    for (; k + 1 < count; k += 2) {
        const std::uint8_t* r0 = src.row(first + k) + col_byte0;
        const std::uint8_t* r1 = src.row(first + k + 1) + col_byte0;
        const std::int32_t c0 = w[k], c1 = w[k + 1];
        for (std::size_t i = 0; i < n; ++i) acc[i] += std::int32_t(r0[i]) * c0 + std::int32_t(r1[i]) * c1;
    }
    if (k < count) {
        const std::uint8_t* r = src.row(first + k) + col_byte0;
        const std::int32_t c = w[k];
        for (std::size_t i = 0; i < n; ++i) acc[i] += std::int32_t(r[i]) * c;
    }
}

void acc_to_mid(const std::int32_t* acc, std::size_t n, std::uint16_t* mid) {
    constexpr std::int32_t half = 1 << (coeff_bits - mid_bits - 1);
    for (std::size_t i = 0; i < n; ++i) {
        std::int32_t v = (acc[i] + half) >> (coeff_bits - mid_bits);
        v = v < 0 ? 0 : v > mid_max ? mid_max : v;
        mid[i] = static_cast<std::uint16_t>(v);
    }
}

void acc_to_u8(const std::int32_t* acc, std::size_t n, std::uint8_t* out) {
    constexpr std::int32_t half = 1 << (coeff_bits - 1);
    for (std::size_t i = 0; i < n; ++i) {
        std::int32_t v = (acc[i] + half) >> coeff_bits;
        v = v < 0 ? 0 : v > 255 ? 255 : v;
        out[i] = static_cast<std::uint8_t>(v);
    }
}

// Horizontal pass for one row. `in` points at source pixel `base`; values carry `frac` fractional
// bits (0 for u8 input, mid_bits for the vertical pass's output).
template <int C, typename In, typename Acc>
void horizontal_row(const In* in, std::uint32_t base, const resample_axis_table& tx, int frac, std::uint8_t* out,
                    std::uint32_t channels) {
    const int shift = coeff_bits + frac;
    const Acc half = Acc(1) << (shift - 1);
    const std::uint32_t n = tx.plan.content_len, taps = tx.taps;
    const std::uint32_t ch = C > 0 ? std::uint32_t(C) : channels;
    for (std::uint32_t j = 0; j < n; ++j) {
        const In* p = in + std::size_t(tx.first[j] - base) * ch;
        const std::int16_t* w = tx.coeffs.data() + std::size_t(j) * taps;
        const std::uint32_t cnt = tx.count[j];
        if constexpr (C > 0) {
            Acc a[C];
            for (int c = 0; c < C; ++c) a[c] = half;
            for (std::uint32_t k = 0; k < cnt; ++k) {
                const Acc wk = w[k];
                for (int c = 0; c < C; ++c) a[c] += Acc(p[k * C + c]) * wk;
            }
            for (int c = 0; c < C; ++c) out[c] = clamp_to<std::uint8_t>(std::int64_t(a[c] >> shift), 255);
            out += C;
        } else {
            for (std::uint32_t c = 0; c < ch; ++c) {
                Acc a = half;
                for (std::uint32_t k = 0; k < cnt; ++k) a += Acc(p[k * ch + c]) * Acc(w[k]);
                out[c] = clamp_to<std::uint8_t>(std::int64_t(a >> shift), 255);
            }
            out += ch;
        }
    }
}

template <typename In, typename Acc>
void horizontal_dispatch(const In* in, std::uint32_t base, const resample_axis_table& tx, int frac, std::uint8_t* out,
                         std::uint32_t channels) {
    switch (channels) {
        case 1: horizontal_row<1, In, Acc>(in, base, tx, frac, out, channels); break;
        case 3: horizontal_row<3, In, Acc>(in, base, tx, frac, out, channels); break;
        case 4: horizontal_row<4, In, Acc>(in, base, tx, frac, out, channels); break;
        default: horizontal_row<0, In, Acc>(in, base, tx, frac, out, channels); break;
    }
}

template <typename In>
void horizontal(const In* in, std::uint32_t base, const resample_axis_table& tx, int frac, std::uint8_t* out,
                std::uint32_t channels) {
    if (tx.wide_accumulator)
        horizontal_dispatch<In, std::int64_t>(in, base, tx, frac, out, channels);
    else
        horizontal_dispatch<In, std::int32_t>(in, base, tx, frac, out, channels);
}

void check_plan(const axis_plan& a, const char* axis) {
    const bool ok = a.src_len > 0 && a.scaled_len > 0 && std::uint64_t(a.crop_offset) + a.content_len <= a.scaled_len &&
                    std::uint64_t(a.pad_before) + a.content_len <= a.out_len;
    if (!ok) throw std::invalid_argument(std::string("apply_geometry: inconsistent ") + axis + " plan");
}

}  // namespace

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
    check_plan(plan.x, "x");
    check_plan(plan.y, "y");
    const std::uint32_t C = src.channels;
    if (C == 0 || src.pixels.size() < std::size_t(src.width) * src.height * C)
        throw std::invalid_argument("apply_geometry: the source image's buffer does not match its size");
    if (src.width != plan.x.src_len)
        throw input_error("image is " + std::to_string(src.width) + " pixels wide but the plan expects " +
                          std::to_string(plan.x.src_len));
    const axis_plan &ax = plan.x, &ay = plan.y;

    // Rows this call reads.
    std::uint32_t rows_needed = 0;
    if (ay.content_len && ax.content_len) {
        if (ay.copy()) {
            rows_needed = ay.crop_offset + ay.content_len;
        } else {
            build_table(scratch.y, ay, filter);
            rows_needed = scratch.y.span_end;
        }
    }
    if (src.height < rows_needed)
        throw input_error("image has " + std::to_string(src.height) + " rows but " + std::to_string(rows_needed) +
                          " are needed");

    out.width = ax.out_len;
    out.height = ay.out_len;
    out.channels = C;
    out.pixels.resize(std::size_t(out.width) * out.height * C);
    const bool padded = ax.content_len < ax.out_len || ay.content_len < ay.out_len;
    if (padded) std::fill(out.pixels.begin(), out.pixels.end(), std::uint8_t(0));
    if (!ax.content_len || !ay.content_len) return;

    const std::size_t out_x0 = std::size_t(ax.pad_before) * C;
    const std::size_t content_bytes = std::size_t(ax.content_len) * C;

    if (ax.copy() && ay.copy()) {
        const std::size_t src_x0 = std::size_t(ax.crop_offset) * C;
        for (std::uint32_t t = 0; t < ay.content_len; ++t)
            std::memcpy(out.row(ay.pad_before + t) + out_x0, src.row(ay.crop_offset + t) + src_x0, content_bytes);
        return;
    }
    if (ay.copy()) {  // horizontal only
        build_table(scratch.x, ax, filter);
        for (std::uint32_t t = 0; t < ay.content_len; ++t)
            horizontal<std::uint8_t>(src.row(ay.crop_offset + t), 0, scratch.x, 0, out.row(ay.pad_before + t) + out_x0, C);
        return;
    }
    const resample_axis_table& ty = scratch.y;
    if (ax.copy()) {  // vertical only, straight to bytes
        const std::size_t src_x0 = std::size_t(ax.crop_offset) * C;
        scratch.acc.resize(content_bytes);
        for (std::uint32_t t = 0; t < ay.content_len; ++t) {
            vertical_accumulate(src, ty, t, src_x0, content_bytes, scratch.acc.data());
            acc_to_u8(scratch.acc.data(), content_bytes, out.row(ay.pad_before + t) + out_x0);
        }
        return;
    }
    // Both axes: vertical pass over the columns the horizontal pass reads, then horizontal.
    build_table(scratch.x, ax, filter);
    const resample_axis_table& tx = scratch.x;
    const std::size_t col0 = std::size_t(tx.span_first) * C;
    const std::size_t ncols = std::size_t(tx.span_end - tx.span_first) * C;
    scratch.acc.resize(ncols);
    if (ty.has_negative) {
        // Lanczos: the vertical result can leave 0..255; it goes on unclamped at full precision
        // (64-bit second pass), so the output is the exact separable filter, clamped once.
        for (std::uint32_t t = 0; t < ay.content_len; ++t) {
            vertical_accumulate(src, ty, t, col0, ncols, scratch.acc.data());
            horizontal_dispatch<std::int32_t, std::int64_t>(scratch.acc.data(), tx.span_first, tx, coeff_bits,
                                                            out.row(ay.pad_before + t) + out_x0, C);
        }
        return;
    }
    scratch.mid.resize(ncols);
    for (std::uint32_t t = 0; t < ay.content_len; ++t) {
        vertical_accumulate(src, ty, t, col0, ncols, scratch.acc.data());
        acc_to_mid(scratch.acc.data(), ncols, scratch.mid.data());
        horizontal<std::uint16_t>(scratch.mid.data(), tx.span_first, tx, mid_bits, out.row(ay.pad_before + t) + out_x0, C);
    }
}

}  // namespace shardpack
