// include/shardpack/mix.hpp: weighted mixing of datasets and resuming an epoch on a different
// number of ranks. Per-epoch counts from the weights (largest remainder, within 1 of the exact
// share), equal shares on every rank, draws without replacement across epochs, the merge keeping
// each dataset's stream order, and a 4 -> 2 -> 3 change of world mid-epoch reading every
// remaining sample exactly once (global, blocks and mixed orders). The batched reader of a mix
// (mix_reader.hpp) against each record read from its own dataset: labels renumbered by class
// name, crops to one size, refusals. About a second.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "shardpack/mix.hpp"
#include "shardpack/mix_reader.hpp"
#include "test_support.hpp"

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

// ---- mix_reader.hpp: the batched reader of a mix, against reading each record from its dataset.

namespace {

using namespace shardpack::test;

// One batch's worth of every output, and the sample_buffers over them.
struct batch_out {
    std::vector<std::uint8_t> image_u8, label_u8, index_u8;
    std::vector<float> image_f32, label_f32;
    std::vector<std::uint16_t> index_u16;
    std::vector<std::int64_t> index_i64, class_i64;
    std::vector<std::int32_t> class_id;
    std::vector<crop_box> applied;
    sample_buffers out;
    // Buffers for `count` samples of h x w x channels, with `classes` one-hot planes (segmentation)
    // or `classes` values (classification); `f32`: float images and labels, else uint8.
    batch_out(std::size_t count, std::size_t h, std::size_t w, std::size_t channels, std::size_t classes, bool seg,
              bool f32, bool channels_first) {
        const std::size_t px = h * w, label_n = seg ? px * classes : classes;
        if (f32) {
            image_f32.assign(count * px * channels, -7.0f);
            label_f32.assign(count * label_n, -7.0f);
            out.image_f32 = image_f32.data(), out.image_capacity = image_f32.size();
            out.label_f32 = label_f32.data(), out.label_capacity = label_f32.size();
            out.norm = normalization::imagenet();
        } else {
            image_u8.assign(count * px * channels, 0xEE);
            label_u8.assign(count * label_n, 0xEE);
            out.image_u8 = image_u8.data(), out.image_capacity = image_u8.size();
            out.label_u8 = label_u8.data(), out.label_capacity = label_u8.size();
        }
        if (seg) {
            if (f32) {
                index_i64.assign(count * px, -7);
                index_u8.assign(count * px, 0xEE);
                out.label_index_i64 = index_i64.data(), out.label_index_u8 = index_u8.data();
            } else {
                index_u16.assign(count * px, 0xEEEE);
                out.label_index = index_u16.data();
            }
            out.label_index_capacity = count * px;
        }
        class_id.assign(count, -7);
        class_i64.assign(count, -7);
        out.class_id = class_id.data(), out.class_id_i64 = class_i64.data();
        applied.assign(count, crop_box{});
        out.channels_first = channels_first;
    }
};

// The mix's class id of dataset `d`'s class id `c`, by name (its ignore value: the mix's).
std::uint32_t mixed_id(const mixed_dataset& m, const dataset& d, std::size_t c) {
    if (d.schema().task == task::segmentation && c == d.schema().ignore_value) return m.schema().ignore_value;
    const auto& names = m.class_names();
    const auto it = std::find(names.begin(), names.end(), d.classes().at(c).name);
    REQUIRE(it != names.end());
    return static_cast<std::uint32_t>(it - names.begin());
}

// Checks slot j of `got` (a mixed batch) against record g read alone from its own dataset with
// the same options (crops and flips drawn with seed + k), its labels renumbered by class name.
void check_slot(const mixed_dataset& m, std::size_t g, std::size_t j, const batch_out& got, std::size_t count,
                const augmentation* aug) {
    const auto [k, r] = m.locate(g);
    INFO("slot " << j << ": dataset " << k << " record " << r);
    const dataset& d = m.datasets()[k];
    const bool seg = d.schema().task == task::segmentation, f32 = !got.image_f32.empty();
    const std::size_t mix_k = m.schema().class_count, own_k = d.schema().class_count;
    const std::size_t px = got.out.label_index_capacity / (seg ? count : 1);
    const std::size_t image_n = (f32 ? got.image_f32.size() : got.image_u8.size()) / count;
    batch_out want(1, seg ? px : 0, seg ? 1 : 0, 0, own_k, seg, f32, got.out.channels_first);
    want.out.applied = want.applied.data();
    // The image buffers of one sample (want's were sized for labels only: px x 1 pixels, no channels).
    std::vector<std::uint8_t> image_u8(image_n);
    std::vector<float> image_f32(image_n);
    if (f32) want.out.image_f32 = image_f32.data(); else want.out.image_u8 = image_u8.data();
    want.out.image_capacity = image_n;
    augmentation own;
    if (aug) {
        own = *aug;
        own.seed = aug->seed + k;
        want.out.augment = &own;
    }
    read_context ctx;
    d.read_into(static_cast<std::size_t>(r), want.out, ctx);
    if (f32) {
        CHECK(std::equal(image_f32.begin(), image_f32.end(), got.image_f32.begin() + static_cast<std::ptrdiff_t>(j * image_n)));
    } else {
        CHECK(std::equal(image_u8.begin(), image_u8.end(), got.image_u8.begin() + static_cast<std::ptrdiff_t>(j * image_n)));
    }
    if (aug) CHECK(std::tie(want.applied[0].y, want.applied[0].x, want.applied[0].height, want.applied[0].hflip,
                            want.applied[0].vflip) == std::tie(got.applied[j].y, got.applied[j].x, got.applied[j].height,
                                                               got.applied[j].hflip, got.applied[j].vflip));
    if (!seg) {
        const std::uint32_t id = mixed_id(m, d, static_cast<std::size_t>(want.class_id[0]));
        CHECK(got.class_id[j] == static_cast<std::int32_t>(id));
        CHECK(got.class_i64[j] == id);
        for (std::size_t c = 0; c < mix_k; ++c) {
            if (f32) CHECK(got.label_f32[j * mix_k + c] == (c == id ? 1.0f : 0.0f));
            else CHECK(got.label_u8[j * mix_k + c] == (c == id ? 1 : 0));
        }
        return;
    }
    CHECK(got.class_id[j] == -1);
    std::size_t planes_checked = 0;
    for (std::size_t p = 0; p < px; ++p) {
        if (f32) {
            const std::uint32_t v = mixed_id(m, d, static_cast<std::size_t>(want.index_i64[p]));
            CHECK(got.index_i64[j * px + p] == v);
            CHECK(got.index_u8[j * px + p] == v);
        } else {
            CHECK(got.index_u16[j * px + p] == mixed_id(m, d, want.index_u16[p]));
        }
        // One-hot: the mix's plane of each of the dataset's classes holds that class's plane; the others 0.
        std::vector<int> expected(mix_k, 0);
        for (std::size_t c = 0; c < own_k; ++c) {
            const std::size_t at = got.out.channels_first ? c * px + p : p * own_k + c;
            expected[mixed_id(m, d, c)] = f32 ? int(want.label_f32[at]) : int(want.label_u8[at]);
        }
        for (std::size_t c = 0; c < mix_k; ++c) {
            const std::size_t at = j * px * mix_k + (got.out.channels_first ? c * px + p : p * mix_k + c);
            if (f32) CHECK(got.label_f32[at] == float(expected[c]));
            else CHECK(int(got.label_u8[at]) == expected[c]);
            ++planes_checked;
        }
    }
    CHECK(planes_checked == px * mix_k);
}

// Reads rank `rank` of 4's share of epoch `epoch` in batches of 4 and checks every slot.
// Returns how many samples came from each dataset.
std::vector<std::uint64_t> read_share(const mixed_dataset& m, std::size_t rank, std::uint64_t epoch, bool f32,
                                      bool channels_first, const augmentation* aug) {
    const auto mine = m.epoch_order(5, epoch, rank, 4, false);
    const bool seg = m.schema().task == task::segmentation;
    const std::size_t h = aug ? aug->height : m.schema().fixed_height, w = aug ? aug->width : m.schema().fixed_width;
    mix_read_context ctx;
    std::vector<std::uint64_t> counts(m.datasets().size(), 0);
    for (std::size_t s = 0; s < mine.size(); s += 4) {
        const std::size_t count = std::min<std::size_t>(4, mine.size() - s);
        std::vector<std::size_t> batch(mine.begin() + static_cast<std::ptrdiff_t>(s),
                                       mine.begin() + static_cast<std::ptrdiff_t>(s + count));
        batch_out got(count, h, w, m.schema().channels, m.schema().class_count, seg, f32, channels_first);
        got.out.augment = aug;
        got.out.applied = got.applied.data();
        m.read_batch(batch.data(), count, got.out, ctx);
        for (std::size_t j = 0; j < count; ++j) {
            check_slot(m, batch[j], j, got, count, aug);
            ++counts[m.locate(batch[j]).first];
        }
    }
    return counts;
}

}  // namespace

