// The record format and the header-only reader: round trips, the golden test vector, and every
// way a damaged shard must be refused.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <random>
#include <thread>

#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

std::vector<std::uint8_t> expected_one_hot(const synthetic_sample& s, std::uint32_t classes) {
    std::vector<std::uint8_t> v(s.ids.size() * classes, 0);
    for (std::size_t p = 0; p < s.ids.size(); ++p)
        if (s.ids[p] < classes) v[p * classes + s.ids[p]] = 1;
    return v;
}

// Recomputes the trailer's header/index checksum after a deliberate edit of the header, so a
// test can reach the checks that come after the checksum.
void reseal(std::string& bytes) {
    auto* p = reinterpret_cast<unsigned char*>(bytes.data());
    const std::size_t size = bytes.size();
    const std::uint64_t index_offset = detail::load_u64(p + size - 40);
    const std::uint64_t count = detail::load_u64(p + size - 32);
    const std::uint32_t header_length = detail::load_u32(p + 12);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, p, header_length);
    XXH3_64bits_update(&st, p + index_offset, count * 40);
    detail::store_u64(p + size - 24, XXH3_64bits_digest(&st));
}

// The manifest's index_xxh3 of the one shard of `dir` made the resealed file's (format 1.6), so
// that a dataset open reaches the record checks rather than refusing a shard it does not list.
void relist_resealed(const std::string& dir, const std::string& bytes) {
    detail::json m = detail::json::parse(read_file(dir + "/manifest.json"));
    detail::json e = m.at("shards").as_array().at(0);
    e.set("index_xxh3", detail::hex16(detail::load_u64(reinterpret_cast<const unsigned char*>(bytes.data()) + bytes.size() - 24)));
    detail::json shards = detail::json::array();
    shards.push(e);
    m.set("shards", shards);
    write_file(dir + "/manifest.json", m.dump());
}

}  // namespace

TEST_CASE("segmentation records round-trip exactly through one-hot and index layouts", "[format]") {
    for (auto layout : {detail::layout_code::one_hot, detail::layout_code::index}) {
        for (auto codec : {record_codec::zstd, record_codec::none}) {
            temp_dir dir("rt");
            synthetic_options o;
            o.layout = layout;
            o.codec = codec;
            const auto samples = write_synthetic(dir.str(), o);
            auto ds = dataset::open(dir.str());
            REQUIRE(ds.size() == samples.size());
            REQUIRE(ds.schema().task == task::segmentation);
            REQUIRE(ds.classes().size() == 4);
            REQUIRE(ds.classes()[2].name == "class2");
            REQUIRE(ds.classes()[2].g == 4);
            for (std::size_t i = 0; i < samples.size(); ++i) {
                const auto s = ds.at(i);
                REQUIRE(s.key() == samples[i].key);
                REQUIRE(s.image().shape() == std::array<std::size_t, 3>{12, 16, 3});
                REQUIRE(std::equal(s.image().begin(), s.image().end(), samples[i].image.pixels.begin()));
                REQUIRE(s.one_hot() == expected_one_hot(samples[i], 4));
                if (layout == detail::layout_code::index) {
                    REQUIRE(s.label().shape() == std::array<std::size_t, 3>{12, 16, 1});
                    REQUIRE(std::equal(s.label().begin(), s.label().end(), samples[i].ids.begin()));
                } else {
                    REQUIRE(s.label().shape() == std::array<std::size_t, 3>{12, 16, 4});
                }
                REQUIRE(s.class_id() == -1);
            }
        }
    }
}

TEST_CASE("uint16 index maps hold more than 255 classes", "[format]") {
    temp_dir dir("u16");
    synthetic_options o;
    o.layout = detail::layout_code::index;
    o.classes = 300;
    o.width = 400;
    o.height = 2;
    const auto samples = write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    REQUIRE(ds.schema().label_value_bytes == 2);
    REQUIRE(ds.schema().ignore_value == 65535);
    const auto s = ds.at(3);
    REQUIRE(std::equal(s.label_index16().begin(), s.label_index16().end(), samples[3].ids.begin()));
    REQUIRE_THROWS_AS(s.label(), shardpack::error);
}

TEST_CASE("classification stores the id and reads back one-hot", "[format]") {
    temp_dir dir("cls");
    synthetic_options o;
    o.segmentation = false;
    o.classes = 5;
    const auto samples = write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    REQUIRE(ds.schema().task == task::classification);
    for (std::size_t i = 0; i < samples.size(); ++i) {
        const auto s = ds.at(i);
        REQUIRE(s.class_id() == samples[i].class_id);
        std::vector<std::uint8_t> want(5, 0);
        want[std::size_t(samples[i].class_id)] = 1;
        REQUIRE(s.one_hot() == want);
        REQUIRE(s.label().size() == 0);
    }
}

