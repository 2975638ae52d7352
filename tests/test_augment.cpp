// Crops and flips at read time: every output equals the slice (and flip) of the full record at
// the box the reader reports, for every stored codec, label layout and output layout; random
// boxes depend on (seed, epoch, index) alone and cover every valid offset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <thread>
#include <tuple>

#include "pipeline/option_names.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

// The window of an H x W x C interleaved array at box b, flipped, interleaved or planar: written
// out pixel by pixel, independently of the reader's row copies.
template <class T, class S>
std::vector<T> expected_window(const S* full, std::size_t width, std::size_t channels, const crop_box& b, bool planar) {
    std::vector<T> out(std::size_t(b.height) * b.width * channels);
    const std::size_t px = std::size_t(b.height) * b.width;
    for (std::size_t oy = 0; oy < b.height; ++oy)
        for (std::size_t ox = 0; ox < b.width; ++ox) {
            const std::size_t sy = b.vflip ? b.y + b.height - 1 - oy : b.y + oy;
            const std::size_t sx = b.hflip ? b.x + b.width - 1 - ox : b.x + ox;
            for (std::size_t c = 0; c < channels; ++c) {
                const T v = T(full[(sy * width + sx) * channels + c]);
                if (planar) out[c * px + oy * b.width + ox] = v;
                else out[(oy * b.width + ox) * channels + c] = v;
            }
        }
    return out;
}

}  // namespace

TEST_CASE("crops and flips equal the slice and flip of the full record at the reported box", "[augment]") {
    for (auto layout : {detail::layout_code::one_hot, detail::layout_code::index}) {
        for (auto codec : {record_codec::zstd, record_codec::zstd_record, record_codec::none}) {
            temp_dir dir("aug");
            synthetic_options o;
            o.layout = layout;
            o.codec = codec;
            o.band_rows = 5;  // 12 rows: bands 0-4, 5-9, 10-11, so windows start and end inside bands
            o.records = 6;
            write_synthetic(dir.str(), o);
            auto ds = dataset::open(dir.str());
            for (bool planar : {false, true}) {
                INFO("layout " << int(layout) << ", codec " << word_of(compression_words, codec) << ", channels first " << planar);
                augmentation a;
                a.height = 7;
                a.width = 9;
                a.position = crop_position::random;
                a.hflip = flip_mode::random;
                a.vflip = flip_mode::random;
                a.seed = 11;
                a.epoch = 3;
                const std::size_t n = 7 * 9;
                std::vector<std::uint8_t> image(n * 3), label(n * 4);
                std::vector<float> image_f(n * 3);
                std::vector<std::uint16_t> index(n);
                std::vector<std::int64_t> index64(n);
                crop_box got;
                sample_buffers out;
                out.image_u8 = image.data();
                out.image_capacity = image.size();
                out.label_u8 = label.data();
                out.label_capacity = label.size();
                out.label_index = index.data();
                out.label_index_i64 = index64.data();
                out.label_index_capacity = n;
                out.channels_first = planar;
                out.augment = &a;
                out.applied = &got;
                sample_buffers out_f;  // float image alone (the image_u8-free path)
                out_f.image_f32 = image_f.data();
                out_f.image_capacity = image_f.size();
                out_f.channels_first = planar;
                out_f.augment = &a;
                read_context ctx;
                std::set<std::pair<bool, bool>> flips_seen;
                for (std::size_t i = 0; i < ds.size(); ++i) {
                    ds.read_into(i, out, ctx);
                    const crop_box want = plan_augmentation(a, i, 12, 16);
                    REQUIRE(got.y == want.y);
                    REQUIRE(got.x == want.x);
                    REQUIRE(got.hflip == want.hflip);
                    REQUIRE(got.vflip == want.vflip);
                    REQUIRE(got.height == 7);
                    REQUIRE(got.width == 9);
                    flips_seen.insert({got.hflip, got.vflip});
                    const auto full = ds.at(i);
                    REQUIRE(image == expected_window<std::uint8_t>(full.image().data(), 16, 3, got, planar));
                    const auto hot = full.one_hot();
                    REQUIRE(label == expected_window<std::uint8_t>(hot.data(), 16, 4, got, planar));
                    // Index maps: the class of each window pixel (never interpolated).
                    std::vector<std::uint16_t> ids(12 * 16);
                    for (std::size_t p = 0; p < ids.size(); ++p) {
                        ids[p] = 255;
                        for (std::uint16_t c = 0; c < 4; ++c)
                            if (hot[p * 4 + c]) ids[p] = c;
                    }
                    REQUIRE(index == expected_window<std::uint16_t>(ids.data(), 16, 1, got, false));
                    REQUIRE(std::vector<std::int64_t>(index.begin(), index.end()) == index64);
                    ds.read_into(i, out_f, ctx);
                    const auto scaled = expected_window<float>(full.image().data(), 16, 3, got, planar);
                    for (std::size_t j = 0; j < scaled.size(); ++j) REQUIRE(image_f[j] == scaled[j] / 255.0f);
                }
                REQUIRE(flips_seen.size() >= 2);  // the flips were exercised, not always off
            }
        }
    }
}

