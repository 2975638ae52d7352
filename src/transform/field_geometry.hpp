// Boxes through the build's geometry: a box of the source image lands where its pixels land
// (resize, crop, padding), clipped to the record's content; a box with nothing left is dropped.
// formats/shardpack-v1.md 10.4.2 states the rule.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "input/field_columns.hpp"
#include "transform/geometry.hpp"

namespace shardpack {

struct box_counts {
    std::uint64_t clipped = 0;  // boxes cut at the source image's or the record's edge
    std::uint64_t dropped = 0;  // boxes empty in the source, or with nothing left in the record
};

// The record's box for a source box under `plan` (float64 arithmetic, rounded once to float32);
// false when it is dropped. Counts what happened in `counts`.
bool box_through_geometry(const source_box& in, const geometry_plan& plan, box& out, box_counts& counts);

// A record's encoded field values (detail::encode_field_values) from its row's source form, the
// boxes carried through `plan`. `values` and `boxes` are scratch, reused.
void record_field_bytes(const std::vector<field_info>& decls, std::string_view source_row, const geometry_plan& plan,
                        std::vector<unsigned char>& out, box_counts& counts, std::vector<field_value>& values,
                        std::vector<std::vector<source_box>>& boxes);

}  // namespace shardpack
