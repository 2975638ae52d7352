// The order records are written in: CSV order, or a permutation fixed by a seed.
#pragma once
#include <cstdint>
#include <vector>

namespace shardpack {

// Fisher-Yates driven by std::mt19937_64, whose output the C++ standard fixes, so a seed gives
// the same order with every compiler and library.
std::vector<std::size_t> sample_order(std::size_t count, bool shuffle, std::uint64_t seed);

}  // namespace shardpack
