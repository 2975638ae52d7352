#include "pipeline/sample_transformer.hpp"

#include <algorithm>
#include <cstring>

#include "decode/color_convert.hpp"
#include "decode/image_decoder.hpp"
#include "decode/jpeg_decoder.hpp"
#include "decode/sniff.hpp"
#include "errors.hpp"
#include "format/record_encoder.hpp"
#include "pipeline/file_loader.hpp"
#include "pipeline/memory_budget.hpp"

namespace shardpack {
using namespace detail;

namespace {
// The layout a file is decoded in: --color's, but a JPEG's bands are its RGB (libjpeg converts
// every JPEG to RGB; gray ones are replicated).
pixel_layout decode_layout(pixel_layout color, file_format format) {
    return color == pixel_layout::bands && format == file_format::jpeg ? pixel_layout::rgb : color;
}
}  // namespace

stored_pixels resolve_stored_pixels(const build_options& o, const input_list& input, std::uint64_t max_row_bytes,
                                    const sample_job* first_streamed) {
    stored_pixels p;
    p.sample_bytes = o.depth == 16 ? 2 : 1;
    const bool streamed = input.empty();  // a sample stream: its first sample stands for the first row
    if ((o.depth != 0 && o.color != pixel_layout::bands) || (streamed && first_streamed == nullptr)) {
        if (o.color == pixel_layout::bands)
            throw input_error("--color bands stores as many bands as the first sample's image has, and the sample stream has none");
        return p;
    }
    std::string path;
    std::vector<std::uint8_t> own_bytes;
    const std::vector<std::uint8_t>* bytes = &own_bytes;
    file_format format = file_format::unknown;
    image_u8 first;
    std::string why;
    bool decoded = false;
    if (streamed) {
        path = "sample 0 '" + first_streamed->key_text + "'";  // as the build's messages name a streamed sample
        if (!first_streamed->ok()) {
            why = first_streamed->error;
        } else if (first_streamed->image_pixels.is_pixels()) {  // pixels: their shape says it
            first.channels = first_streamed->image_pixels.channels;
            first.sample_bytes = first_streamed->image_pixels.value_bytes;
            decoded = true;
        } else {
            bytes = &first_streamed->image_file;
            format = sniff_format(bytes->data(), bytes->size());
        }
    } else {
        input.image_path(0, path);
        // Within a row's share of --memory-limit, as the row itself will be read and decoded.
        why = read_file_into(path, own_bytes, nullptr, max_row_bytes, false, &format);
    }
    // --depth auto reads the first row's header only; --color bands decodes it, the only way to
    // learn the band count of every format (a JPEG's is the decoder's choice).
    if (why.empty() && !decoded) {
        try {
            if (o.color == pixel_layout::bands) {
                decode_request req;
                req.layout = decode_layout(o.color, format);
                req.keep_16 = true;
                const std::uint64_t need = decode_memory_estimate(probe_image(bytes->data(), bytes->size(), format), req);
                if (need + bytes->size() > max_row_bytes)
                    throw decode_error("decoding it needs about " + format_bytes(need) + ", more than a row may take: " +
                                       format_bytes(max_row_bytes) + " (from --memory-limit)");
                decode_image(bytes->data(), bytes->size(), format, req, first);
            } else {
                first.sample_bytes = probe_image(bytes->data(), bytes->size(), format).bit_depth == 16 ? 2 : 1;
            }
        } catch (const std::exception& e) {
            why = e.what();
        }
    }
    if (!why.empty()) {
        if (o.color == pixel_layout::bands)
            throw input_error(path + ": --color bands stores as many bands as the first " + (streamed ? "sample" : "row") +
                              "'s image has, and it cannot be read: " + why);
        return p;  // --depth auto: 8 bits; the row fails as it would anyway
    }
    if (o.depth == 0) p.sample_bytes = static_cast<std::uint8_t>(first.sample_bytes);
    if (o.color == pixel_layout::bands) {
        if (first.channels == 0 || first.channels > detail::max_bands)
            throw input_error(path + ": " + std::to_string(first.channels) + " bands; a record holds 1 to " +
                              std::to_string(detail::max_bands));
        p.bands = static_cast<std::uint8_t>(first.channels);
    }
    return p;
}

schema_record make_schema(const build_options& o, task_kind task, std::size_t class_count, const stored_pixels& pixels) {
    schema_record s;
    s.channels = static_cast<std::uint8_t>(o.color == pixel_layout::bands ? pixels.bands : channel_count(o.color));
    s.channel_order = o.color == pixel_layout::gray ? order_code::gray
                    : o.color == pixel_layout::rgb ? order_code::rgb
                    : o.color == pixel_layout::rgba ? order_code::rgba : order_code::bands;
    s.image_dtype_bytes = pixels.sample_bytes;
    s.class_count = static_cast<std::uint32_t>(class_count);
    s.ignore_value = class_count <= 255 ? 255 : 65535;
    const bool fixed = o.geometry.width != 0 && !(o.geometry.resize == resize_mode::shorter && o.geometry.crop == crop_mode::none) &&
                       !(o.geometry.resize == resize_mode::none && o.geometry.crop == crop_mode::none);
    s.fixed_width = fixed ? o.geometry.width : 0;
    s.fixed_height = fixed ? o.geometry.height : 0;
    if (task == task_kind::segmentation) {
        s.task = task_code::segmentation;
        if (o.label_layout == label_layout_option::one_hot) {
            s.label_layout = layout_code::one_hot;
            s.label_dtype_bytes = 1;
        } else {
            s.label_layout = layout_code::index;
            s.label_dtype_bytes = class_count <= 255 ? 1 : 2;
        }
    } else {
        s.task = task_code::classification;
        s.label_layout = layout_code::class_id;
        s.label_dtype_bytes = 0;
    }
    return s;
}

sample_transformer::sample_transformer(const build_options& options, const schema_record& schema,
                                       const std::vector<class_entry>& classes, mask_value_kind mask_values,
                                       std::string hint, std::uint64_t max_row_bytes, const std::atomic<int>* interrupt)
    : options_(options), max_row_bytes_(max_row_bytes), interrupt_(interrupt), schema_(schema) {
    if (schema_.task == task_code::segmentation) masks_.emplace(classes, mask_values, options.mask, std::move(hint));
}

void sample_transformer::operator()(sample_job& job, transform_scratch& scratch) const {
    if (!job.ok() || job.reuse) return;
    // The files' library sessions (opened by the probes, taken up by the decoders) end with the
    // sample, whatever happened to it: none outlives the bytes it reads.
    struct close_sessions {
        transform_scratch& s;
        ~close_sessions() {
            s.image_session.close();
            s.mask_values.session.close();
        }
    } closer{scratch};
    try {
        transform(job, scratch);
    } catch (const std::exception& e) {
        job.error = e.what();
        return;
    }
    // What the report needs of this record, kept for rebuilds that take it back.
    job.fingerprint.unknown_pixels = job.unknown_pixels;
    for (std::uint32_t c = 0; c < job.class_counts.size(); ++c)
        if (job.class_counts[c]) job.fingerprint.class_counts.emplace_back(c, job.class_counts[c]);
    if (schema_.task == task_code::segmentation) {
        const mask_mapping_stats& m = scratch.mapping;
        for (std::uint32_t c = 0; c < m.by_tolerance.size(); ++c)
            if (m.by_tolerance[c]) job.fingerprint.tolerance_counts.emplace_back(c, m.by_tolerance[c]);
        for (const auto& u : m.unknown) {
            if (job.fingerprint.unknown_values.size() == max_listed_unknown_values) break;
            job.fingerprint.unknown_values.push_back({u.rgb, u.pixels, u.x, u.y});
        }
    }
}

namespace {
// A streamed sample's image pixels as decoding a file of them would give them: in the stored
// channels, as the decoders convert (convert_layout at 8 bits, convert_samples at 16 or for 2 or
// more than 4 bands), and 16-bit pixels in an 8-bit build cut to their high byte first, as a
// 16-bit PNG's are before its channels are converted. The bytes move into `out` (no copy when
// the channels already match); `bytes` gets out's old buffer back, to keep both capacities.
void take_pixels(std::vector<std::uint8_t>& bytes, const pixel_shape& shape, pixel_layout layout,
                 std::uint32_t stored_sample_bytes, image_u8& out) {
    image_u8 img;
    img.width = shape.width;
    img.height = shape.height;
    img.channels = shape.channels;
    img.sample_bytes = shape.value_bytes;
    img.pixels.swap(bytes);
    bytes.swap(out.pixels);
    if (img.sample_bytes > stored_sample_bytes) convert_depth(img, stored_sample_bytes);
    if (layout == pixel_layout::bands || img.channels == channel_count(layout)) {  // as given
        out = std::move(img);
        return;
    }
    if (img.sample_bytes == 1 && (img.channels == 1 || img.channels == 3 || img.channels == 4)) {
        out = convert_layout(std::move(img), layout);
        return;
    }
    convert_samples(img, layout, out);
}

// A streamed mask's pixels as decode_mask would give a file of them: index masks as values (one
// channel, uint8 or uint16; colors are refused as the PNG value decoder refuses them), color
// masks as RGB (gray replicated, alpha dropped; uint16 values refused).
void take_mask_pixels(std::vector<std::uint8_t>& bytes, const pixel_shape& shape, bool index_masks, mask_scratch& out) {
    const std::size_t n = std::size_t(shape.width) * shape.height;
    if (index_masks) {
        if (shape.channels != 1)
            throw input_error("an index mask (--mask-values index) needs one channel of class ids, not " +
                              std::to_string(unsigned(shape.channels)) + " channels of colors");
        out.values.width = shape.width;
        out.values.height = shape.height;
        out.values.values.resize(n);
        if (shape.value_bytes == 2) std::memcpy(out.values.values.data(), bytes.data(), n * 2);
        else std::copy(bytes.begin(), bytes.begin() + std::ptrdiff_t(n), out.values.values.begin());
        return;
    }
    if (shape.value_bytes != 1)
        throw input_error("a color mask needs uint8 pixels; uint16 values are class ids (--mask-values index)");
    take_pixels(bytes, shape, pixel_layout::rgb, 1, out.colors);
}

// Prefixes a decoder's complaint with the file it is about.
[[noreturn]] void rethrow_for(const std::string& path, const std::exception& e) {
    throw input_error(path + ": " + e.what());
}
// The image's header, parsed once here (its format was sniffed when it was read) and used by
// the plans, the memory estimate and the JPEG scaling choice. A streamed sample's pixels
// (sample_job::image_pixels) need no probe and no decode.
image_probe probe_sample_image(const sample_job& job, transform_scratch& scratch) {
    image_probe image;
    try {
        if (job.image_pixels.is_pixels()) {
            image.width = job.image_pixels.width;
            image.height = job.image_pixels.height;
            image.bit_depth = static_cast<std::uint8_t>(8 * job.image_pixels.value_bytes);  // lost_bits below
        } else {
            image = probe_image(job.image_file.data(), job.image_file.size(), job.image_format, &scratch.image_session);
        }
    } catch (const std::exception& e) {
        rethrow_for(job.image_path, e);
    }
    return image;
}

// The mask's header, which must give the image's size.
image_probe probe_sample_mask(const sample_job& job, transform_scratch& scratch, std::uint32_t width, std::uint32_t height) {
    if (job.streamed && job.label_path.empty()) throw input_error(job.image_path + ": no mask (a segmentation sample needs one)");
    image_probe mask;
    try {
        if (job.label_pixels.is_pixels()) {
            mask.width = job.label_pixels.width;
            mask.height = job.label_pixels.height;
        } else {
            mask = probe_image(job.label_file.data(), job.label_file.size(), job.label_format, &scratch.mask_values.session);
        }
    } catch (const std::exception& e) {
        rethrow_for(job.label_path, e);
    }
    if (mask.width != width || mask.height != height)
        throw input_error(job.label_path + ": mask is " + std::to_string(mask.width) + "x" + std::to_string(mask.height) +
                          " but its image " + job.image_path + " is " + std::to_string(width) + "x" + std::to_string(height));
    return mask;
}

// The row's memory, from the headers, before anything is decoded: its files, the decodes,
// and the record (payload and compressed copy) at the output size. A row that needs more
// than max_row_bytes is refused; libjpeg's own buffers get what is left (request).
void budget_row_memory(const detail::schema_record& schema_, std::uint64_t max_row_bytes_, const sample_job& job,
                       const image_probe& image, const image_probe& mask, const geometry_plan& mask_plan,
                       decode_request& request, const decode_request& mask_request) {
    const bool segmentation = schema_.task == task_code::segmentation;
    const bool image_is_pixels = job.image_pixels.is_pixels(), mask_is_pixels = job.label_pixels.is_pixels();
    const std::uint32_t width = image.width, height = image.height;
    const std::uint64_t label_bytes = label_bytes_for(schema_, 1);  // per pixel
    const std::uint64_t record = std::uint64_t(mask_plan.x.out_len) * mask_plan.y.out_len *
                                 (std::uint64_t(schema_.channels) * schema_.image_dtype_bytes + label_bytes);
    // Pixels are converted (to the stored channels; a mask to values or colors) at most once.
    std::uint64_t need = job.image_file.size() + job.label_file.size() + 2 * record +
                         (image_is_pixels ? std::uint64_t(width) * height * job.image_pixels.value_bytes *
                                               std::max<std::uint32_t>(4, job.image_pixels.channels)
                                         : decode_memory_estimate(image, request));
    if (segmentation)
        need += mask_is_pixels ? std::uint64_t(width) * height * 3 : decode_memory_estimate(mask, mask_request);
    if (need > max_row_bytes_)
        throw input_error(job.image_path + ": a " + std::to_string(width) + "x" + std::to_string(height) +
                          " image needs about " + format_bytes(need) + " to decode and pack, more than a row may take: " +
                          format_bytes(max_row_bytes_) + " (from --memory-limit)");
    // libjpeg's own buffers (a progressive file's coefficients) get what is left.
    if (max_row_bytes_ != UINT64_MAX) request.max_decoder_memory = std::max<std::uint64_t>(max_row_bytes_ - need, 16 << 20);
}

// Decodes the image (or takes its pixels) into scratch.decoded, checks it against its header
// and the dataset, and crops or resizes it into scratch.image.
void decode_sample_image(const build_options& options_, const detail::schema_record& schema_, sample_job& job,
                         const image_probe& image, const geometry_plan& image_plan, const decode_request& request,
                         transform_scratch& scratch) {
    image_u8& decoded = scratch.decoded;
    try {
        if (job.image_pixels.is_pixels()) take_pixels(job.image_file, job.image_pixels, options_.color, schema_.image_dtype_bytes, decoded);
        else decode_image(job.image_file.data(), job.image_file.size(), image.format, request, decoded, nullptr, &scratch.image_session);
    } catch (const std::exception& e) {
        rethrow_for(job.image_path, e);
    }
    if (decoded.width != image_plan.x.src_len)
        throw input_error(job.image_path + ": decoded width " + std::to_string(decoded.width) + " differs from its header");
    if (decoded.channels != schema_.channels)  // --color bands: the count of the first row's image
        throw input_error(job.image_path + ": the image has " + std::to_string(decoded.channels) + " bands, the dataset " +
                          std::to_string(unsigned(schema_.channels)) + " (--color bands keeps the count of the first row's image)");
    convert_depth(decoded, schema_.image_dtype_bytes);  // an 8-bit image in a 16-bit build: v * 257
    apply_geometry(decoded, image_plan, options_.geometry.filter, scratch.image, scratch.resample);
}

// Maps the mask's colors or values to class ids (scratch.labels) and counts the classes.
void map_sample_mask(const mask_mapper& masks, const detail::schema_record& schema_, const std::atomic<int>* interrupt_,
                     const image_probe& mask, const geometry_plan& mask_plan, sample_job& job, transform_scratch& scratch) {
    std::uint64_t unknown = 0;
    try {
        if (job.label_pixels.is_pixels()) {
            take_mask_pixels(job.label_file, job.label_pixels, masks.index_masks(), scratch.mask_values);
            masks.map_decoded(mask_plan, static_cast<std::uint16_t>(schema_.ignore_value), scratch.labels, unknown,
                              scratch.mapping, scratch.mask_values);
        } else {
            masks.map(job.label_file.data(), job.label_file.size(), mask.format, mask_plan,
                      static_cast<std::uint16_t>(schema_.ignore_value), scratch.labels, unknown, scratch.mapping,
                      scratch.mask_values, interrupt_);
        }
    } catch (const std::exception& e) {
        rethrow_for(job.label_path, e);
    }
    job.unknown_pixels = unknown;
    job.class_counts.resize(schema_.class_count);
    count_classes(scratch.labels, job.class_counts);
}
}  // namespace

void sample_transformer::transform(sample_job& job, transform_scratch& scratch) const {
    const sample_row& row = job.row;
    const bool segmentation = schema_.task == task_code::segmentation;
    const image_probe image = probe_sample_image(job, scratch);
    const std::uint32_t width = image.width, height = image.height;
    const image_probe mask = segmentation ? probe_sample_mask(job, scratch, width, height) : image_probe{};

    const geometry_plan mask_plan = plan_geometry(width, height, options_.geometry);
    geometry_plan image_plan = mask_plan;
    decode_request request;
    request.layout = decode_layout(options_.color, image.format);
    request.keep_16 = schema_.image_dtype_bytes == 2;
    // A 16-bit image in a build of 8-bit images (--depth 8, or auto after an 8-bit first row)
    // keeps the high byte of each sample: counted, and the log and report.json say so.
    job.lost_bits = schema_.image_dtype_bytes == 1 && image.bit_depth > 8;
    // A classification JPEG that will be downscaled is decoded at the smallest DCT scale that
    // still covers the scaled size. Masks keep full resolution so that image and mask share the
    // exact same box; hence segmentation never takes this path.
    if (!segmentation && options_.geometry.resize != resize_mode::none && image.format == file_format::jpeg)
        image_plan = plan_jpeg_dct_scaling(width, height, mask_plan, options_.geometry, request);
    request.max_rows = image_plan.y.src_rows_needed();
    request.interrupt = interrupt_;
    decode_request mask_request;
    mask_request.layout = pixel_layout::rgb;
    mask_request.max_rows = mask_plan.y.src_rows_needed();
    mask_request.interrupt = interrupt_;
    budget_row_memory(schema_, max_row_bytes_, job, image, mask, mask_plan, request, mask_request);

    decode_sample_image(options_, schema_, job, image, image_plan, request, scratch);
    const std::uint16_t* label_ids = nullptr;
    std::int32_t class_id = -1;
    if (segmentation) {
        map_sample_mask(*masks_, schema_, interrupt_, mask, mask_plan, job, scratch);
        label_ids = scratch.labels.ids.data();
    } else {
        class_id = row.class_id;
        job.class_counts.resize(schema_.class_count);
        job.class_counts[std::size_t(class_id)] += 1;
    }
    const std::vector<unsigned char>* fields = nullptr;
    if (!schema_.fields.empty()) {
        // Boxes follow the pixels: the mask's plan maps the full-size source (a JPEG decoded at a
        // DCT scale has its own plan to the same output).
        box_counts counts;
        record_field_bytes(schema_.fields, job.field_source, mask_plan, scratch.field_bytes, counts, scratch.field_values,
                           scratch.field_boxes);
        job.boxes_clipped = counts.clipped;
        job.boxes_dropped = counts.dropped;
        fields = &scratch.field_bytes;
    }
    job.layout = encode_record(schema_, row.key, scratch.image, label_ids, class_id, job.decoded, fields);
}

geometry_plan plan_jpeg_dct_scaling(std::uint32_t width, std::uint32_t height, const geometry_plan& full_plan,
                                    const geometry_options& g, decode_request& request) {
    if (full_plan.x.scaled_len >= width && full_plan.y.scaled_len >= height) return full_plan;
    const unsigned m = jpeg_dct_scale_eighths(width, height, full_plan.x.scaled_len, full_plan.y.scaled_len);
    if (m == 8) return full_plan;
    request.min_width = full_plan.x.scaled_len;
    request.min_height = full_plan.y.scaled_len;
    return plan_geometry(static_cast<std::uint32_t>((std::uint64_t(width) * m + 7) / 8),
                         static_cast<std::uint32_t>((std::uint64_t(height) * m + 7) / 8), g);
}

}  // namespace shardpack