TEST_CASE("read_batch of a dataset whose schema fixes no size: its records' one size, or an error naming the odd record", "[format]") {
    // A build without --size writes no fixed size even when every image has one (issue #35).
    for (auto codec : {record_codec::none, record_codec::zstd_record, record_codec::zstd}) {
        INFO("codec " << int(codec));
        temp_dir dir("unfixed");
        synthetic_options o;
        o.fixed_size = false;
        o.codec = codec;
        o.heights = {12, 12, 12, 12, 12, 12, 12, 12, 12, 20};  // record 9 is taller
        const auto samples = write_synthetic(dir.str(), o);
        auto ds = dataset::open(dir.str());
        REQUIRE(ds.schema().fixed_height == 0);
        read_context ctx;
        REQUIRE(ds.record_size(3, ctx) == std::make_pair(std::size_t(12), std::size_t(16)));
        REQUIRE(ds.record_size(9, ctx) == std::make_pair(std::size_t(20), std::size_t(16)));
        const std::size_t image_n = 16 * 12 * 3;
        std::vector<std::uint8_t> img(3 * image_n);
        std::vector<std::uint16_t> idx(3 * 16 * 12);
        sample_buffers out;
        out.image_u8 = img.data();
        out.image_capacity = img.size();
        out.label_index = idx.data();
        out.label_index_capacity = idx.size();
        const std::size_t which[3] = {7, 2, 5};
        ds.read_batch(which, 3, out, ctx);
        for (std::size_t b = 0; b < 3; ++b) {
            const auto& s = samples[which[b]];
            REQUIRE(std::equal(s.image.pixels.begin(), s.image.pixels.end(), img.begin() + long(b * image_n)));
            for (std::size_t p = 0; p < s.ids.size(); ++p) REQUIRE(idx[b * 16 * 12 + p] == s.ids[p]);
        }
        // A record of another size in the batch is named, whichever comes first; the buffers
        // would hold it (20 rows fit in 3 x 12), so only the size check stops it.
        const std::size_t odd[2] = {1, 9};
        REQUIRE_THROWS_WITH(ds.read_batch(odd, 2, out, ctx),
                            Catch::Contains("record 9") && Catch::Contains("16x20") && Catch::Contains("16x12") &&
                                Catch::Contains("records of one batch must share a size"));
        const std::size_t odd_first[2] = {9, 1};
        std::vector<std::uint8_t> big(2 * 16 * 20 * 3);
        sample_buffers tall = out;
        tall.image_u8 = big.data();
        tall.image_capacity = big.size();
        tall.label_index = nullptr;
        REQUIRE_THROWS_WITH(ds.read_batch(odd_first, 2, tall, ctx), Catch::Contains("record 1"));
        // A batch split over threads states its size: each slice checks against the batch's.
        sample_buffers sliced = out;
        sliced.batch_height = 12;
        sliced.batch_width = 16;
        const std::size_t split[3] = {0, 9, 8};
        REQUIRE_NOTHROW(ds.read_batch(split, 1, sliced.slice(0, 1, 3), ctx));
        REQUIRE_THROWS_WITH(ds.read_batch(split + 1, 2, sliced.slice(1, 2, 3), ctx), Catch::Contains("record 9"));
        // A crop still batches records of any size.
        augmentation aug;
        aug.height = 8;
        aug.width = 8;
        sample_buffers cropped = out;
        cropped.augment = &aug;
        REQUIRE_NOTHROW(ds.read_batch(odd, 2, cropped, ctx));
    }
}

TEST_CASE("read_into fills caller buffers: uint8, normalised float32 and one-hot from either layout", "[format]") {
    for (auto layout : {detail::layout_code::one_hot, detail::layout_code::index}) {
        temp_dir dir("into");
        synthetic_options o;
        o.layout = layout;
        const auto samples = write_synthetic(dir.str(), o);
        auto ds = dataset::open(dir.str());
        read_context ctx;
        const std::size_t image_n = 16 * 12 * 3, label_n = 16 * 12 * 4;
        std::vector<std::uint8_t> img(2 * image_n), lab(2 * label_n);
        std::vector<float> imgf(2 * image_n), labf(2 * label_n);
        std::vector<std::uint16_t> idx(2 * 16 * 12);
        std::int32_t ids[2];
        sample_buffers out;
        out.image_u8 = img.data();
        out.image_f32 = imgf.data();
        out.image_capacity = img.size();
        out.norm = normalization::imagenet();
        out.label_u8 = lab.data();
        out.label_f32 = labf.data();
        out.label_capacity = lab.size();
        out.label_index = idx.data();
        out.label_index_capacity = idx.size();
        out.class_id = ids;
        const std::size_t which[2] = {7, 2};
        ds.read_batch(which, 2, out, ctx);
        for (std::size_t b = 0; b < 2; ++b) {
            const auto& s = samples[which[b]];
            REQUIRE(std::equal(s.image.pixels.begin(), s.image.pixels.end(), img.begin() + long(b * image_n)));
            const auto oh = expected_one_hot(s, 4);
            REQUIRE(std::equal(oh.begin(), oh.end(), lab.begin() + long(b * label_n)));
            for (std::size_t j = 0; j < label_n; ++j) REQUIRE(labf[b * label_n + j] == float(oh[j]));
            for (std::size_t p = 0; p < s.ids.size(); ++p) REQUIRE(idx[b * 16 * 12 + p] == s.ids[p]);
            for (std::size_t j = 0; j < image_n; ++j) {
                const std::size_t c = j % 3;
                const float want = (s.image.pixels[j] / 255.0f - out.norm.mean[c]) / out.norm.stddev[c];
                REQUIRE(imgf[b * image_n + j] == Approx(want).margin(1e-6));
            }
            REQUIRE(ids[b] == -1);
        }
        // A buffer that is too small is refused, not overrun.
        out.image_capacity = image_n - 1;
        REQUIRE_THROWS_WITH(ds.read_into(0, out, ctx), Catch::Contains("image buffer"));
    }
}

TEST_CASE("raw records are read zero-copy from the mapping at aligned offsets", "[format]") {
    temp_dir dir("raw");
    synthetic_options o;
    o.codec = record_codec::none;
    write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    const auto s = ds.at(4);
    const auto* base = ds.shard(0).bytes();
    const auto* img = s.image().data();
    REQUIRE(img > base);
    REQUIRE(img < base + ds.shard(0).size());
    REQUIRE((img - base) % 64 == 0);
    REQUIRE((ds.shard(0).entry(4).offset) % 64 == 0);
}

TEST_CASE("records split into shards at the shard size, and any record is found in O(1)", "[format]") {
    temp_dir dir("shards");
    synthetic_options o;
    o.records = 50;
    o.shard_size = 8192;
    const auto samples = write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    REQUIRE(ds.shard_count() > 3);
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) {
        REQUIRE(ds.shard(k).size() <= 8192);
        total += ds.shard(k).record_count();
    }
    REQUIRE(total == 50);
    for (std::size_t i = 0; i < 50; ++i) REQUIRE(ds.at(i).key() == samples[i].key);
    REQUIRE_THROWS_WITH(ds.at(50), Catch::Contains("out of range"));
}

