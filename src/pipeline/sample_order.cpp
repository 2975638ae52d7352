#include "pipeline/sample_order.hpp"

#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>

namespace shardpack {

std::vector<std::uint32_t> sample_order(std::size_t count, bool shuffle, std::uint64_t seed) {
    if (count > std::numeric_limits<std::uint32_t>::max())
        throw std::length_error("sample_order: more rows than 32-bit indices hold");
    std::vector<std::uint32_t> order(count);
    std::iota(order.begin(), order.end(), std::uint32_t(0));
    if (!shuffle) return order;
    std::mt19937_64 rng(seed);
    for (std::size_t i = count; i > 1; --i) {
        // Rejection sampling keeps the draw uniform (no modulo bias).
        const std::uint64_t bound = i, limit = UINT64_MAX - UINT64_MAX % bound;
        std::uint64_t r;
        do r = rng();
        while (r >= limit);
        std::swap(order[i - 1], order[r % bound]);
    }
    return order;
}

}  // namespace shardpack
