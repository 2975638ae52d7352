// Index masks: mask values that are class ids (grayscale or palette indices) → class ids of the
// dataset (0..K-1 in class-table order), with listed values ignored.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "decode/png_value_decoder.hpp"
#include "errors.hpp"
#include "transform/geometry.hpp"
#include "transform/label_map.hpp"

namespace shardpack {

// Mask value → class id. Immutable after construction; may be shared by threads.
class value_lookup {
public:
    // class_values[id]: the mask value of class id (unique). ignore_values: values that become
    // the ignore value. Throws usage_error for a value given twice or listed as both.
    value_lookup(const std::vector<std::uint16_t>& class_values, const std::vector<std::uint16_t>& ignore_values);
    // The class id, ignored, or unknown.
    int find(std::uint16_t value) const { return table_[value]; }
    static constexpr int ignored = -2;
    static constexpr int unknown = -1;
    std::size_t size() const { return classes_; }

private:
    std::vector<std::int32_t> table_;  // 65536 entries
    std::size_t classes_ = 0;
};

// Thrown by map_index_mask for a value in neither the class table nor the ignore list, under
// policy error.
struct unknown_value_error : input_error {
    unknown_value_error(const std::string& what, std::uint16_t value_, std::uint32_t x_, std::uint32_t y_)
        : input_error(what), value(value_), x(x_), y(y_) {}
    std::uint16_t value = 0;
    std::uint32_t x = 0, y = 0;
};

// Nearest-neighbour geometry (the same boxes as map_mask) and value lookup. An ignored value
// or padding → ignore_value. An unknown value: under error, unknown_value_error("unknown mask
// value V at pixel (x,y) ..."); under ignore, ignore_value, counted in *unknown_count and in
// stats->unknown (whose rgb member then holds the value). stats may be null; by_tolerance stays 0.
void map_index_mask(const value_plane& mask, const geometry_plan& plan, const value_lookup& lookup,
                    unknown_color_policy policy, std::uint16_t ignore_value, label_plane& out,
                    std::uint64_t* unknown_count, mask_mapping_stats* stats);

}  // namespace shardpack