// The bytes of tests/golden/NAME (a hex dump), first rewritten from `bytes` where
// SHARDPACK_UPDATE_GOLDEN is set (after a deliberate format change: the spec's vector too).
namespace {
std::string golden_vector(const std::string& name, const std::string& bytes) {
    const std::string path = std::string(SHARDPACK_TEST_FILES) + "/golden/" + name;
    if (std::getenv("SHARDPACK_UPDATE_GOLDEN")) write_file(path, hex_dump(bytes));
    return parse_hex_dump(read_file(path));
}
}  // namespace

TEST_CASE("the golden tiny shard matches the test vector in the spec byte for byte", "[format][golden]") {
    temp_dir dir("golden");
    write_golden_tiny_dataset(dir.str());
    const std::string bytes = read_file(only_shard(dir.str()));
    const std::string golden = golden_vector("tiny_shard.hex", bytes);
    REQUIRE(golden.size() == 464);
    REQUIRE(hex_dump(bytes) == hex_dump(golden));
    // And the reader reads the vector as the spec says.
    auto ds = dataset::open(dir.str());
    const auto s = ds.at(0);
    REQUIRE(s.key() == "a.png");
    REQUIRE(s.image()[11] == 12);
    REQUIRE(std::vector<std::uint8_t>(s.label().begin(), s.label().end()) == std::vector<std::uint8_t>{0, 1, 255, 1});
}

TEST_CASE("the golden band shard (format 1.1) matches its test vector in the spec byte for byte", "[format][golden]") {
    temp_dir dir("golden11");
    dataset_writer_options wo = golden_segmentation_options(dir.str(), 8, 8);
    wo.codec = shard_codec::zstd_bands;
    // 8x8 pixels in two bands of four rows: image rows 0-3 all 0x11, rows 4-7 all 0x22; label
    // rows 0-3 class 0, rows 4-7 class 1. Each band is one compressed block of two literals and
    // one match (spec 16.4 shows them byte by byte), as libzstd 1.5.4 writes it.
    image_u8 img{8, 8, 3, std::vector<std::uint8_t>(192, 0x11)};
    std::fill(img.pixels.begin() + 96, img.pixels.end(), 0x22);
    std::uint16_t ids[64] = {};
    std::fill(std::begin(ids) + 32, std::end(ids), 1);
    {
        dataset_writer writer(wo);
        std::vector<unsigned char> decoded;
        encode_record(wo.schema, "b.png", img, ids, -1, decoded);
        record_compressor bands(record_codec::zstd, 1, wo.schema, 4);
        stored_record stored;
        bands.compress(decoded, stored);
        REQUIRE(stored.codec == detail::codec_zstd_bands);
        writer.add(stored);
        writer.publish();
    }
    const std::string bytes = read_file(only_shard(dir.str()));
    const std::string golden = golden_vector("band_shard.hex", bytes);
    REQUIRE(hex_dump(bytes) == hex_dump(golden));
    REQUIRE(detail::load_u16(reinterpret_cast<const unsigned char*>(bytes.data()) + 10) == 1);  // version 1.1
    REQUIRE(read_file(dir / "manifest.json").find("\"format_version\": \"1.1\"") != std::string::npos);
    auto ds = dataset::open(dir.str());
    const auto s = ds.at(0);
    REQUIRE(s.key() == "b.png");
    REQUIRE(std::equal(s.image().begin(), s.image().end(), img.pixels.begin()));
    REQUIRE(std::equal(s.label().begin(), s.label().end(), std::begin(ids)));
}

// Format 1.3 (spec 16.6): codec 3, a band height per region, chosen by the writer's rule: the
// label plane one frame because zstd shrinks it more than label_one_frame_min_ratio times, and
// the image then in bands of about 128 KiB (2 rows of 16384 RGB pixels).
TEST_CASE("the golden per-region band shard (format 1.3) matches its test vector in the spec byte for byte", "[format][golden]") {
    temp_dir dir("golden13");
    dataset_writer_options wo = golden_segmentation_options(dir.str(), 4, 16384);
    wo.codec = shard_codec::zstd_region_bands;
    // 4 rows of 16384 pixels: image rows 0-1 all 0x11, rows 2-3 all 0x22; label rows 0-1 class 0,
    // rows 2-3 class 1.
    const std::size_t row = 16384 * 3;
    image_u8 img{16384, 4, 3, std::vector<std::uint8_t>(4 * row, 0x11)};
    std::fill(img.pixels.begin() + 2 * row, img.pixels.end(), 0x22);
    std::vector<std::uint16_t> ids(4 * 16384, 0);
    std::fill(ids.begin() + 2 * 16384, ids.end(), 1);
    {
        dataset_writer writer(wo);
        std::vector<unsigned char> decoded;
        encode_record(wo.schema, "c.png", img, ids.data(), -1, decoded);
        record_compressor bands(record_codec::zstd, 1, wo.schema);
        REQUIRE(bands.per_region());
        stored_record stored;
        bands.compress(decoded, stored);
        REQUIRE(stored.codec == detail::codec_zstd_region_bands);
        writer.add(stored);
        writer.publish();
    }
    const std::string bytes = read_file(only_shard(dir.str()));
    const std::string golden = golden_vector("region_band_shard.hex", bytes);
    REQUIRE(hex_dump(bytes) == hex_dump(golden));
    REQUIRE(detail::load_u16(reinterpret_cast<const unsigned char*>(bytes.data()) + 10) == 3);  // version 1.3
    REQUIRE(read_file(dir / "manifest.json").find("\"format_version\": \"1.3\"") != std::string::npos);
    auto ds = dataset::open(dir.str());
    const auto s = ds.at(0);
    REQUIRE(s.key() == "c.png");
    REQUIRE(std::equal(s.image().begin(), s.image().end(), img.pixels.begin()));
    REQUIRE(std::equal(s.label().begin(), s.label().end(), ids.begin()));
}

