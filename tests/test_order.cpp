// include/shardpack/order.hpp: the global and the locality-aware (blocks) shuffles. Every index
// once per epoch, the same order for the same (seed, epoch), a new one per epoch, equal shares
// per rank, blocks that never span shards, windows that hold at most `window` blocks, and
// statistics that show the order is shuffled. Runs in well under a second.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "shardpack/order.hpp"

using namespace shardpack;

namespace {

bool is_permutation_of_range(const std::vector<std::uint64_t>& order, std::uint64_t n) {
    if (order.size() != n) return false;
    std::vector<char> seen(static_cast<std::size_t>(n), 0);
    for (const auto i : order) {
        if (i >= n || seen[i]) return false;
        seen[i] = 1;
    }
    return true;
}

order_options blocks(std::size_t block, std::size_t window, std::vector<std::uint64_t> shard_starts = {}) {
    order_options o;
    o.kind = order_kind::blocks;
    o.block = block;
    o.window = window;
    o.shard_starts = std::move(shard_starts);
    return o;
}

// Pearson correlation of position and index: about 0 for a shuffle, 1 for 0..n-1.
double position_correlation(const std::vector<std::uint64_t>& order) {
    const double n = static_cast<double>(order.size());
    double sx = 0, sy = 0, sxx = 0, syy = 0, sxy = 0;
    for (std::size_t k = 0; k < order.size(); ++k) {
        const double x = static_cast<double>(k), y = static_cast<double>(order[k]);
        sx += x, sy += y, sxx += x * x, syy += y * y, sxy += x * y;
    }
    return (n * sxy - sx * sy) / std::sqrt((n * sxx - sx * sx) * (n * syy - sy * sy));
}

}  // namespace

TEST_CASE("order: the random stream is pinned (the same on every platform and in Python)", "[order]") {
    // Fixed values: a change of the generator or of Fisher-Yates changes every user's order.
    CHECK(permutation(10, 1, 2) == std::vector<std::uint64_t>{2, 0, 9, 3, 4, 1, 5, 6, 8, 7});
    CHECK(block_permutation(12, 1, 2, 3, 2, {}) == std::vector<std::uint64_t>{5, 9, 4, 11, 10, 3, 0, 2, 1, 8, 6, 7});
    order_random r(0, 0, 0);
    for (int k = 0; k < 1000; ++k) CHECK(r.below(7) < 7);
}

TEST_CASE("order: every index exactly once, for both shuffles and shapes of blocks", "[order]") {
    for (std::uint64_t n : {0, 1, 2, 7, 64, 1000, 1001}) {
        INFO("n = " << n);
        CHECK(is_permutation_of_range(permutation(n, 3, 4), n));
        for (std::size_t block : {1, 3, 64, 5000})
            for (std::size_t window : {1, 2, 16}) {
                INFO("block " << block << " window " << window);
                CHECK(is_permutation_of_range(block_permutation(n, 3, 4, block, window, {}), n));
                if (n > 10) CHECK(is_permutation_of_range(block_permutation(n, 3, 4, block, window, {0, 5, 6, 10}), n));
            }
    }
}

TEST_CASE("order: the same for the same (seed, epoch), new for a new epoch or seed", "[order]") {
    for (const auto& o : {order_options{}, blocks(16, 4)}) {
        const auto a = full_order(5000, 7, 3, o);
        CHECK(a == full_order(5000, 7, 3, o));
        CHECK(a != full_order(5000, 7, 4, o));
        CHECK(a != full_order(5000, 8, 3, o));
        // Epochs differ everywhere, not just at the start: few positions agree.
        const auto b = full_order(5000, 7, 4, o);
        std::size_t same = 0;
        for (std::size_t k = 0; k < a.size(); ++k) same += a[k] == b[k];
        CHECK(same < 50);
    }
    order_options sequential;
    sequential.shuffle = false;
    CHECK(full_order(5, 1, 1, sequential) == std::vector<std::uint64_t>{0, 1, 2, 3, 4});
}

TEST_CASE("order: blocks never span a shard and are of equal size within a shard", "[order]") {
    const auto starts = order_blocks(100, 8, {0, 30, 31, 70});
    // Shard 0..30: 4 blocks (30/8 rounded up), shard 30..31: 1, shard 31..70: 5, shard 70..100: 4.
    CHECK(starts == std::vector<std::uint64_t>{0, 7, 15, 22, 30, 31, 38, 46, 54, 62, 70, 77, 85, 92, 100});
    CHECK(order_blocks(10, 4, {}) == std::vector<std::uint64_t>{0, 3, 6, 10});
    CHECK_THROWS_AS(order_blocks(10, 0, {}), std::invalid_argument);
    CHECK_THROWS_AS(order_blocks(10, 4, {1}), std::invalid_argument);
    CHECK_THROWS_AS(order_blocks(10, 4, {0, 5, 5}), std::invalid_argument);
    CHECK_THROWS_AS(order_blocks(10, 4, {0, 10}), std::invalid_argument);
    CHECK_THROWS_AS(block_permutation(10, 0, 0, 4, 0, {}), std::invalid_argument);
}

