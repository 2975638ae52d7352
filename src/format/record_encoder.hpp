// Builds a record's decoded bytes (formats/shardpack-v1.md, "Record payload") from a
// transformed image and its label: the parallel "encode" step of the pipeline.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "image.hpp"
#include "shardpack/detail/format.hpp"

namespace shardpack {

// `label_ids`: segmentation only, height*width class ids (ignore_value where ignored) in the
// image's geometry; expanded to one-hot or narrowed to the index dtype as the schema says.
// `class_id`: classification only (-1 otherwise). `out` is reused; its capacity is kept.
// `field_values`: with fields (schema.fields not empty), the record's encoded field values
// (detail::encode_field_values), stored after the key (spec 10.4); ignored otherwise.
// Returns the record's layout (where the key, image and label lie in `out`), which the
// compressor cuts the bands by: it is computed here once, not parsed back from the bytes.
detail::record_layout encode_record(const detail::schema_record& schema, std::string_view key, const image_u8& image,
                   const std::uint16_t* label_ids, std::int32_t class_id, std::vector<unsigned char>& out,
                   const std::vector<unsigned char>* field_values = nullptr);

}  // namespace shardpack