// Format 1.4 (spec 16.7): uint16 images and the channel order "bands", behind required feature
// bit 3: one raw classification record of 1x2 pixels of 5 uint16 bands, key "d.tif", class 1.
TEST_CASE("the golden uint16 bands shard (format 1.4) matches its test vector in the spec byte for byte", "[format][golden]") {
    temp_dir dir("golden14");
    dataset_writer_options wo;
    wo.out_dir = dir.str();
    wo.schema.task = detail::task_code::classification;
    wo.schema.channels = 5;
    wo.schema.channel_order = detail::order_code::bands;
    wo.schema.image_dtype_bytes = 2;
    wo.schema.label_layout = detail::layout_code::class_id;
    wo.schema.label_dtype_bytes = 0;
    wo.schema.fixed_height = 1;
    wo.schema.fixed_width = 2;
    wo.schema.class_count = 2;
    wo.schema.ignore_value = 255;
    wo.classes = {{"land", false, 0, 0, 0}, {"water", false, 0, 0, 0}};
    wo.codec = shard_codec::raw;
    // Band b of pixel x holds 0x1000 * (x + 1) + b: 0x1000..0x1004, 0x2000..0x2004; the last
    // value of each pixel is 0xfff0 + x instead, to show a value above 32767.
    const std::uint16_t values[10] = {0x1000, 0x1001, 0x1002, 0x1003, 0xfff0, 0x2000, 0x2001, 0x2002, 0x2003, 0xfff1};
    image_u8 img{2, 1, 5, std::vector<std::uint8_t>(20), 2};
    std::memcpy(img.pixels.data(), values, sizeof values);
    {
        dataset_writer writer(wo);
        std::vector<unsigned char> decoded;
        encode_record(wo.schema, "d.tif", img, nullptr, 1, decoded);
        record_compressor raw(record_codec::none, 0);
        stored_record stored;
        raw.compress(decoded, stored);
        writer.add(stored);
        writer.publish();
    }
    const std::string bytes = read_file(only_shard(dir.str()));
    const std::string golden = golden_vector("uint16_bands_shard.hex", bytes);
    REQUIRE(hex_dump(bytes) == hex_dump(golden));
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    REQUIRE(detail::load_u16(p + 10) == 4);                                   // version 1.4
    REQUIRE(detail::load_u64(p + 16) == detail::feature_wide_pixels);        // required bit 3 alone
    REQUIRE(read_file(dir / "manifest.json").find("\"format_version\": \"1.4\"") != std::string::npos);
    REQUIRE(read_file(dir / "manifest.json").find("\"dtype\": \"uint16\"") != std::string::npos);
    auto ds = dataset::open(dir.str());
    REQUIRE(ds.schema().image_value_bytes == 2);
    REQUIRE(ds.schema().order == channel_order::bands);
    REQUIRE(ds.schema().channels == 5);
    const auto s = ds.at(0);
    REQUIRE(s.key() == "d.tif");
    REQUIRE(s.class_id() == 1);
    REQUIRE(std::equal(s.image16().begin(), s.image16().end(), std::begin(values)));
    REQUIRE_THROWS_WITH(s.image(), Catch::Contains("uint16 images; use image16()"));
    // A 1.3 reader (bits 0-2) refuses the shard at open, before any record.
    REQUIRE_THROWS_WITH(detail::shard_file(only_shard(dir.str()), "s", detail::known_required_features_1_3),
                        Catch::Contains("required feature bits 0x0000000000000008") && Catch::Contains("newer shardpack reader"));
}

TEST_CASE("a shard of uint16 images without feature bit 3 is refused", "[format][version]") {
    temp_dir dir("wide_no_bit");
    dataset_writer_options wo = golden_segmentation_options(dir.str(), 1, 1);
    wo.schema.image_dtype_bytes = 2;
    {
        dataset_writer writer(wo);
        image_u8 img{1, 1, 3, std::vector<std::uint8_t>(6, 7), 2};
        const std::uint16_t ids[1] = {1};
        std::vector<unsigned char> decoded;
        encode_record(wo.schema, "e.png", img, ids, -1, decoded);
        record_compressor raw(record_codec::none, 0);
        stored_record stored;
        raw.compress(decoded, stored);
        writer.add(stored);
        writer.publish();
    }
    std::string bytes = read_file(only_shard(dir.str()));
    auto* p = reinterpret_cast<unsigned char*>(bytes.data());
    REQUIRE(detail::load_u64(p + 16) == detail::feature_wide_pixels);
    detail::store_u64(p + 16, 0);  // the bit cleared, the checksum made good again
    reseal(bytes);
    write_file(only_shard(dir.str()), bytes);
    REQUIRE_THROWS_WITH(detail::shard_file(only_shard(dir.str()), "s"), Catch::Contains("does not declare that feature (bit 3)"));
}

TEST_CASE("every truncation of a shard is refused at open", "[format][damage]") {
    temp_dir dir("trunc");
    synthetic_options o;
    o.records = 3;
    o.width = 5;
    o.height = 4;
    write_synthetic(dir.str(), o);
    const std::string shard = only_shard(dir.str());
    const std::string bytes = read_file(shard);
    REQUIRE_NOTHROW(detail::shard_file(shard, "s"));
    const std::string cut = dir / "cut.spk";
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        write_file(cut, bytes.substr(0, n));
        INFO("truncated to " << n << " of " << bytes.size() << " bytes");
        REQUIRE_THROWS_AS(detail::shard_file(cut, "cut.spk"), shardpack::error);
    }
    // Through the dataset, the manifest's size check names the shard.
    write_file(shard, bytes.substr(0, bytes.size() - 1));
    REQUIRE_THROWS_WITH(dataset::open(dir.str()), Catch::Contains(std::filesystem::path(shard).filename().string()));
}