TEST_CASE("mix reader: batches of a 0.6/0.3/0.1 mix equal each record read from its dataset", "[mix]") {
    temp_dir dir("mix-reader");
    synthetic_options o;
    o.records = 20;  // a: one-hot, zstd bands, 4 classes, several shards
    o.shard_size = 4096;
    write_synthetic(dir / "a", o);
    o.records = 12;  // b: index labels, the classes in reverse order, one frame per record
    o.layout = detail::layout_code::index;
    o.codec = record_codec::zstd_record;
    o.class_names = {"class3", "class2", "class1", "class0"};
    write_synthetic(dir / "b", o);
    o.records = 8;  // c: raw, one class more (the mix's classes in its order: read with no renumbering)
    o.layout = detail::layout_code::one_hot;
    o.codec = record_codec::none;
    o.classes = 5;
    o.class_names = {"class0", "class1", "class2", "class3", "zzz"};
    write_synthetic(dir / "c", o);
    mix_options mo;
    mo.epoch_size = 40;
    const auto m = mixed_dataset::open({dir / "a", dir / "b", dir / "c"}, {0.6, 0.3, 0.1}, mo);
    REQUIRE(m.datasets()[0].shard_count() > 1);
    CHECK(m.counts() == std::vector<std::uint64_t>{24, 12, 4});
    CHECK(m.class_names() == std::vector<std::string>{"class0", "class1", "class2", "class3", "zzz"});
    CHECK(m.class_ids(1) == std::vector<std::uint32_t>{3, 2, 1, 0});
    CHECK(m.schema().fixed_height == 12);
    CHECK(m.schema().class_count == 5);
    CHECK(m.size() == 40);
    for (std::size_t k = 0; k < 3; ++k) {  // blocks of about 4 MiB of each dataset's bytes, as Python's mix
        std::uint64_t bytes = 0;
        for (std::size_t s = 0; s < m.datasets()[k].shard_count(); ++s) bytes += m.datasets()[k].shard_bytes(s);
        const double exact = double(4 << 20) * double(m.datasets()[k].size()) / double(bytes);
        CHECK(m.sources()[k].block == static_cast<std::size_t>(std::nearbyint(exact)));
        CHECK(m.sources()[k].block > m.datasets()[k].size());  // these small datasets: one block each
    }
    augmentation aug;
    aug.height = 8, aug.width = 10;
    aug.position = crop_position::random;
    aug.hflip = flip_mode::random, aug.vflip = flip_mode::random;
    aug.seed = ~std::uint64_t(0);  // seed + k wraps
    aug.epoch = 1;
    for (const auto& [f32, channels_first, cropped] : {std::tuple{false, false, false}, std::tuple{true, true, false},
                                                       std::tuple{false, true, true}, std::tuple{true, false, true}}) {
        INFO("f32 " << f32 << " channels_first " << channels_first << " cropped " << cropped);
        std::vector<std::uint64_t> total(3, 0);
        for (std::size_t rank = 0; rank < 4; ++rank) {
            const auto counts = read_share(m, rank, 1, f32, channels_first, cropped ? &aug : nullptr);
            CHECK(counts[0] + counts[1] + counts[2] == 10);  // equal shares
            for (std::size_t k = 0; k < 3; ++k) total[k] += counts[k];
        }
        CHECK(total == std::vector<std::uint64_t>{24, 12, 4});  // the epoch's counts, as read
    }
    // read_into: one mixed record, as read_batch's slot 0.
    mix_read_context ctx;
    batch_out one(1, 12, 16, 3, 5, true, false, false);
    m.read_into(20 + 3, one.out, ctx);  // b's record 3
    check_slot(m, 23, 0, one, 1, nullptr);
    // A larger buffer than the batch: samples still one after the other, as dataset::read_batch lays them.
    batch_out roomy(3, 12, 16, 3, 5, true, false, false);
    const std::vector<std::size_t> idx{0, 25, 39};
    m.read_batch(idx.data(), 2, roomy.out, ctx);
    for (std::size_t j = 0; j < 2; ++j) check_slot(m, idx[j], j, roomy, 3, nullptr);
    // Too small a buffer is refused, not overrun.
    batch_out small(1, 12, 16, 3, 5, true, false, false);
    CHECK_THROWS_WITH(m.read_batch(idx.data(), 2, small.out, ctx), Catch::Contains("buffer holds"));
    CHECK_THROWS_WITH(m.read_batch(std::vector<std::size_t>{40}.data(), 1, one.out, ctx),
                      Catch::Contains("index 40 is out of range"));
}

