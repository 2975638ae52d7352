// What a build (and `colors`) is told about its masks, for transform/mask_mapper: how their
// values name classes and what becomes of a value the class table lacks. build_options and
// color_census_options hold one each.
#pragma once
#include <cstdint>
#include <vector>

#include "transform/label_map.hpp"

namespace shardpack {

// How a mask's pixels name classes: by color through the dictionary, or as the class ids
// themselves (grayscale values or palette indices). automatic: index when the class table gives
// ids (a name,id table), else color.
enum class mask_value_kind { automatic, color, index };

struct mask_options {
    mask_value_kind values = mask_value_kind::automatic;               // --mask-values
    unknown_color_policy unknown_label = unknown_color_policy::error;  // --unknown-label
    unsigned color_tolerance = 0;                                      // --color-tolerance (color masks)
    std::vector<std::uint16_t> ignore_values;                          // --ignore-values (index masks)
};

}  // namespace shardpack
