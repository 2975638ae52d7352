// include/shardpack/mix.hpp: weighted mixing of datasets and resuming an epoch on a different
// number of ranks. Per-epoch counts from the weights (largest remainder, within 1 of the exact
// share), equal shares on every rank, draws without replacement across epochs, the merge keeping
// each dataset's stream order, and a 4 -> 2 -> 3 change of world mid-epoch reading every
// remaining sample exactly once (global, blocks and mixed orders). Well under a second.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <set>

#include "shardpack/mix.hpp"

using namespace shardpack;

namespace {

std::vector<mix_source> three(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::size_t block = 64) {
    std::vector<mix_source> parts(3);
    parts[0].records = a, parts[0].weight = 0.6;
    parts[1].records = b, parts[1].weight = 0.3;
    parts[2].records = c, parts[2].weight = 0.1;
    for (auto& p : parts) p.block = block;
    return parts;
}

// Samples from each dataset in `order` (mixed indices).
std::vector<std::uint64_t> per_dataset(const std::vector<mix_source>& parts, const std::vector<std::uint64_t>& order) {
    const auto offsets = mix_offsets(parts);
    std::vector<std::uint64_t> counts(parts.size(), 0);
    for (const auto g : order) ++counts[mix_locate(offsets, g).first];
    return counts;
}

// Reads an epoch on 4 ranks, stops them part-way, resumes the rest on 2, stops again, resumes on
// 3 and reads to the end: every position of the epoch must be read exactly once (pads aside).
void check_world_changes(const std::vector<std::uint64_t>& order, bool contiguous) {
    const bool drop_last = false;
    std::multiset<std::uint64_t> read;
    std::vector<resume_stage> stages;
    // 4 ranks each read 37 (or fewer) of their share; then 2 read 60 and 41; then 3 read the rest.
    const std::vector<std::vector<std::uint64_t>> consumed{{37, 37, 37, 30}, {60, 41}};
    for (const auto& c : consumed) {
        const std::size_t world = c.size();
        for (std::size_t r = 0; r < world; ++r) {
            const auto mine = resumed_order(order, stages, r, world, drop_last, contiguous);
            REQUIRE(mine.size() >= c[r]);
            read.insert(mine.begin(), mine.begin() + static_cast<std::ptrdiff_t>(c[r]));
        }
        stages.push_back(resume_stage{c});
    }
    const auto rest = remaining_order(order, stages, drop_last, contiguous);
    std::size_t share = 0;
    std::multiset<std::uint64_t> last;
    for (std::size_t r = 0; r < 3; ++r) {
        const auto mine = resumed_order(order, stages, r, 3, drop_last, contiguous);
        if (r == 0) share = mine.size();
        CHECK(mine.size() == share);  // equal shares on the new world
        last.insert(mine.begin(), mine.end());
    }
    CHECK(share == (rest.size() + 2) / 3);
    // The last world reads every remaining position once, plus its pads (repeats of the rest's start).
    std::multiset<std::uint64_t> expected(rest.begin(), rest.end());
    for (std::size_t p = 0; p < share * 3 - rest.size(); ++p) expected.insert(rest[p]);
    CHECK(last == expected);
    // Before and after the changes together: the epoch's order, each position once.
    read.insert(rest.begin(), rest.end());
    CHECK(read == std::multiset<std::uint64_t>(order.begin(), order.end()));
}

}  // namespace

TEST_CASE("mix: per-epoch counts are the largest-remainder shares of the weights", "[mix]") {
    CHECK(mix_counts({0.6, 0.3, 0.1}, 1000) == std::vector<std::uint64_t>{600, 300, 100});
    CHECK(mix_counts({0.6, 0.3, 0.1}, 7) == std::vector<std::uint64_t>{4, 2, 1});  // 4.2, 2.1, 0.7
    CHECK(mix_counts({1, 1, 1}, 10) == std::vector<std::uint64_t>{4, 3, 3});        // ties: the earlier dataset
    CHECK(mix_counts({500, 300, 200}, 1000) == std::vector<std::uint64_t>{500, 300, 200});  // sizes: exact
    CHECK(mix_counts({0, 2}, 5) == std::vector<std::uint64_t>{0, 5});
    // Any weights: the counts sum to the epoch and each is within 1 of its exact share.
    order_random random(1, 2, 3);
    for (int t = 0; t < 500; ++t) {
        std::vector<double> w(1 + random.below(6));
        double sum = 0;
        for (auto& x : w) sum += (x = static_cast<double>(random.below(1000000)) / 997.0 + (random.below(4) == 0 ? 0 : 1e-3));
        const std::uint64_t size = random.below(100000);
        const auto c = mix_counts(w, size);
        std::uint64_t total = 0;
        for (std::size_t k = 0; k < w.size(); ++k) {
            total += c[k];
            CHECK(std::fabs(static_cast<double>(c[k]) - static_cast<double>(size) * w[k] / sum) < 1.0 + 1e-6);
        }
        CHECK(total == size);
    }
    CHECK_THROWS_AS(mix_counts({}, 5), std::invalid_argument);
    CHECK_THROWS_AS(mix_counts({0, 0}, 5), std::invalid_argument);
    CHECK_THROWS_AS(mix_counts({1, -1}, 5), std::invalid_argument);
    CHECK_THROWS_AS(mix_counts({1, std::nan("")}, 5), std::invalid_argument);
    CHECK_THROWS_AS(mix_counts({1, INFINITY}, 5), std::invalid_argument);
}

