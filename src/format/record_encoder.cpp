#include "format/record_encoder.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

namespace shardpack {
using namespace detail;

record_layout encode_record(const schema_record& schema, std::string_view key, const image_u8& image,
                   const std::uint16_t* label_ids, std::int32_t class_id, std::vector<unsigned char>& out,
                   const std::vector<unsigned char>* field_values) {
    if (image.channels != schema.channels) throw std::logic_error("encode_record: image channels differ from the schema");
    if (image.sample_bytes != schema.image_dtype_bytes)
        throw std::logic_error("encode_record: image sample size differs from the schema");
    if (key.size() > max_key_bytes) throw std::length_error("record key is longer than 65536 bytes");
    if (image.width == 0 || image.height == 0 || image.width > max_side || image.height > max_side)
        throw std::length_error("image is " + std::to_string(image.width) + "x" + std::to_string(image.height) +
                                "; a record holds 1 to 65536 pixels a side");
    const bool fields = !schema.fields.empty();
    const std::size_t field_bytes = fields && field_values ? field_values->size() : 0;
    if (field_bytes > max_fields_bytes)
        throw std::length_error("the record's fields would be " + std::to_string(field_bytes) + " bytes, over the format's 64 MiB limit");
    const record_layout r = make_record_layout(schema, image.height, image.width, class_id,
                                               static_cast<std::uint32_t>(key.size()), static_cast<std::uint32_t>(field_bytes));
    if (r.total_bytes > max_record_bytes)
        throw std::length_error("the record would be " + std::to_string(r.total_bytes) +
                                " bytes decoded, over the format's 4 GiB limit (try --label-layout index or a --size)");
    // assign() rather than resize(): padding must be zero whatever the buffer held before.
    out.assign(static_cast<std::size_t>(r.total_bytes), 0);
    unsigned char* p = out.data();
    store_u32(p, image.height);
    store_u32(p + 4, image.width);
    store_u32(p + 8, static_cast<std::uint32_t>(class_id));
    store_u32(p + 12, static_cast<std::uint32_t>(key.size()));
    std::memcpy(p + record_header_size, key.data(), key.size());
    if (fields) {
        store_u32(p + r.fields_offset - 4, static_cast<std::uint32_t>(field_bytes));
        if (field_bytes) std::memcpy(p + r.fields_offset, field_values->data(), field_bytes);
    }
    if (image.sample_bytes == 1 || detail::little_endian_host()) {
        std::memcpy(p + r.image_offset, image.pixels.data(), static_cast<std::size_t>(r.image_bytes));
    } else {  // uint16 samples are stored little-endian
        const std::uint16_t* v = image.samples16();
        for (std::size_t i = 0; i < r.image_bytes / 2; ++i) store_u16(p + r.image_offset + 2 * i, v[i]);
    }
    if (schema.task != task_code::segmentation) return r;
    if (!label_ids) throw std::logic_error("encode_record: segmentation record without labels");
    const std::size_t pixels = std::size_t(image.height) * image.width;
    unsigned char* label = p + r.label_offset;
    if (schema.label_layout == layout_code::one_hot) {
        const std::size_t k = schema.class_count;
        for (std::size_t i = 0; i < pixels; ++i)
            if (label_ids[i] < k) label[i * k + label_ids[i]] = 1;  // ignored pixels stay all-zero
    } else if (schema.label_dtype_bytes == 1) {
        for (std::size_t i = 0; i < pixels; ++i) label[i] = static_cast<unsigned char>(label_ids[i]);
    } else {
        for (std::size_t i = 0; i < pixels; ++i) store_u16(label + 2 * i, label_ids[i]);
    }
    return r;
}

}  // namespace shardpack
