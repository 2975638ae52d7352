// The order records are written in: CSV order, or a permutation fixed by a seed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardpack {

// Fisher-Yates driven by std::mt19937_64, whose output the C++ standard fixes, so a seed gives
// the same order with every compiler and library. Row indices are 32-bit (half the memory on
// big lists): an input list has fewer than 2^32 rows, since it numbers its lines in 32 bits.
// Throws std::length_error for a larger count.
std::vector<std::uint32_t> sample_order(std::size_t count, bool shuffle, std::uint64_t seed);

}  // namespace shardpack