TEST_CASE("mix: the mixed order is pinned (the same on every platform and in Python)", "[mix]") {
    // Fixed values, also in tests/python/test_mix.py: a change here changes every user's order.
    const auto parts = three(10, 10, 10);
    mix_options o;
    o.epoch_size = 20;
    CHECK(mix_full_order(parts, 3, 1, o) ==
          std::vector<std::uint64_t>{9, 14, 3, 5, 10, 7, 8, 16, 2, 1, 17, 4, 11, 3, 9, 27, 23, 13, 4, 8});
    o.shuffle = false;
    CHECK(mix_full_order(parts, 0, 0, o) ==
          std::vector<std::uint64_t>{0, 10, 1, 2, 11, 20, 3, 4, 12, 5, 6, 13, 7, 8, 14, 21, 9, 0, 15, 1});
}

TEST_CASE("mix: a 0.6/0.3/0.1 mix gives its counts, equal on 4 ranks, the same for the same (seed, epoch)", "[mix]") {
    for (const bool blocks : {false, true}) {
        INFO("blocks " << blocks);
        auto parts = three(500, 300, 200, 16);
        parts[0].shard_starts = {0, 250};
        mix_options o;
        o.kind = blocks ? order_kind::blocks : order_kind::global;
        o.window = 4;
        const auto all = mix_full_order(parts, 7, 3, o);
        REQUIRE(all.size() == 1000);  // the default epoch: the sum of the sizes
        CHECK(per_dataset(parts, all) == std::vector<std::uint64_t>{600, 300, 100});
        CHECK(all == mix_full_order(parts, 7, 3, o));
        CHECK(all != mix_full_order(parts, 7, 4, o));
        CHECK(all != mix_full_order(parts, 8, 3, o));
        std::multiset<std::uint64_t> together;
        for (std::size_t rank = 0; rank < 4; ++rank) {
            const auto mine = mix_epoch_order(parts, 7, 3, rank, 4, false, o);
            CHECK(mine.size() == 250);
            together.insert(mine.begin(), mine.end());
        }
        CHECK(together == std::multiset<std::uint64_t>(all.begin(), all.end()));
        // 1001 samples on 4 ranks: 251 each, padded from the start; dropped: 250 each.
        o.epoch_size = 1001;
        CHECK(mix_epoch_order(parts, 7, 3, 3, 4, false, o).size() == 251);
        CHECK(mix_epoch_order(parts, 7, 3, 3, 4, true, o).size() == 250);
    }
}

TEST_CASE("mix: without replacement a dataset is drawn through before any record repeats", "[mix]") {
    const auto parts = three(500, 300, 200);
    const mix_options o;
    const auto offsets = mix_offsets(parts);
    // Dataset 2 (200 records, 100 an epoch): epochs 0 and 1 together draw each record once.
    std::multiset<std::uint64_t> small;
    // Dataset 0 (500 records, 600 an epoch): epoch 0 draws every record (a pass and a fifth of the
    // next), no epoch any record 3 times.
    for (std::uint64_t e = 0; e < 2; ++e) {
        std::map<std::uint64_t, int> big;
        for (const auto g : mix_full_order(parts, 1, e, o)) {
            const auto [k, i] = mix_locate(offsets, g);
            if (k == 2) small.insert(i);
            if (k == 0) ++big[i];
        }
        if (e == 0) CHECK(big.size() == 500);
        for (const auto& [i, c] : big) CHECK(c <= 2);
    }
    CHECK(small.size() == 200);
    CHECK(std::set<std::uint64_t>(small.begin(), small.end()).size() == 200);
}