TEST_CASE("a flipped bit anywhere in a shard is found at open or at read", "[format][damage]") {
    for (auto codec : {record_codec::zstd, record_codec::zstd_record, record_codec::none}) {
        temp_dir dir("flip");
        synthetic_options o;
        o.records = 3;
        o.width = 6;
        o.height = 4;
        o.codec = codec;
        write_synthetic(dir.str(), o);
        const std::string shard = only_shard(dir.str());
        const std::string bytes = read_file(shard);
        detail::shard_file clean(shard, "s");
        // Which bytes belong to a record, a header, the index or the trailer; padding is
        // covered by `shardpack verify` (the whole-file hash), not by the reader.
        std::vector<bool> covered(bytes.size(), false);
        for (std::size_t i = 0; i < clean.header().header_length; ++i) covered[i] = true;
        for (std::size_t i = clean.index_offset(); i < bytes.size(); ++i) covered[i] = true;
        for (std::size_t r = 0; r < clean.record_count(); ++r) {
            const auto e = clean.entry(r);
            for (std::uint64_t i = e.offset; i < e.offset + e.stored_size; ++i) covered[i] = true;
        }
        std::size_t tried = 0;
        for (std::size_t pos = 0; pos < bytes.size(); ++pos) {
            if (!covered[pos]) continue;
            std::string damaged = bytes;
            damaged[pos] = static_cast<char>(damaged[pos] ^ (1 << (pos % 8)));
            write_file(shard, damaged);
            INFO("bit flipped at byte " << pos);
            bool found = false;
            try {
                auto ds = dataset::open(dir.str());
                for (std::size_t i = 0; i < ds.size(); ++i) ds.at(i);
            } catch (const shardpack::error&) {
                found = true;
            }
            REQUIRE(found);
            ++tried;
        }
        REQUIRE(tried > 300);
        write_file(shard, bytes);
    }
}

TEST_CASE("record errors name the shard, the record and the dataset index", "[format][damage]") {
    temp_dir dir("name");
    synthetic_options o;
    o.records = 4;
    o.codec = record_codec::none;
    write_synthetic(dir.str(), o);
    const std::string shard = only_shard(dir.str());
    std::string bytes = read_file(shard);
    detail::shard_file clean(shard, "s");
    bytes[clean.entry(2).offset + 100] ^= 0x10;  // a pixel of record 2
    write_file(shard, bytes);
    auto ds = dataset::open(dir.str());
    REQUIRE_NOTHROW(ds.at(1));
    REQUIRE_THROWS_WITH(ds.at(2), Catch::Contains("record 2 (dataset index 2)") && Catch::Contains("checksum") &&
                                      Catch::Contains(std::filesystem::path(shard).filename().string()));
    // With verification off, the damaged pixel is returned as stored.
    open_options lax;
    lax.verify_checksums = false;
    REQUIRE_NOTHROW(dataset::open(dir.str(), lax).at(2));
}

TEST_CASE("unknown major versions, required features and required sections are refused", "[format][version]") {
    temp_dir dir("ver");
    synthetic_options o;
    o.records = 2;
    o.codec = record_codec::zstd_record;  // a 1.0 file
    write_synthetic(dir.str(), o);
    const std::string shard = only_shard(dir.str());
    const std::string bytes = read_file(shard);

    std::string v2 = bytes;
    v2[8] = 2;  // major version 2
    write_file(shard, v2);
    REQUIRE_THROWS_WITH(detail::shard_file(shard, "s"), Catch::Contains("format version 2.0 is not supported"));

    std::string minor = bytes;
    minor[10] = 7;  // a newer minor version reads fine (trailer repeats the version)
    minor[minor.size() - 40 + 26] = 7;
    reseal(minor);
    write_file(shard, minor);
    REQUIRE_NOTHROW(detail::shard_file(shard, "s"));

    std::string feature = bytes;
    feature[16] |= 0x20;  // an unknown required feature bit (bits 0-4 are known since 1.5)
    reseal(feature);
    write_file(shard, feature);
    REQUIRE_THROWS_WITH(detail::shard_file(shard, "s"), Catch::Contains("required feature bits"));

    std::string optional_feature = bytes;
    optional_feature[24] |= 0x04;  // unknown optional feature bits are ignored
    reseal(optional_feature);
    write_file(shard, optional_feature);
    REQUIRE_NOTHROW(detail::shard_file(shard, "s"));
}

TEST_CASE("optional sections a reader does not know are skipped, required ones are refused", "[format][version]") {
    {
        temp_dir dir("opt");
        synthetic_options o;
        o.records = 3;
        o.extra = {{0x1000, 0, {1, 2, 3, 4, 5}}};
        const auto samples = write_synthetic(dir.str(), o);
        auto ds = dataset::open(dir.str());
        REQUIRE(ds.at(2).key() == samples[2].key);
    }
    {
        temp_dir dir("req");
        synthetic_options o;
        o.records = 3;
        o.extra = {{0x1000, detail::section_flag_required, {1, 2, 3}}};
        write_synthetic(dir.str(), o);
        REQUIRE_THROWS_WITH(dataset::open(dir.str()), Catch::Contains("unknown required section type 4096"));
    }
}

TEST_CASE("a repeated schema section and an unknown label layout are refused", "[format][version]") {
    {
        temp_dir dir("dup");
        synthetic_options o;
        o.records = 1;
        std::vector<unsigned char> schema(detail::schema_payload_size);
        detail::encode_schema(synthetic_schema(o), schema.data());
        o.extra = {{detail::section_schema, detail::section_flag_required, schema}};
        write_synthetic(dir.str(), o);
        REQUIRE_THROWS_WITH(dataset::open(dir.str()), Catch::Contains("two schema sections"));
    }
    detail::schema_record s = synthetic_schema({});
    s.label_layout = static_cast<detail::layout_code>(4);
    REQUIRE_THAT(detail::schema_problem(s), Catch::Contains("one-hot or index"));
    s = synthetic_schema({});
    s.ignore_value = 0;  // ignored pixels would read back as class 0
    REQUIRE_THAT(detail::schema_problem(s), Catch::Contains("ignore value"));
}