TEST_CASE("given boxes and flips are applied as given, impossible ones are refused", "[augment]") {
    temp_dir dir("given");
    synthetic_options o;
    o.records = 3;
    write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    const crop_box given[3] = {{0, 0, 0, 0, false, false}, {5, 7, 0, 0, true, false}, {2, 3, 0, 0, true, true}};
    augmentation a;
    a.height = 7;
    a.width = 9;
    a.position = crop_position::given;
    a.hflip = flip_mode::given;
    a.vflip = flip_mode::given;
    a.given = given;
    std::vector<std::uint8_t> image(3 * 7 * 9 * 3);
    crop_box applied[3];
    sample_buffers out;
    out.image_u8 = image.data();
    out.image_capacity = image.size();
    out.augment = &a;
    out.applied = applied;
    read_context ctx;
    const std::size_t order[3] = {2, 0, 1};
    ds.read_batch(order, 3, out, ctx);
    for (std::size_t j = 0; j < 3; ++j) {
        REQUIRE(applied[j].y == given[j].y);
        REQUIRE(applied[j].x == given[j].x);
        REQUIRE(applied[j].hflip == given[j].hflip);
        REQUIRE(applied[j].vflip == given[j].vflip);
        const auto full = ds.at(order[j]);
        const auto want = expected_window<std::uint8_t>(full.image().data(), 16, 3, applied[j], false);
        REQUIRE(std::equal(want.begin(), want.end(), image.begin() + std::ptrdiff_t(j * want.size())));
    }
    crop_box past[1] = {{6, 0, 0, 0, false, false}};  // 6 + 7 > 12 rows
    a.given = past;
    REQUIRE_THROWS_WITH(ds.read_into(0, out, ctx), Catch::Contains("runs past record 0"));
    a.given = nullptr;
    REQUIRE_THROWS_WITH(ds.read_into(0, out, ctx), Catch::Contains("need augmentation::given"));
    augmentation big;
    big.height = 13;
    big.width = 4;
    out.augment = &big;
    REQUIRE_THROWS_WITH(ds.read_into(1, out, ctx), Catch::Contains("crop 4x13 is larger than record 1 (16x12)"));
    // Flips alone (no crop size): the whole record, mirrored.
    augmentation flip_only;
    flip_only.hflip = flip_mode::random;
    flip_only.hflip_probability = 1.0f;
    std::vector<std::uint8_t> whole(12 * 16 * 3);
    crop_box got;
    sample_buffers all;
    all.image_u8 = whole.data();
    all.image_capacity = whole.size();
    all.augment = &flip_only;
    all.applied = &got;
    ds.read_into(2, all, ctx);
    REQUIRE(got.hflip);
    REQUIRE(!got.vflip);
    const auto full = ds.at(2);
    REQUIRE(whole == expected_window<std::uint8_t>(full.image().data(), 16, 3, {0, 0, 12, 16, true, false}, false));
}