TEST_CASE("mix reader: datasets of different sizes are cropped to one, and refused without a crop", "[mix]") {
    temp_dir dir("mix-reader-sizes");
    synthetic_options o;
    o.records = 6;
    write_synthetic(dir / "small", o);  // 16 x 12
    o.width = 20, o.height = 14, o.layout = detail::layout_code::index;
    write_synthetic(dir / "large", o);
    const auto m = mixed_dataset::open({dir / "small", dir / "large"}, {1, 1});
    CHECK(m.schema().fixed_height == 0);
    mix_read_context ctx;
    batch_out whole(2, 12, 16, 3, 4, true, false, false);
    const std::vector<std::size_t> idx{0, 7};
    CHECK_THROWS_WITH(m.read_batch(idx.data(), 2, whole.out, ctx),
                      Catch::Contains("not all of one size") && Catch::Contains("small: 16x12") &&
                          Catch::Contains("large: 20x14") && Catch::Contains("crop"));
    CHECK_THROWS_WITH(m.read_batch(idx.data(), 1, whole.out, ctx), Catch::Contains("not all of one size"));
    // With a crop: every sample its record's window, as its own dataset draws it (seed + k).
    for (const crop_position position : {crop_position::center, crop_position::random, crop_position::foreground}) {
        augmentation aug;
        aug.height = 10, aug.width = 12;
        aug.position = position;
        aug.hflip = flip_mode::random;
        aug.seed = 3;
        std::vector<std::uint64_t> counts(2, 0);
        for (std::size_t rank = 0; rank < 4; ++rank) {
            const auto c = read_share(m, rank, 0, false, false, &aug);
            counts[0] += c[0], counts[1] += c[1];
        }
        CHECK(counts == std::vector<std::uint64_t>{6, 6});
    }
    // Given windows, per slot of the batch.
    augmentation given;
    given.height = 10, given.width = 12;
    given.position = crop_position::given;
    given.hflip = flip_mode::given;
    const crop_box boxes[2] = {{1, 2, 10, 12, true, false, false}, {4, 8, 10, 12, false, false, false}};
    given.given = boxes;
    batch_out got(2, 10, 12, 3, 4, true, false, false);
    got.out.augment = &given;
    got.out.applied = got.applied.data();
    m.read_batch(idx.data(), 2, got.out, ctx);
    CHECK((got.applied[1].y == 4 && got.applied[1].x == 8 && !got.applied[1].hflip));
    for (std::size_t j = 0; j < 2; ++j) {
        // check_slot's own read looks given up at slot 0: give it that slot's box there.
        augmentation alone = given;
        alone.given = &boxes[j];
        check_slot(m, idx[j], j, got, 2, &alone);
    }
    // A crop larger than the small dataset's records: refused by its read, naming it.
    augmentation big;
    big.height = 13, big.width = 12;
    batch_out large(2, 13, 12, 3, 4, true, false, false);
    large.out.augment = &big;
    CHECK_THROWS_WITH(m.read_batch(idx.data(), 2, large.out, ctx), Catch::Contains("small"));
}