TEST_CASE("the manifest and the shards must agree", "[format][manifest]") {
    temp_dir dir("man");
    synthetic_options o;
    o.records = 20;
    o.shard_size = 8192;
    write_synthetic(dir.str(), o);
    const std::string manifest = read_file(dir / "manifest.json");
    auto m = detail::json::parse(manifest);
    REQUIRE(m.at("records").as_u64() == 20);
    REQUIRE(m.at("content_hash").as_string().size() == 16);

    std::string edited = manifest;
    edited.replace(edited.find("\"records\": 20"), 13, "\"records\": 21");
    write_file(dir / "manifest.json", edited);
    REQUIRE_THROWS_WITH(dataset::open(dir.str()), Catch::Contains("the manifest says 21"));

    write_file(dir / "manifest.json", manifest.substr(0, manifest.size() / 2));
    REQUIRE_THROWS_WITH(dataset::open(dir.str()), Catch::Contains("manifest.json"));

    write_file(dir / "manifest.json", manifest);
    const std::string first = m.at("shards").as_array()[0].at("file").as_string();
    std::filesystem::remove(dir / first);
    REQUIRE_THROWS_WITH(dataset::open(dir.str()), Catch::Contains(first));

    std::filesystem::remove(dir / "manifest.json");
    REQUIRE_THROWS_WITH(dataset::open(dir.str()), Catch::Contains("manifest.json"));
}

TEST_CASE("the same records make the same bytes: shard names and content hash are deterministic", "[format]") {
    temp_dir a("det-a"), b("det-b");
    synthetic_options o;
    o.records = 30;
    o.shard_size = 8192;
    write_synthetic(a.str(), o);
    write_synthetic(b.str(), o);
    auto ma = detail::json::parse(read_file(a / "manifest.json"));
    auto mb = detail::json::parse(read_file(b / "manifest.json"));
    REQUIRE(ma.at("content_hash").as_string() == mb.at("content_hash").as_string());
    REQUIRE(ma.at("shards").dump() == mb.at("shards").dump());
}

TEST_CASE("random reads from several threads at once return the right records", "[format][threads]") {
    temp_dir dir("mt");
    synthetic_options o;
    o.records = 64;
    o.shard_size = 16384;
    const auto samples = write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            std::mt19937 rng{static_cast<unsigned>(t)};
            read_context ctx;
            for (int k = 0; k < 500; ++k) {
                const std::size_t i = rng() % samples.size();
                const auto s = (k % 2) ? ds.at(i) : ds.read(i, ctx);
                if (s.key() != samples[i].key ||
                    !std::equal(s.image().begin(), s.image().end(), samples[i].image.pixels.begin()))
                    ++mismatches;
            }
        });
    }
    for (auto& t : threads) t.join();
    REQUIRE(mismatches == 0);
}

TEST_CASE("rank shares cover the dataset under each policy", "[format][rank_share]") {
    temp_dir dir("part");
    synthetic_options o;
    o.records = 10;
    write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    SECTION("pad: equal counts, every record at least once") {
        std::vector<int> seen(10, 0);
        for (std::size_t r = 0; r < 3; ++r) {
            auto p = ds.rank_share(r, 3, rank_share_policy::pad);
            REQUIRE(p.size() == 4);
            for (std::size_t k = 0; k < p.size(); ++k) ++seen[p[k]];
        }
        for (int c : seen) REQUIRE(c >= 1);
        REQUIRE(std::accumulate(seen.begin(), seen.end(), 0) == 12);
    }
    SECTION("drop: equal counts, no repeats") {
        std::vector<int> seen(10, 0);
        for (std::size_t r = 0; r < 3; ++r) {
            auto p = ds.rank_share(r, 3, rank_share_policy::drop);
            REQUIRE(p.size() == 3);
            for (std::size_t k = 0; k < p.size(); ++k) ++seen[p[k]];
        }
        REQUIRE(std::accumulate(seen.begin(), seen.end(), 0) == 9);
        for (int c : seen) REQUIRE(c <= 1);
    }
    SECTION("uneven: every record exactly once") {
        std::vector<int> seen(10, 0);
        std::size_t sizes[3];
        for (std::size_t r = 0; r < 3; ++r) {
            auto p = ds.rank_share(r, 3, rank_share_policy::uneven);
            sizes[r] = p.size();
            for (std::size_t k = 0; k < p.size(); ++k) ++seen[p[k]];
        }
        REQUIRE(sizes[0] == 4);
        REQUIRE(sizes[2] == 3);
        for (int c : seen) REQUIRE(c == 1);
    }
    REQUIRE_THROWS_AS(ds.rank_share(3, 3), shardpack::error);
    SECTION("the former names (partition, partition_policy) give the same shares") {
        for (std::size_t r = 0; r < 3; ++r) {
            const shardpack::partition old = ds.partition(r, 3, partition_policy::uneven);
            const rank_share now = ds.rank_share(r, 3, rank_share_policy::uneven);
            REQUIRE(old.size() == now.size());
            for (std::size_t k = 0; k < now.size(); ++k) REQUIRE(old[k] == now[k]);
        }
    }
}