TEST_CASE("a batch read in slices equals the batch read whole, given boxes and applied ones included", "[augment]") {
    // sample_buffers::slice, as the Python binding splits a batch among threads: each slice's
    // pointers, capacities, applied boxes and given-box slots move on by its first sample.
    temp_dir dir("slices");
    synthetic_options o;
    o.records = 7;
    o.band_rows = 4;
    write_synthetic(dir.str(), o);
    for (const bool classification : {false, true}) {
        if (classification) {
            o.segmentation = false;
            write_synthetic(dir.str() + "/cls", o);
        }
        auto ds = dataset::open(classification ? dir.str() + "/cls" : dir.str());
        const std::size_t n = 7, h = 5, w = 6, c = 3, k = o.classes;
        std::vector<crop_box> given(n);
        for (std::size_t j = 0; j < n; ++j) given[j] = {std::uint32_t(j % 8), std::uint32_t((3 * j) % 11), 0, 0, j % 2 == 1, j % 3 == 0};
        augmentation a;
        a.height = h;
        a.width = w;
        a.position = crop_position::given;
        a.hflip = flip_mode::given;
        a.vflip = flip_mode::given;
        a.given = given.data();
        const std::size_t label_n = classification ? k : h * w * k;
        auto read = [&](const std::vector<std::size_t>& cuts) {
            std::vector<float> image(n * h * w * c, -1.0f);
            std::vector<std::uint8_t> label(n * label_n, 7);
            std::vector<std::int64_t> class_ids(n, -2);
            std::vector<crop_box> applied(n);
            sample_buffers all;
            all.image_f32 = image.data();
            all.image_capacity = image.size();
            all.label_u8 = label.data();
            all.label_capacity = label.size();
            all.class_id_i64 = class_ids.data();
            all.channels_first = true;
            all.augment = &a;
            all.applied = applied.data();
            const std::size_t order[n] = {6, 2, 0, 5, 1, 4, 3};
            read_context ctx;
            for (std::size_t p = 0; p + 1 < cuts.size(); ++p) {
                const std::size_t begin = cuts[p], count = cuts[p + 1] - cuts[p];
                ds.read_batch(order + begin, count, all.slice(begin, count, n), ctx);
            }
            return std::make_tuple(image, label, class_ids, applied);
        };
        const auto whole = read({0, n});
        const auto sliced = read({0, 2, 3, 3, n});  // an empty slice too
        REQUIRE(std::get<0>(sliced) == std::get<0>(whole));
        REQUIRE(std::get<1>(sliced) == std::get<1>(whole));
        REQUIRE(std::get<2>(sliced) == std::get<2>(whole));
        for (std::size_t j = 0; j < n; ++j) {
            const crop_box& got = std::get<3>(sliced)[j];
            REQUIRE(got.y == given[j].y);
            REQUIRE(got.x == given[j].x);
            REQUIRE(got.hflip == given[j].hflip);
            REQUIRE(got.vflip == given[j].vflip);
        }
        // Every slot was written: no sentinel left.
        REQUIRE(std::count(std::get<0>(whole).begin(), std::get<0>(whole).end(), -1.0f) == 0);
        REQUIRE(std::count(std::get<1>(whole).begin(), std::get<1>(whole).end(), std::uint8_t(7)) == 0);
        REQUIRE(std::count(std::get<2>(whole).begin(), std::get<2>(whole).end(), std::int64_t(-2)) == 0);
        // A slice's capacity is its own samples': a read of one sample more is refused.
        const std::size_t three[3] = {0, 1, 2};
        read_context ctx;
        std::vector<float> image(n * h * w * c);
        std::vector<std::uint8_t> label(n * label_n);
        sample_buffers all;
        all.image_f32 = image.data();
        all.image_capacity = image.size();
        all.label_u8 = label.data();
        all.label_capacity = label.size();
        all.augment = &a;
        REQUIRE_THROWS(ds.read_batch(three, 3, all.slice(4, 2, n), ctx));
    }
}

