// The reader's output layouts: channels-first (NCHW) images and one-hot labels must be exactly
// the channels-last (NHWC) result transposed, and the int64 index and class-id outputs exactly
// the uint16 / int32 ones widened.
#include <catch2/catch.hpp>

#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

// [batch][pixel][channel] -> [batch][channel][pixel]
template <class T>
std::vector<T> to_channels_first(const std::vector<T>& hwc, std::size_t batch, std::size_t pixels, std::size_t ch) {
    std::vector<T> chw(hwc.size());
    for (std::size_t b = 0; b < batch; ++b)
        for (std::size_t p = 0; p < pixels; ++p)
            for (std::size_t c = 0; c < ch; ++c)
                chw[(b * ch + c) * pixels + p] = hwc[(b * pixels + p) * ch + c];
    return chw;
}

struct batch_result {
    std::vector<std::uint8_t> image_u8, label_u8;
    std::vector<float> image_f32, label_f32;
    std::vector<std::uint16_t> index;
    std::vector<std::int64_t> index_i64, class_i64;
    std::vector<std::int32_t> class_i32;
};

batch_result read_all(const dataset& ds, const std::vector<std::size_t>& which, bool channels_first, bool seg) {
    const auto& sc = ds.schema();
    const std::size_t pixels = sc.fixed_height * sc.fixed_width, n = which.size();
    const std::size_t label_n = seg ? pixels * sc.class_count : sc.class_count;
    batch_result r;
    r.image_u8.resize(n * pixels * sc.channels);
    r.image_f32.resize(r.image_u8.size());
    r.label_u8.resize(n * label_n);
    r.label_f32.resize(r.label_u8.size());
    r.class_i32.resize(n);
    r.class_i64.resize(n);
    sample_buffers out;
    out.channels_first = channels_first;
    out.image_u8 = r.image_u8.data();
    out.image_f32 = r.image_f32.data();
    out.image_capacity = r.image_u8.size();
    out.norm = normalization::imagenet();
    out.label_u8 = r.label_u8.data();
    out.label_f32 = r.label_f32.data();
    out.label_capacity = r.label_u8.size();
    out.class_id = r.class_i32.data();
    out.class_id_i64 = r.class_i64.data();
    if (seg) {
        r.index.resize(n * pixels);
        r.index_i64.resize(n * pixels);
        out.label_index = r.index.data();
        out.label_index_i64 = r.index_i64.data();
        out.label_index_capacity = r.index.size();
    }
    read_context ctx;
    ds.read_batch(which.data(), n, out, ctx);
    return r;
}

}  // namespace

TEST_CASE("channels_first output is the channels-last output transposed, for every layout and type", "[reader]") {
    struct variant {
        bool seg;
        detail::layout_code layout;
        std::uint32_t channels, classes;
        record_codec codec;
    };
    const variant variants[] = {
        {true, detail::layout_code::one_hot, 3, 4, record_codec::zstd},
        {true, detail::layout_code::index, 3, 5, record_codec::zstd},
        {true, detail::layout_code::index, 1, 300, record_codec::none},  // uint16 index maps, gray
        {true, detail::layout_code::one_hot, 4, 3, record_codec::none},  // RGBA
        {false, detail::layout_code::class_id, 3, 6, record_codec::zstd},
        {false, detail::layout_code::class_id, 1, 2, record_codec::none},
    };
    for (const auto& v : variants) {
        DYNAMIC_SECTION("seg " << v.seg << " layout " << int(v.layout) << " channels " << v.channels << " classes "
                               << v.classes) {
            temp_dir dir("layout");
            synthetic_options o;
            o.segmentation = v.seg;
            o.layout = v.layout;
            o.channels = v.channels;
            o.classes = v.classes;
            o.codec = v.codec;
            o.width = 7;
            o.height = 5;
            const auto samples = write_synthetic(dir.str(), o);
            auto ds = dataset::open(dir.str());
            const std::vector<std::size_t> which = {3, 0, 9, 3};
            const auto hwc = read_all(ds, which, false, v.seg);
            const auto chw = read_all(ds, which, true, v.seg);
            const std::size_t pixels = 7 * 5, n = which.size();

            // The channels-last result is the stored record (pinned by test_format); channels
            // first is exactly its transpose.
            for (std::size_t b = 0; b < n; ++b)
                REQUIRE(std::equal(samples[which[b]].image.pixels.begin(), samples[which[b]].image.pixels.end(),
                                   hwc.image_u8.begin() + long(b * pixels * v.channels)));
            REQUIRE(chw.image_u8 == to_channels_first(hwc.image_u8, n, pixels, v.channels));
            REQUIRE(chw.image_f32 == to_channels_first(hwc.image_f32, n, pixels, v.channels));
            if (v.seg) {
                REQUIRE(chw.label_u8 == to_channels_first(hwc.label_u8, n, pixels, v.classes));
                REQUIRE(chw.label_f32 == to_channels_first(hwc.label_f32, n, pixels, v.classes));
                // Index maps are the same in both layouts, and int64 is uint16 widened.
                REQUIRE(chw.index == hwc.index);
                REQUIRE(chw.index_i64 == hwc.index_i64);
                for (std::size_t b = 0; b < n; ++b)
                    for (std::size_t p = 0; p < pixels; ++p) {
                        REQUIRE(hwc.index[b * pixels + p] == samples[which[b]].ids[p]);
                        REQUIRE(hwc.index_i64[b * pixels + p] == std::int64_t(samples[which[b]].ids[p]));
                    }
                // A one-hot plane k of the channels-first label is 1 exactly where the index is k.
                for (std::size_t b = 0; b < n; ++b)
                    for (std::size_t c = 0; c < v.classes; ++c)
                        for (std::size_t p = 0; p < pixels; ++p)
                            REQUIRE(chw.label_u8[(b * v.classes + c) * pixels + p] ==
                                    (hwc.index[b * pixels + p] == c ? 1 : 0));
            } else {
                // Classification labels have no spatial layout: identical either way.
                REQUIRE(chw.label_u8 == hwc.label_u8);
                REQUIRE(chw.label_f32 == hwc.label_f32);
                for (std::size_t b = 0; b < n; ++b) {
                    REQUIRE(hwc.class_i32[b] == samples[which[b]].class_id);
                    REQUIRE(hwc.class_i64[b] == std::int64_t(samples[which[b]].class_id));
                    REQUIRE(chw.class_i64[b] == hwc.class_i64[b]);
                    for (std::size_t c = 0; c < v.classes; ++c)
                        REQUIRE(hwc.label_u8[b * v.classes + c] == (std::int32_t(c) == samples[which[b]].class_id));
                }
            }
        }
    }
}