TEST_CASE("mix reader: classification ids and one-hot labels in the mix's classes", "[mix]") {
    temp_dir dir("mix-reader-cls");
    synthetic_options o;
    o.segmentation = false;
    o.records = 9;
    o.classes = 3;
    o.class_names = {"cat", "dog", "fox"};
    write_synthetic(dir / "pets", o);
    o.classes = 2;
    o.class_names = {"fox", "cow"};
    write_synthetic(dir / "farm", o);
    mix_options mo;
    mo.epoch_size = 20;
    const auto m = mixed_dataset::open({dir / "pets", dir / "farm"}, {0.5, 0.5}, mo);
    CHECK(m.class_names() == std::vector<std::string>{"cat", "dog", "fox", "cow"});
    for (const bool f32 : {false, true}) {
        std::vector<std::uint64_t> counts(2, 0);
        for (std::size_t rank = 0; rank < 4; ++rank) {
            const auto c = read_share(m, rank, 2, f32, false, nullptr);
            counts[0] += c[0], counts[1] += c[1];
        }
        CHECK(counts == std::vector<std::uint64_t>{10, 10});
    }
    mix_read_context ctx;
    batch_out seg_like(1, 12, 16, 3, 4, true, false, false);
    const std::size_t farm_record = 9;
    CHECK_THROWS_WITH(m.read_into(farm_record, seg_like.out, ctx), Catch::Contains("label_index is for segmentation"));
}