// Found by tests/fuzz/fuzz_shard: a 672-byte shard whose index claimed a 2 GiB decoded size for
// a 65-byte zstd record made at() allocate 2 GiB before zstd could say the frame was short.
TEST_CASE("a zstd record whose index claims more than its frame can hold is refused before allocating", "[format][damage]") {
    temp_dir dir("zbound");
    synthetic_options o;
    o.records = 3;
    o.codec = record_codec::zstd_record;
    write_synthetic(dir.str(), o);
    const std::string shard = only_shard(dir.str());
    std::string bytes = read_file(shard);
    const detail::shard_file clean(shard, "s");
    REQUIRE(clean.entry(1).codec == detail::codec_zstd);
    // 3 GiB: within the format's 4 GiB limit, so the open accepts the index.
    auto* entry = reinterpret_cast<unsigned char*>(bytes.data()) + clean.index_offset() + 1 * detail::index_entry_size;
    detail::store_u64(entry + 16, std::uint64_t(3) << 30);
    reseal(bytes);
    write_file(shard, bytes);
    relist_resealed(dir.str(), bytes);
    auto ds = dataset::open(dir.str());
    REQUIRE_NOTHROW(ds.at(0));
    REQUIRE_THROWS_WITH(ds.at(1), Catch::Contains("record 1 (dataset index 1)") && Catch::Contains("holds at most") &&
                                      Catch::Contains("the index says 3221225472"));
    read_context ctx;
    REQUIRE_THROWS_WITH(ds.read(1, ctx), Catch::Contains("holds at most"));
    REQUIRE_NOTHROW(ds.read(2, ctx));
}

TEST_CASE("zstd_decoded_bound covers what zstd decompresses, for one frame or several", "[format]") {
    auto compress = [](const std::vector<unsigned char>& in, bool checksum) {
        ZSTD_CCtx* c = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, checksum ? 1 : 0);
        ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, checksum ? 0 : 1);
        std::vector<unsigned char> out(ZSTD_compressBound(in.size()));
        const std::size_t n = ZSTD_compress2(c, out.data(), out.size(), in.data(), in.size());
        ZSTD_freeCCtx(c);
        REQUIRE_FALSE(ZSTD_isError(n));
        out.resize(n);
        return out;
    };
    std::mt19937 rng(7);
    std::vector<unsigned char> zeros(3 << 20, 0), noise(300000), mixed(200000);
    for (auto& b : noise) b = static_cast<unsigned char>(rng());
    for (std::size_t i = 0; i < mixed.size(); ++i) mixed[i] = static_cast<unsigned char>(i % 1000 < 500 ? 0 : rng() % 4);
    for (const auto* in : {&zeros, &noise, &mixed})
        for (bool checksum : {false, true}) {
            const auto frame = compress(*in, checksum);
            const std::uint64_t bound = detail::zstd_decoded_bound(frame.data(), frame.size());
            REQUIRE(bound >= in->size());
            REQUIRE(bound <= in->size() + 2 * detail::zstd_block_max * (in->size() / detail::zstd_block_max + 1));
            // Cut short, the bound counts the blocks before the cut and at most one more.
            for (std::size_t cut : {std::size_t(0), std::size_t(3), std::size_t(7), frame.size() / 2, frame.size() - 1})
                REQUIRE(detail::zstd_decoded_bound(frame.data(), cut) <= bound + detail::zstd_block_max);
        }
    // Two frames after a skippable frame: the spec's leniencies, which the reader accepts.
    std::vector<unsigned char> stored = {0x50, 0x2A, 0x4D, 0x18, 3, 0, 0, 0, 9, 9, 9};
    const auto a = compress(zeros, false), b = compress(noise, true);
    stored.insert(stored.end(), a.begin(), a.end());
    stored.insert(stored.end(), b.begin(), b.end());
    REQUIRE(detail::zstd_decoded_bound(stored.data(), stored.size()) >= zeros.size() + noise.size());
    std::vector<unsigned char> out(zeros.size() + noise.size());
    REQUIRE(ZSTD_decompress(out.data(), out.size(), stored.data(), stored.size()) == out.size());
    // A 3 MiB run of zeros takes a few hundred bytes; the bound stays in proportion to them.
    REQUIRE(a.size() < 1000);
    REQUIRE(detail::zstd_decoded_bound(a.data(), a.size()) < (std::uint64_t(64) << 20));
}

// Found by tests/fuzz/fuzz_manifest: "-0." parsed (as -0.0) and printed as "-0", which read back
// as the integer 0. The parser now follows JSON's number grammar, and -0.0 prints as 0.
TEST_CASE("the manifest's JSON parser takes JSON numbers only, and reads back what it prints", "[format][json]") {
    for (const char* bad : {"-0.", "01", "-01", "+1", ".5", "1.", "1e", "1e+", "-", "--1", "1.5.3", "0x10", "1e5e5", "-.5"}) {
        INFO(bad);
        REQUIRE_THROWS_AS(detail::json::parse(bad), shardpack::error);
        REQUIRE_THROWS_AS(detail::json::parse(std::string("[") + bad + "]"), shardpack::error);
    }
    REQUIRE(detail::json::parse("-0").as_i64() == 0);
    REQUIRE(detail::json::parse("0").as_u64() == 0);
    REQUIRE(detail::json::parse("18446744073709551615").as_u64() == UINT64_MAX);
    REQUIRE(detail::json::parse("-9223372036854775808").as_i64() == INT64_MIN);
    REQUIRE(detail::json::parse("0.5").as_double() == 0.5);
    REQUIRE(detail::json::parse("-1.5E-3").as_double() == -1.5e-3);
    REQUIRE(detail::json::parse("1e+20").as_double() == 1e20);
    REQUIRE_THROWS_AS(detail::json::parse("18446744073709551616"), shardpack::error);
    for (const char* text : {"-0.0", "0.0", "[-0.0, 2.5, 1e-05, 123456789.0, -7]"}) {
        const auto v = detail::json::parse(text);
        const std::string printed = v.dump(-1);
        INFO(text << " prints as " << printed);
        REQUIRE(detail::json::parse(printed).dump(-1) == printed);
    }
    REQUIRE(detail::json::parse("-0.0").dump(-1) == "0");
}

// Found by the ASan run of this suite: `ds.at(i).image()` kept a view into a sample destroyed at
// the end of the statement. Views from a temporary sample no longer compile; from a named one they do.
template <class S, class = void>
struct image_view_of : std::false_type {};
template <class S>
struct image_view_of<S, std::void_t<decltype(std::declval<S>().image())>> : std::true_type {};