TEST_CASE("int64 outputs are checked against their capacity and refused for classification index maps", "[reader]") {
    temp_dir dir("layout-cap");
    synthetic_options o;
    write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    read_context ctx;
    std::vector<std::int64_t> idx(16 * 12 - 1);
    sample_buffers out;
    out.label_index_i64 = idx.data();
    out.label_index_capacity = idx.size();
    REQUIRE_THROWS_WITH(ds.read_into(0, out, ctx), Catch::Contains("label index buffer"));

    temp_dir cdir("layout-cls");
    o.segmentation = false;
    write_synthetic(cdir.str(), o);
    auto cls = dataset::open(cdir.str());
    idx.resize(16 * 12);
    out.label_index_capacity = idx.size();
    REQUIRE_THROWS_WITH(cls.read_into(0, out, ctx), Catch::Contains("for segmentation datasets"));
}

TEST_CASE("uint8 index maps are the uint16 ones narrowed, read alone or beside other outputs", "[reader]") {
    struct variant {
        detail::layout_code layout;
        std::uint32_t classes;
        record_codec codec;
    };
    // Index maps stored as uint8 (zstd: decompressed straight into the output; raw: copied), and
    // one-hot masks converted.
    const variant variants[] = {
        {detail::layout_code::index, 5, record_codec::zstd},
        {detail::layout_code::index, 5, record_codec::none},
        {detail::layout_code::one_hot, 4, record_codec::zstd},
        {detail::layout_code::one_hot, 4, record_codec::none},
    };
    for (const auto& v : variants) {
        DYNAMIC_SECTION("layout " << int(v.layout) << " codec " << int(v.codec)) {
            temp_dir dir("layout-u8");
            synthetic_options o;
            o.layout = v.layout;
            o.classes = v.classes;
            o.codec = v.codec;
            const auto samples = write_synthetic(dir.str(), o);
            auto ds = dataset::open(dir.str());
            const std::vector<std::size_t> which = {3, 0, 9, 3};
            const std::size_t pixels = std::size_t(o.width) * o.height, n = which.size();
            std::vector<std::uint8_t> alone(n * pixels, 77), beside(n * pixels, 77), image(n * pixels * 3);
            std::vector<std::uint16_t> index(n * pixels);
            read_context ctx;
            sample_buffers out;
            out.image_u8 = image.data();
            out.image_capacity = image.size();
            out.label_index_u8 = alone.data();
            out.label_index_capacity = alone.size();
            ds.read_batch(which.data(), n, out, ctx);
            out.label_index_u8 = beside.data();
            out.label_index = index.data();
            ds.read_batch(which.data(), n, out, ctx);
            REQUIRE(alone == beside);
            for (std::size_t b = 0; b < n; ++b)
                for (std::size_t p = 0; p < pixels; ++p) {
                    REQUIRE(alone[b * pixels + p] == std::uint8_t(index[b * pixels + p]));
                    REQUIRE(alone[b * pixels + p] == samples[which[b]].ids[p]);
                }
        }
    }
}

TEST_CASE("uint8 index maps are refused for more than 255 classes", "[reader]") {
    temp_dir dir("layout-u8-300");
    synthetic_options o;
    o.layout = detail::layout_code::index;
    o.classes = 300;
    write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    read_context ctx;
    std::vector<std::uint8_t> idx(std::size_t(o.width) * o.height);
    sample_buffers out;
    out.label_index_u8 = idx.data();
    out.label_index_capacity = idx.size();
    REQUIRE_THROWS_WITH(ds.read_into(0, out, ctx), Catch::Contains("at most 255 classes, the dataset has 300"));
}