TEST_CASE("mix reader: mixes that cannot be read as one are refused clearly", "[mix]") {
    temp_dir dir("mix-reader-refusals");
    synthetic_options o;
    o.records = 3;
    write_synthetic(dir / "seg", o);
    o.channels = 1;
    write_synthetic(dir / "gray", o);
    o.channels = 3, o.segmentation = false;
    write_synthetic(dir / "cls", o);
    o.segmentation = true, o.class_names = {"a", "b", "a", "c"};
    write_synthetic(dir / "twice", o);
    CHECK_THROWS_WITH(mixed_dataset::open({dir / "seg", dir / "cls"}), Catch::Contains("another task"));
    CHECK_THROWS_WITH(mixed_dataset::open({dir / "seg", dir / "gray"}),
                      Catch::Contains("different channel counts") && Catch::Contains("gray: 1"));
    CHECK_THROWS_WITH(mixed_dataset::open({dir / "seg", dir / "twice"}),
                      Catch::Contains(dir / "twice" + " names class \"a\" twice"));
    CHECK_THROWS_WITH(mixed_dataset::open({dir / "seg", dir / "seg"}, {1}), Catch::Contains("1 weights for 2 datasets"));
    CHECK_THROWS_AS(mixed_dataset::open({dir / "seg", dir / "seg"}, {0, 0}), std::invalid_argument);
    CHECK_THROWS_AS(mixed_dataset(std::vector<dataset>{}), std::invalid_argument);
    const auto m = mixed_dataset::open({dir / "seg", dir / "seg"});
    CHECK(m.counts() == std::vector<std::uint64_t>{3, 3});  // no weights: the sizes
    mix_read_context ctx;
    batch_out got(1, 12, 16, 3, 4, true, false, false);
    field_batch fields;
    got.out.fields = &fields;
    CHECK_THROWS_WITH(m.read_into(0, got.out, ctx), Catch::Contains("per-sample fields"));
}