TEST_CASE("views cannot be taken from a temporary sample", "[format][lifetime]") {
    static_assert(image_view_of<sample&>::value && image_view_of<const sample&>::value);
    static_assert(!image_view_of<sample>::value && !image_view_of<sample&&>::value);
    static_assert(std::is_same_v<decltype(std::declval<sample&>().key()), std::string_view>);
    static_assert(std::is_same_v<decltype(std::declval<sample>().key()), std::string>);
    temp_dir dir("lifetime");
    synthetic_options o;
    o.records = 2;
    write_synthetic(dir.str(), o);
    auto ds = dataset::open(dir.str());
    const auto s = ds.at(1);
    const auto img = s.image();
    REQUIRE(img.size() > 0);
    REQUIRE(s.key().size() > 0);
    REQUIRE(ds.at(1).key() == s.key());
}

namespace {
// dataset::open's message as a C string shows it (what() is what the CLI and Python print), or
// "(opened)".
std::string manifest_error(const std::string& dir) {
    try {
        (void)dataset::open(dir);
        return "(opened)";
    } catch (const std::exception& e) {
        return e.what();
    }
}
}  // namespace

TEST_CASE("a damaged manifest's errors name the member, the shard and the reason, whatever bytes the names hold",
          "[format][manifest]") {
    temp_dir dir("manerr");
    synthetic_options o;
    o.records = 20;
    o.shard_size = 8192;
    write_synthetic(dir.str(), o);
    const std::string manifest = read_file(dir / "manifest.json");
    const auto m = detail::json::parse(manifest);
    const auto& shards = m.at("shards").as_array();
    REQUIRE(shards.size() >= 3);
    const std::string name0 = shards[0].at("file").as_string(), name1 = shards[1].at("file").as_string();
    const auto with_shard = [&](std::size_t k, const std::string& key, detail::json value) {
        detail::json list = detail::json::array();
        for (std::size_t j = 0; j < shards.size(); ++j) {
            detail::json e = shards[j];
            if (j == k) e.set(key, std::move(value));
            list.push(e);
        }
        detail::json edited = m;
        edited.set("shards", list);
        write_file(dir / "manifest.json", edited.dump());
    };

    // "records": 20.0 and "shards": {} name the member, and what is there.
    std::string edited = manifest;
    edited.replace(edited.find("\"records\": 20"), 13, "\"records\": 20.0");
    write_file(dir / "manifest.json", edited);
    CHECK_THAT(manifest_error(dir.str()), Catch::Contains("\"records\": expected a non-negative integer, not 20.0"));
    detail::json bad = m;
    bad.set("shards", detail::json::object());
    write_file(dir / "manifest.json", bad.dump());
    CHECK_THAT(manifest_error(dir.str()), Catch::Contains("\"shards\": expected an array, not an object"));
    // A shard's member: the shard by number and name, the member, the value.
    with_shard(1, "records", "x");
    CHECK_THAT(manifest_error(dir.str()),
               Catch::Contains("shard 1 (\"" + name1 + "\"): \"records\": expected a non-negative integer, not \"x\""));
    with_shard(1, "first_record", -3);
    CHECK_THAT(manifest_error(dir.str()), Catch::Contains("shard 1 (\"" + name1 + "\"): \"first_record\": expected a "
                                                          "non-negative integer, not -3"));
    // A count of 2^64 - 1 names its own shard (more records than its bytes hold), not the next
    // (whose first_record it would make wrong).
    with_shard(0, "records", ~std::uint64_t(0));
    std::string e = manifest_error(dir.str());
    CHECK_THAT(e, Catch::Contains("shard 0 (\"" + name0 + "\"): 18446744073709551615 records in ") &&
                      Catch::Contains("a shard holds at most (bytes - 104) / 40 records"));
    CHECK_THAT(e, !Catch::Contains(name1));
    // A sum past 2^64 - 1: 41 entries as large as the bytes allow; the 41st (shard 40) overflows.
    {
        const std::uint64_t bytes = ~std::uint64_t(0), records = (bytes - 104) / 40;
        detail::json list = detail::json::array();
        for (std::uint64_t k = 0; k < 41; ++k) {
            detail::json s = detail::json::object();
            s.set("file", "s" + std::to_string(k));
            s.set("records", records);
            s.set("first_record", k * records);
            s.set("bytes", bytes);
            list.push(s);
        }
        detail::json huge = m;
        huge.set("shards", list);
        write_file(dir / "manifest.json", huge.dump());
        CHECK_THAT(manifest_error(dir.str()),
                   Catch::Contains("shard 40 (\"s40\"): its " + std::to_string(records) + " records after the " +
                                   std::to_string(40 * records) + " of the shards before it make more than 2^64 - 1"));
    }
    // Names with a NUL or control bytes: refused or named escaped, and the reason still follows.
    // A NUL after a real shard's name would have opened that shard under another name.
    with_shard(0, "file", name0 + std::string(1, '\0') + "junk");
    e = manifest_error(dir.str());
    CHECK_THAT(e, Catch::Contains("shard 0 (\"" + name0 + "\\u0000junk\"): not a plain file name"));
    with_shard(1, "file", "evil\n\x1b[31m/x");
    e = manifest_error(dir.str());
    CHECK_THAT(e, Catch::Contains("shard 1 (\"evil\\n\\u001b[31m/x\"): not a plain file name"));
    CHECK(e.find('\n') == std::string::npos);
    // The shard table's members, named under "shard_table".
    detail::json t = detail::json::object();
    t.set("file", 5);
    detail::json only_table = detail::json::object();
    for (const auto& member : m.as_object())
        if (member.first != "shards") only_table.set(member.first, member.second);
    only_table.set("shard_table", t);
    write_file(dir / "manifest.json", only_table.dump());
    CHECK_THAT(manifest_error(dir.str()), Catch::Contains("\"shard_table\": \"file\": expected a string, not 5"));

    write_file(dir / "manifest.json", manifest);
    CHECK(manifest_error(dir.str()) == "(opened)");
}