TEST_CASE("order: a window of the blocks shuffle holds whole blocks, at most `window` of them", "[order]") {
    const std::uint64_t n = 10000;
    const std::size_t block = 50, window = 4;
    const std::vector<std::uint64_t> shards{0, 1234, 5000, 7777};
    const auto starts = order_blocks(n, block, shards);
    const auto order = block_permutation(n, 11, 0, block, window, shards);
    auto block_of = [&](std::uint64_t i) {
        return static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), i) - starts.begin() - 1);
    };
    // Walk the order: a window closes when its positions are exactly the records of the
    // `window` blocks seen (or the epoch ends); it never touches more blocks.
    std::size_t position = 0, windows = 0;
    while (position < n) {
        std::set<std::size_t> in_window;
        std::uint64_t covered = 0;
        std::size_t k = position;
        while (k < n) {
            const std::size_t b = block_of(order[k]);
            if (in_window.insert(b).second) covered += starts[b + 1] - starts[b];
            ++k;
            if (in_window.size() > window || (in_window.size() == window && k - position == covered)) break;
        }
        CHECK(in_window.size() <= window);
        CHECK(k - position == covered);
        position = k;
        ++windows;
    }
    CHECK(windows == (starts.size() - 1 + window - 1) / window);
}

TEST_CASE("order: the shuffles are shuffled (statistics)", "[order]") {
    const std::uint64_t n = 20000;
    // Position and index are uncorrelated for both shuffles (|r| < 0.05 at n = 20000; the
    // standard deviation of r for a random permutation is 1/sqrt(n) = 0.007, and for the blocks
    // shuffle about sqrt(window * block / n) smaller than that of a block permutation of 400 blocks,
    // 0.05: 0.1 leaves room).
    CHECK(std::abs(position_correlation(permutation(n, 1, 0))) < 0.05);
    CHECK(std::abs(position_correlation(block_permutation(n, 1, 0, 50, 8, {}))) < 0.15);
    // Neighbours in the order are rarely neighbours in the dataset (a window of 8 blocks of 50:
    // chance about 2/400).
    const auto order = block_permutation(n, 1, 0, 50, 8, {});
    std::size_t adjacent = 0;
    for (std::size_t k = 1; k < n; ++k) adjacent += order[k] == order[k - 1] + 1 || order[k] + 1 == order[k - 1];
    CHECK(adjacent < n / 50);
    // Where record 0 lands is uniform over the epoch's positions across seeds (chi-square over
    // 10 bins, 2000 seeds, 9 degrees of freedom: 27.9 is the 0.1% point).
    for (const auto& o : {order_options{}, blocks(4, 2)}) {
        std::vector<double> bins(10, 0);
        const std::uint64_t m = 200;
        for (std::uint64_t seed = 0; seed < 2000; ++seed) {
            const auto p = full_order(m, seed, 0, o);
            const auto where = static_cast<std::size_t>(std::find(p.begin(), p.end(), 0u) - p.begin());
            bins[where * 10 / m] += 1;
        }
        double chi2 = 0;
        for (double b : bins) chi2 += (b - 200) * (b - 200) / 200;
        CHECK(chi2 < 27.9);
    }
}

TEST_CASE("order: ranks get equal shares that cover the epoch (padded or dropped)", "[order]") {
    const std::uint64_t n = 1003;
    for (const auto& o : {order_options{}, blocks(16, 4, {0, 500})}) {
        const auto all = full_order(n, 5, 2, o);
        for (std::size_t world : {1, 2, 3, 8}) {
            INFO("world " << world);
            // drop_last=false: ceil(n / world) each; together the epoch, then its start again.
            std::map<std::uint64_t, int> count;
            for (std::size_t rank = 0; rank < world; ++rank) {
                const auto mine = epoch_order(n, 5, 2, rank, world, false, o);
                CHECK(mine.size() == (n + world - 1) / world);
                for (auto i : mine) ++count[i];
            }
            CHECK(count.size() == n);
            std::uint64_t extra = 0;
            for (const auto& [i, c] : count) extra += c - 1;
            CHECK(extra == (n + world - 1) / world * world - n);
            // drop_last=true: n / world each, disjoint.
            std::set<std::uint64_t> seen;
            for (std::size_t rank = 0; rank < world; ++rank) {
                const auto mine = epoch_order(n, 5, 2, rank, world, true, o);
                CHECK(mine.size() == n / world);
                for (auto i : mine) CHECK(seen.insert(i).second);
            }
            CHECK(seen.size() == n / world * world);
        }
        CHECK(epoch_order(n, 5, 2, 0, 1, false, o) == all);
    }
    // The global shuffle interleaves ranks; the blocks shuffle gives each rank a contiguous share.
    CHECK(epoch_order(10, 1, 2, 1, 2, false, order_options{}) == std::vector<std::uint64_t>{0, 3, 1, 6, 7});
    const auto b = block_permutation(12, 1, 2, 3, 2, {});
    CHECK(epoch_order(12, 1, 2, 1, 2, false, blocks(3, 2)) == std::vector<std::uint64_t>(b.begin() + 6, b.end()));
    CHECK_THROWS_AS(epoch_order(10, 0, 0, 2, 2, false, order_options{}), std::invalid_argument);
    // Without options: the global shuffle, as order_options{} (issue #35, the first hour).
    CHECK(epoch_order(10, 1, 2, 1, 2, false) == epoch_order(10, 1, 2, 1, 2, false, order_options{}));
    CHECK(full_order(10, 1, 2) == permutation(10, 1, 2));
    CHECK_THROWS_AS(epoch_order(10, 0, 0, 0, 0, false, order_options{}), std::invalid_argument);
}

TEST_CASE("order: an epoch resumed at any position reads exactly the rest", "[order]") {
    // The order is a function of its arguments, so a resumed reader recomputes it and skips
    // what was read; nothing else is stored.
    const auto o = blocks(8, 3, {0, 100});
    const auto mine = epoch_order(777, 9, 5, 1, 3, false, o);
    for (std::size_t position : {0, 1, 100, 258, 259}) {
        const auto again = epoch_order(777, 9, 5, 1, 3, false, o);
        CHECK(std::vector<std::uint64_t>(again.begin() + position, again.end()) ==
              std::vector<std::uint64_t>(mine.begin() + position, mine.end()));
    }
}
