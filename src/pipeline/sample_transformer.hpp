// Pipeline stage 3 (parallel): decode, crop/resize, convert color, map the mask's colors to
// classes and lay the record out. Pure: the same job always gives the same bytes.
#pragma once
#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "decode/decode_limits.hpp"
#include "decode/image_decoder.hpp"
#include "image.hpp"
#include "input/class_table.hpp"
#include "pipeline/build_options.hpp"
#include "transform/mask_mapper.hpp"
#include "pipeline/sample_job.hpp"
#include "shardpack/detail/format.hpp"
#include "transform/field_geometry.hpp"
#include "transform/geometry.hpp"
#include "transform/label_map.hpp"

namespace shardpack {

// Per-thread buffers, reused from sample to sample.
struct transform_scratch {
    image_u8 decoded;  // the source image, as decoded
    image_u8 mask;     // the source mask, as decoded
    image_u8 image;    // the record's image
    label_plane labels;
    resample_scratch resample;
    mask_scratch mask_values;     // (with the mask's library session)
    probe_session image_session;  // the image's libpng/libjpeg session, from its probe to its decode
    mask_mapping_stats mapping;
    std::vector<unsigned char> field_bytes;  // the record's field values, encoded
    std::vector<field_value> field_values;
    std::vector<std::vector<source_box>> field_boxes;
};

// The pixels a build stores, resolved before it starts from --depth and --color and, where those
// leave it open, from the image of the input list's first row (the same row for every part of a
// --partition build): its bits a sample (--depth auto) and its band count (--color bands).
struct stored_pixels {
    std::uint8_t sample_bytes = 1;  // 1: uint8; 2: uint16
    std::uint8_t bands = 0;         // --color bands: the channel count; else 0
};
// The first row is read within max_row_bytes (a row's share of --memory-limit), as every row is.
// A sample stream (an empty input list) has no rows ahead: its first sample, read ahead
// (sample_stream::first), stands for the first row; null when the stream has none.
stored_pixels resolve_stored_pixels(const build_options& options, const input_list& input, std::uint64_t max_row_bytes,
                                    const sample_job* first_streamed = nullptr);

// The schema a build with these options writes.
detail::schema_record make_schema(const build_options& options, task_kind task, std::size_t class_count,
                                  const stored_pixels& pixels = {});

// For a JPEG of width x height that `full_plan` (made with `g`) downscales: asks `request` for the
// smallest DCT scale that still covers the scaled size and returns the plan over that smaller
// decode. Returns full_plan, and leaves `request` alone, where no scale below 8/8 applies.
geometry_plan plan_jpeg_dct_scaling(std::uint32_t width, std::uint32_t height, const geometry_plan& full_plan,
                                    const geometry_options& g, decode_request& request);

class sample_transformer {
public:
    // mask_values: resolved (resolve_mask_values); hint: how to list the input's colors, for messages.
    // max_row_bytes: the memory one row may take (memory_plan::per_row): a row whose files,
    // decodes and record would take more (from the headers, before decoding) is refused naming
    // the limit. interrupt: the build's signal flag, polled inside long decodes.
    sample_transformer(const build_options& options, const detail::schema_record& schema,
                       const std::vector<class_entry>& classes, mask_value_kind mask_values = mask_value_kind::color,
                       std::string hint = "shardpack colors", std::uint64_t max_row_bytes = UINT64_MAX,
                       const std::atomic<int>* interrupt = nullptr);
    void operator()(sample_job& job, transform_scratch& scratch) const;

private:
    const build_options& options_;
    std::uint64_t max_row_bytes_;
    const std::atomic<int>* interrupt_;
    detail::schema_record schema_;
    std::optional<mask_mapper> masks_;
    void transform(sample_job& job, transform_scratch& scratch) const;
};

}  // namespace shardpack
