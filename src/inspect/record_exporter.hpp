// `shardpack export`: one record back to files a person can look at: the stored image exactly,
// and a segmentation label drawn in the class dictionary's colours.
#pragma once
#include <string>

#include "shardpack/detail/json.hpp"

namespace shardpack {

// Writes PREFIX.image.png and, for segmentation, PREFIX.label.png. Ignored label pixels are
// transparent (the label PNG is then RGBA); otherwise it is RGB. Returns what it wrote.
detail::json export_record(const std::string& dir, std::size_t index, const std::string& prefix);

}  // namespace shardpack