TEST_CASE("mix reader: ignored pixels take the mix's ignore value, records of several sizes read alone", "[mix]") {
    temp_dir dir("mix-reader-ignore");
    synthetic_options o;
    o.records = 6;
    o.ignore_every = 5;  // one-hot: all-zero pixels, read as index 255
    write_synthetic(dir / "few", o);
    o.classes = 300;  // index labels of uint16, ignore value 65535
    o.layout = detail::layout_code::index;
    o.ignore_every = 3;
    write_synthetic(dir / "many", o);
    const auto m = mixed_dataset::open({dir / "few", dir / "many"}, {1, 2});
    REQUIRE(m.schema().class_count == 300);
    CHECK(m.schema().ignore_value == 65535);  // more than 255 classes
    for (const bool channels_first : {false, true}) {
        std::vector<std::uint64_t> counts(2, 0);
        for (std::size_t rank = 0; rank < 4; ++rank) {
            const auto c = read_share(m, rank, 0, false, channels_first, nullptr);
            counts[0] += c[0], counts[1] += c[1];
        }
        CHECK(counts == std::vector<std::uint64_t>{4, 8});  // 1:2 of 12
    }
    mix_read_context ctx;
    batch_out got(1, 12, 16, 3, 300, true, true, false);
    CHECK_THROWS_WITH(m.read_into(0, got.out, ctx), Catch::Contains("uint8 label indices need at most 255 classes"));
    got.out.label_index_u8 = nullptr;
    m.read_into(0, got.out, ctx);
    CHECK(got.index_i64[0] == 65535);  // pixel 0 of "few" is ignored: 255 there, 65535 in the mix

    // A dataset of records of two sizes, its classes in reverse order: read_into gives a record at
    // its own size, renumbered.
    synthetic_options v;
    v.records = 4;
    v.varied_sizes = true;
    v.layout = detail::layout_code::index;
    v.class_names = {"class3", "class2", "class1", "class0"};
    write_synthetic(dir / "varied", v);
    const auto two = mixed_dataset::open({dir / "few", dir / "varied"});
    CHECK(two.schema().fixed_height == 0);
    const dataset& varied = two.datasets()[1];
    for (std::size_t r = 0; r < 4; ++r) {
        INFO("record " << r);
        const sample s = varied.at(r);
        const std::size_t px = s.height() * s.width();
        CHECK(px == (r % 2 ? 20u * 14u : 16u * 12u));
        std::vector<std::uint16_t> mixed(20 * 14 + 1, 0xEEEE), alone(20 * 14 + 1, 0xEEEE);
        std::vector<std::uint8_t> one_hot(20 * 14 * 4, 0xEE);
        sample_buffers out;
        out.label_index = mixed.data(), out.label_index_capacity = mixed.size();
        out.label_u8 = one_hot.data(), out.label_capacity = one_hot.size();
        crop_box untouched{7, 7, 7, 7, true, true, true};
        out.applied = &untouched;
        two.read_into(6 + r, out, ctx);
        CHECK(untouched.y == 7);  // no augmentation: applied is left alone, as dataset::read_into leaves it
        sample_buffers own;
        own.label_index = alone.data(), own.label_index_capacity = alone.size();
        varied.read_into(r, own, ctx.reader);
        for (std::size_t p = 0; p < px; ++p) {
            CHECK(mixed[p] == 3 - alone[p]);  // class j of "varied" is class 3 - j of the mix
            for (std::size_t c = 0; c < 4; ++c) CHECK(int(one_hot[p * 4 + c]) == int(c == mixed[p]));
        }
        CHECK(mixed[px] == 0xEEEE);  // nothing past the record
    }
    std::vector<std::uint16_t> ids(2 * 20 * 14);
    sample_buffers out;
    out.label_index = ids.data(), out.label_index_capacity = ids.size();
    const std::vector<std::size_t> idx{6, 7};
    CHECK_THROWS_WITH(two.read_batch(idx.data(), 2, out, ctx), Catch::Contains("records of several sizes"));
}
