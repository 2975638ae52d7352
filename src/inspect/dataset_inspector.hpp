// `shardpack inspect`: what a dataset holds, from its manifest and shard indexes (no record is
// decoded, so it is instant on any size).
#pragma once
#include <string>

#include "shardpack/detail/json.hpp"

namespace shardpack {

detail::json inspect_dataset(const std::string& dir);
std::string format_inspection(const detail::json& inspection);

}  // namespace shardpack