TEST_CASE("random boxes depend on seed, epoch and index alone, for any thread count and order", "[augment]") {
    temp_dir dir("det");
    synthetic_options o;
    o.records = 40;
    o.band_rows = 4;
    write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    augmentation a;
    a.height = 5;
    a.width = 6;
    a.position = crop_position::random;
    a.hflip = flip_mode::random;
    a.vflip = flip_mode::random;
    a.seed = 99;
    a.epoch = 1;
    auto read_all = [&](unsigned threads, bool reversed) {
        std::vector<crop_box> boxes(ds.size());
        std::vector<std::vector<std::uint8_t>> images(ds.size(), std::vector<std::uint8_t>(5 * 6 * 3));
        std::vector<std::thread> pool;
        for (unsigned t = 0; t < threads; ++t)
            pool.emplace_back([&, t] {
                read_context ctx;
                for (std::size_t j = t; j < ds.size(); j += threads) {
                    const std::size_t i = reversed ? ds.size() - 1 - j : j;
                    sample_buffers out;
                    out.image_u8 = images[i].data();
                    out.image_capacity = images[i].size();
                    out.augment = &a;
                    out.applied = &boxes[i];
                    ds.read_into(i, out, ctx);
                }
            });
        for (auto& th : pool) th.join();
        return std::make_pair(boxes, images);
    };
    const auto one = read_all(1, false);
    const auto three = read_all(3, true);
    for (std::size_t i = 0; i < ds.size(); ++i) {
        REQUIRE(one.first[i].y == three.first[i].y);
        REQUIRE(one.first[i].x == three.first[i].x);
        REQUIRE(one.first[i].hflip == three.first[i].hflip);
        REQUIRE(one.first[i].vflip == three.first[i].vflip);
        REQUIRE(one.second[i] == three.second[i]);
    }
    // Another epoch draws other boxes.
    a.epoch = 2;
    const auto next = read_all(2, false);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < ds.size(); ++i)
        differ += next.first[i].y != one.first[i].y || next.first[i].x != one.first[i].x;
    REQUIRE(differ > ds.size() / 2);
}

TEST_CASE("random boxes cover every valid offset and flips follow their probability", "[augment]") {
    augmentation a;
    a.height = 512;
    a.width = 500;
    a.position = crop_position::random;
    a.hflip = flip_mode::random;
    a.vflip = flip_mode::random;
    a.hflip_probability = 0.25f;
    a.vflip_probability = 0.0f;
    std::set<std::uint32_t> ys, xs;
    std::size_t h = 0;
    const std::size_t draws = 20000;
    for (std::size_t i = 0; i < draws; ++i) {
        const crop_box b = plan_augmentation(a, i, 540, 520);  // 29 rows and 21 columns of offsets
        REQUIRE(b.y + b.height <= 540);
        REQUIRE(b.x + b.width <= 520);
        ys.insert(b.y);
        xs.insert(b.x);
        h += b.hflip;
        REQUIRE(!b.vflip);
    }
    REQUIRE(ys.size() == 29);
    REQUIRE(*ys.rbegin() == 28);
    REQUIRE(xs.size() == 21);
    REQUIRE(*xs.rbegin() == 20);
    REQUIRE(h > draws * 0.22);
    REQUIRE(h < draws * 0.28);
    a.vflip_probability = 1.0f;
    REQUIRE(plan_augmentation(a, 7, 540, 520).vflip);
    // Centre crops: the build's --crop center offsets.
    a.position = crop_position::center;
    const crop_box c = plan_augmentation(a, 7, 541, 520);
    REQUIRE(c.y == 14);
    REQUIRE(c.x == 10);
}

// A mirrored row copy reverses the order of the pixels and keeps each pixel's bytes, for every
// pixel size (the sizes up to 16 take a copy of a size fixed at compile time, the others one of
// a size known at run time) and row length, and writes nothing past the row. About 0.01 s.
TEST_CASE("mirrored row copies reverse the pixels of every size and keep their bytes", "[augment]") {
    for (std::size_t bytes = 1; bytes <= 20; ++bytes)
        for (std::size_t count : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(17)}) {
            std::vector<unsigned char> src(count * bytes), got(count * bytes + 1, 0xEE), want(count * bytes + 1, 0xEE);
            for (std::size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 7 + bytes);
            for (std::size_t p = 0; p < count; ++p)
                for (std::size_t b = 0; b < bytes; ++b) want[p * bytes + b] = src[(count - 1 - p) * bytes + b];
            detail::copy_mirrored(got.data(), src.data(), count, bytes);
            INFO("pixel bytes " << bytes << ", pixels " << count);
            REQUIRE(got == want);  // the last byte (0xEE) is past the row: untouched
        }
}
