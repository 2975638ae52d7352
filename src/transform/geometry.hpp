// Geometry of a sample: the crop / pad / resize box that turns a decoded image (and its mask)
// into the record's pixels, and the separable resampler that applies it to images.
//
// Every mode is described by one geometry_plan: per axis, the source is scaled to scaled_len,
// a window [crop_offset, crop_offset + content_len) of the scaled axis is taken, and it lands at
// [pad_before, pad_before + content_len) of an out_len-long output axis; the rest is padding.
// Images and masks share the same plan, so they always get the same box.
#pragma once
#include <cstdint>
#include <vector>

#include "image.hpp"

namespace shardpack {

enum class resize_mode { none, stretch, shorter, fit };
enum class crop_mode { center, topleft, none };
// Image filters (masks always use nearest, see label_map.hpp). Per axis, Pillow-style
// convolution with centre (c + 0.5) * src / scaled and the support widened by the scale when
// downscaling (antialiasing):
//   area     downscaling: exact pixel-area coverage (OpenCV INTER_AREA); upscaling: bilinear
//   bilinear triangle, support 1
//   lanczos  Lanczos3, support 3 (the result is the exact separable filter, clamped once)
enum class resample_filter { area, bilinear, lanczos };

struct geometry_options {
    std::uint32_t width = 0, height = 0;  // 0,0: no target size (output = source)
    resize_mode resize = resize_mode::none;
    crop_mode crop = crop_mode::center;
    resample_filter filter = resample_filter::area;
};

// One axis of the plan. Output pixel j (0-based) shows the scaled-image pixel
// (j - pad_before + crop_offset) when pad_before <= j < pad_before + content_len, else padding.
// The scaled image is the source (src_len pixels) resampled to scaled_len pixels.
struct axis_plan {
    std::uint32_t src_len = 0, scaled_len = 0, crop_offset = 0, pad_before = 0, content_len = 0, out_len = 0;
    // The filter the image will be resampled with; src_rows_needed() accounts for its support.
    // plan_geometry() sets it from the options; the default (lanczos) has the widest support.
    resample_filter filter = resample_filter::lanczos;

    // True when this axis is a plain crop/pad copy (no resampling).
    bool copy() const { return scaled_len == src_len; }
    // The source pixels [0, n) this axis reads to produce the output: the last one touched by the
    // filter's support or by the masks' nearest-neighbour mapping (whichever is further), + 1.
    // Used on the y axis to stop decoding early. 0 when the output has no content.
    std::uint32_t src_rows_needed() const;

    bool operator==(const axis_plan&) const = default;
};

struct geometry_plan {
    axis_plan x, y;
    std::uint32_t out_width() const { return x.out_len; }
    std::uint32_t out_height() const { return y.out_len; }
    // No resampling on either axis (scaled == src): only crop / pad copies, bit-exact.
    bool identity() const { return x.copy() && y.copy(); }
    bool operator==(const geometry_plan&) const = default;
};

// The plan for a src_w x src_h source. Throws usage_error for inconsistent options (only one of
// width/height set, a resize mode without a size) and input_error for a degenerate source (0 wide
// or high) or sizes too large to handle.
geometry_plan plan_geometry(std::uint32_t src_w, std::uint32_t src_h, const geometry_options& options);

// Coefficient tables of one resampled axis (internal to the resampler, kept for reuse).
struct resample_axis_table {
    axis_plan plan{};
    resample_filter filter = resample_filter::area;
    bool valid = false;
    bool fixed_window = false;           // every pixel reads `taps` pixels (see geometry.cpp)
    std::uint32_t taps = 0;              // coefficients per output pixel (fixed stride)
    std::uint32_t span_first = 0;        // first source pixel any output pixel reads
    std::uint32_t span_end = 0;          // one past the last source pixel read
    std::vector<std::uint32_t> first;    // per content pixel: first source pixel, absolute
    std::vector<std::uint32_t> count;    // per content pixel: number of taps used
    std::vector<std::int16_t> coeffs;    // per content pixel: `taps` coefficients, sum = 1 << 14
    std::vector<std::int32_t> coeff_pairs;  // fixed_window: coeffs as (even, odd) int16 pairs, odd taps padded
    bool wide_accumulator = false;       // sum of |coeffs| too large for a 32-bit second pass
    bool has_negative = false;           // some coefficient < 0 (lanczos)
};

// Reusable per-thread state of apply_geometry: coefficient tables (recomputed only when the plan
// or filter changes) and row buffers. Not shared between threads.
struct resample_scratch {
    resample_axis_table x, y;
    std::vector<std::int16_t> mid;                // vertical pass result, one row (fixed point)
    std::vector<const std::uint8_t*> rows;        // source rows of one output row
};

// Applies the plan to an image (1, 3 or 4 channels; the output has the same channels). Crop and
// pad are exact copies on an axis with scaled_len == src_len; otherwise that axis is resampled
// (separable, fixed point, Pillow-style convolution; see resample_filter) computing only the
// output's window. src.width must equal plan.x.src_len; src may be a partially decoded image
// with at least plan.y.src_rows_needed() rows (plan.y.src_len stays the true height). Padding
// is 0. Throws input_error when src does not fit the plan.
image_u8 apply_geometry(const image_u8& src, const geometry_plan& plan, resample_filter filter);
// Same, writing into `out` (its buffer capacity is reused).
void apply_geometry(const image_u8& src, const geometry_plan& plan, resample_filter filter, image_u8& out);
// Same, with caller-kept tables and buffers: no allocation once warm for a repeating plan.
void apply_geometry(const image_u8& src, const geometry_plan& plan, resample_filter filter, image_u8& out,
                    resample_scratch& scratch);

// The checks every user of a plan makes before it reads a source (image or mask), one place:
// - an inconsistent plan is a bug of the caller: std::invalid_argument naming `caller`;
// - a source that does not fit it is bad input: input_error naming `what` ("image", "mask"),
//   unless it is `plan_width` wide and has `rows_needed` rows (or more).
void check_plan_consistent(const geometry_plan& plan, const char* caller);
void check_source_fits(const char* what, std::uint32_t width, std::uint32_t rows, std::uint32_t plan_width,
                       std::uint32_t rows_needed);

// The nearest-neighbour source pixel for scaled-axis coordinate c (as used for masks):
// floor((c + 0.5) * src_len / scaled_len), clamped to src_len - 1.
inline std::uint32_t nearest_source(const axis_plan& a, std::uint32_t c) {
    const std::uint64_t v = ((2 * std::uint64_t(c) + 1) * a.src_len) / (2 * std::uint64_t(a.scaled_len));
    return v >= a.src_len ? a.src_len - 1 : static_cast<std::uint32_t>(v);
}

// The source rows a nearest-neighbour (mask) mapping of the plan reads.
inline std::uint32_t nearest_rows_needed(const geometry_plan& plan) {
    if (!plan.y.content_len || !plan.x.content_len) return 0;
    return nearest_source(plan.y, plan.y.crop_offset + plan.y.content_len - 1) + 1;
}

}  // namespace shardpack