TEST_CASE("mix: the merge keeps each dataset's stream order, unshuffled it is smooth", "[mix]") {
    auto parts = three(60, 30, 10);
    mix_options o;
    o.shuffle = false;
    const auto smooth = mix_full_order(parts, 0, 0, o);
    // 60/30/10 in record order, spread evenly: the first ten positions hold 6, 3 and 1.
    CHECK(per_dataset(parts, std::vector<std::uint64_t>(smooth.begin(), smooth.begin() + 10)) ==
          std::vector<std::uint64_t>{6, 3, 1});
    const auto offsets = mix_offsets(parts);
    std::vector<std::uint64_t> last(3, 0);
    for (const auto g : smooth) {
        const auto [k, i] = mix_locate(offsets, g);
        CHECK(i == last[k]++);  // 0, 1, 2, ... within each dataset
    }
    // Shuffled with the blocks order: each dataset's samples in the order of its own blocks shuffle.
    o.shuffle = true;
    o.kind = order_kind::blocks;
    o.window = 2;
    for (auto& p : parts) p.block = 4;
    const auto mixed = mix_full_order(parts, 5, 0, o);
    std::vector<std::vector<std::uint64_t>> streams(3);
    for (const auto g : mixed) {
        const auto [k, i] = mix_locate(offsets, g);
        streams[k].push_back(i);
    }
    for (std::size_t k = 0; k < 3; ++k) {
        const std::uint64_t dataset_seed = order_random(5, k, 3).next();
        CHECK(streams[k] == block_permutation(parts[k].records, dataset_seed, 0, 4, 2, {}));
    }
}

TEST_CASE("mix: with replacement, uniform draws of the counts, a dataset of no records is refused", "[mix]") {
    auto parts = three(50, 30, 20);
    mix_options o;
    o.replacement = true;
    o.epoch_size = 3000;
    const auto order = mix_full_order(parts, 2, 0, o);
    CHECK(per_dataset(parts, order) == std::vector<std::uint64_t>{1800, 900, 300});
    o.kind = order_kind::blocks;
    CHECK_THROWS_AS(mix_full_order(parts, 2, 0, o), std::invalid_argument);
    parts[1].records = 0;
    CHECK_THROWS_AS(mix_full_order(parts, 2, 0, mix_options{}), std::invalid_argument);
    parts[1].weight = 0;
    CHECK(mix_full_order(parts, 2, 0, mix_options{}).size() == 70);
    CHECK(mix_locate(mix_offsets(parts), 69) == std::pair<std::size_t, std::uint64_t>{2, 19});
    CHECK_THROWS_AS(mix_locate(mix_offsets(parts), 70), std::out_of_range);
}

TEST_CASE("mix: 4 -> 2 -> 3 ranks mid-epoch read every remaining sample exactly once", "[mix]") {
    const std::uint64_t n = 1003;
    order_options blocks;
    blocks.kind = order_kind::blocks;
    blocks.block = 16;
    blocks.window = 4;
    SECTION("global") { check_world_changes(full_order(n, 3, 1, order_options{}), false); }
    SECTION("blocks") { check_world_changes(full_order(n, 3, 1, blocks), true); }
    SECTION("mixed") {
        mix_options o;
        o.epoch_size = n;
        check_world_changes(mix_full_order(three(500, 300, 200), 3, 1, o), false);
        o.kind = order_kind::blocks;
        check_world_changes(mix_full_order(three(500, 300, 200, 16), 3, 1, o), true);
    }
    // No stages: the rank's share of the epoch, as epoch_order gives it.
    CHECK(resumed_order(full_order(n, 3, 1, blocks), {}, 2, 3, false, true) == epoch_order(n, 3, 1, 2, 3, false, blocks));
    CHECK(resumed_order(full_order(n, 3, 1, {}), {}, 1, 4, true, false) == epoch_order(n, 3, 1, 1, 4, true, {}));
    // A stage on the same world equals skipping the position in each share (pads aside).
    const auto mine = epoch_order(n, 3, 1, 1, 4, false, {});
    const auto again = resumed_order(full_order(n, 3, 1, {}), {resume_stage{{9, 9, 9, 9}}}, 1, 4, false, false);
    CHECK(again == std::vector<std::uint64_t>(mine.begin() + 9, mine.end()));
    // drop_last leaves out the tail no rank of a stage reads; a rank cannot have read past its share.
    CHECK(remaining_order(full_order(10, 0, 0, {}), {resume_stage{{0, 0, 0}}}, true, false).size() == 9);
    CHECK_THROWS_AS(remaining_order(full_order(10, 0, 0, {}), {resume_stage{{6, 0}}}, false, false),
                    std::invalid_argument);
}

TEST_CASE("mix: classes are matched by name, a dataset naming a class twice is refused", "[mix]") {
    const auto m = match_classes({{"road", "car", "sky"}, {"sky", "road"}, {"tree", "car"}});
    CHECK(m.names == std::vector<std::string>{"road", "car", "sky", "tree"});
    CHECK(m.ids[0] == std::vector<std::uint32_t>{0, 1, 2});
    CHECK(m.ids[1] == std::vector<std::uint32_t>{2, 0});
    CHECK(m.ids[2] == std::vector<std::uint32_t>{3, 1});
    CHECK_THROWS_WITH(match_classes({{"a"}, {"b", "c", "b"}}), Catch::Contains("dataset 1 names class \"b\" twice"));
}
