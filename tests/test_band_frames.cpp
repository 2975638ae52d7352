// Band-frame records: codec 2 (format 1.1, one band height) and codec 3 (format 1.3, a height per
// region, the label's chosen from the data), the version the writer declares, how older readers
// meet newer shards, damaged tables and frames, and the --compression auto rule.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <memory>
#include <random>

#include "pipeline/option_names.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

std::uint16_t header_minor(const std::string& shard_bytes) {
    return detail::load_u16(reinterpret_cast<const unsigned char*>(shard_bytes.data()) + 10);
}

std::vector<std::uint8_t> one_hot_of(const synthetic_sample& s, std::uint32_t classes) {
    std::vector<std::uint8_t> v(s.ids.size() * classes, 0);
    for (std::size_t p = 0; p < s.ids.size(); ++p)
        if (s.ids[p] < classes) v[p * classes + s.ids[p]] = 1;
    return v;
}

// A decoded record of `rows` rows whose first `noisy_rows` rows are random bytes and the others
// constant, so that how much zstd saves is chosen by the caller.
std::vector<unsigned char> record_with_noise(const detail::schema_record& schema, std::uint32_t rows, std::uint32_t noisy_rows) {
    image_u8 img{64, rows, 3, std::vector<std::uint8_t>(std::size_t(64) * rows * 3, 7)};
    std::mt19937 rng(5);
    for (std::size_t i = 0; i < std::size_t(64) * noisy_rows * 3; ++i) img.pixels[i] = static_cast<std::uint8_t>(rng());
    std::vector<unsigned char> decoded;
    encode_record(schema, "k", img, nullptr, 0, decoded);
    return decoded;
}

// What a batch of crops (`a`, samples `which`) delivers, as one byte string: the RGB images, then
// the one-hot labels of `classes` classes, then (with `with_ids`) each pixel's class id as a byte.
std::vector<std::uint8_t> crop_batch_bytes(const dataset& ds, const std::vector<std::size_t>& which, const augmentation& a,
                                           std::uint32_t classes, bool with_ids) {
    const std::size_t pixels = std::size_t(a.height) * a.width * which.size();
    std::vector<std::uint8_t> image(pixels * 3), one_hot(pixels * classes);
    std::vector<std::uint16_t> ids(with_ids ? pixels : 0);
    sample_buffers out;
    out.image_u8 = image.data();
    out.image_capacity = image.size();
    out.label_u8 = one_hot.data();
    out.label_capacity = one_hot.size();
    if (with_ids) {
        out.label_index = ids.data();
        out.label_index_capacity = ids.size();
    }
    out.augment = &a;
    read_context ctx;
    ds.read_batch(which.data(), which.size(), out, ctx);
    image.insert(image.end(), one_hot.begin(), one_hot.end());
    for (std::uint16_t id : ids) image.push_back(static_cast<std::uint8_t>(id));
    return image;
}
}  // namespace

TEST_CASE("band-frame records round-trip exactly for every band height, layout and task", "[format][bands]") {
    struct heights {
        std::uint32_t band_rows, label_band_rows;  // 0, 0: the writer's defaults
    };
    for (auto layout : {detail::layout_code::one_hot, detail::layout_code::index}) {
        for (const auto h : {heights{1, 0}, heights{5, 0}, heights{12, 0}, heights{0, 0}, heights{5, 3}, heights{0, 7},
                             heights{2, 12}, heights{12, 1}}) {
            for (bool seg : {true, false}) {
                temp_dir dir("bands");
                synthetic_options o;
                o.layout = layout;
                o.segmentation = seg;
                o.band_rows = h.band_rows;
                o.label_band_rows = h.label_band_rows;
                o.records = 4;
                const auto samples = write_synthetic(dir.str(), o);
                const std::string shard = only_shard(dir.str());
                detail::shard_file f(shard, "s");
                INFO("layout " << int(layout) << ", band rows " << h.band_rows << ", label band rows " << h.label_band_rows
                               << ", seg " << seg);
                // Codec 3 where the heights may differ: segmentation with a height from the data or a label height.
                const bool per_region = seg && (h.band_rows == 0 || h.label_band_rows != 0);
                REQUIRE(f.header().minor == (per_region ? 3 : 1));
                REQUIRE(f.header().required_features ==
                        (detail::feature_band_frames | (per_region ? detail::feature_region_bands : 0)));
                std::size_t banded = 0;
                for (std::size_t i = 0; i < f.record_count(); ++i)
                    banded += f.entry(i).codec == (per_region ? detail::codec_zstd_region_bands : detail::codec_zstd_bands);
                if (h.band_rows == 0 || h.band_rows > 2) REQUIRE(banded == f.record_count());  // 1-, 2-row bands of a tiny image do not pay
                if (per_region && h.label_band_rows && banded) {  // the table holds both heights
                    const auto e = f.entry(0);
                    REQUIRE(detail::load_u32(f.bytes() + e.offset + 64) == (h.band_rows ? h.band_rows : 12));
                    REQUIRE(detail::load_u32(f.bytes() + e.offset + 68) == std::min(h.label_band_rows, 12u));
                }
                auto ds = dataset::open(dir.str());
                read_context ctx;
                for (std::size_t i = 0; i < samples.size(); ++i) {
                    const auto s = ds.at(i);
                    REQUIRE(s.key() == samples[i].key);
                    REQUIRE(std::equal(s.image().begin(), s.image().end(), samples[i].image.pixels.begin()));
                    if (seg) REQUIRE(s.one_hot() == one_hot_of(samples[i], 4));
                    else REQUIRE(s.class_id() == samples[i].class_id);
                    // read_into, decompressing straight into the caller's buffers.
                    std::vector<std::uint8_t> image(12 * 16 * 3), label(seg ? 12 * 16 * 4 : 4);
                    sample_buffers out;
                    out.image_u8 = image.data();
                    out.image_capacity = image.size();
                    out.label_u8 = label.data();
                    out.label_capacity = label.size();
                    ds.read_into(i, out, ctx);
                    REQUIRE(image == samples[i].image.pixels);
                    if (seg) REQUIRE(label == one_hot_of(samples[i], 4));
                }
            }
        }
    }
}

TEST_CASE("the writer declares 1.1 only where it writes band frames, 1.0 files stay readable", "[format][bands][version]") {
    struct expectation {
        record_codec codec;
        std::uint16_t minor;
        std::uint64_t features;
        const char* manifest_version;
    };
    struct build {
        expectation e;
        bool seg;
        std::uint32_t band_rows;
    };
    const std::uint64_t region_bands = detail::feature_band_frames | detail::feature_region_bands;
    for (const auto& [e, seg, band_rows] :
         {build{{record_codec::zstd, 3, region_bands, "1.3"}, true, 0},
          build{{record_codec::automatic, 3, region_bands, "1.3"}, true, 0},
          build{{record_codec::zstd, 1, detail::feature_band_frames, "1.1"}, true, 4},  // one height: codec 2
          build{{record_codec::zstd, 1, detail::feature_band_frames, "1.1"}, false, 0},
          build{{record_codec::automatic, 1, detail::feature_band_frames, "1.1"}, false, 0},
          build{{record_codec::zstd_record, 0, detail::feature_zstd_records, "1.0"}, true, 0},
          build{{record_codec::none, 0, 0, "1.0"}, true, 0}}) {
        temp_dir dir("minor");
        synthetic_options o;
        o.codec = e.codec;
        o.segmentation = seg;
        o.band_rows = band_rows;
        o.records = 3;
        const auto samples = write_synthetic(dir.str(), o);
        const std::string bytes = read_file(only_shard(dir.str()));
        INFO("codec " << word_of(compression_words, e.codec) << ", seg " << seg << ", band rows " << band_rows);
        REQUIRE(header_minor(bytes) == e.minor);
        REQUIRE(detail::load_u64(reinterpret_cast<const unsigned char*>(bytes.data()) + 16) == e.features);
        REQUIRE(read_file(dir / "manifest.json").find(std::string("\"format_version\": \"") + e.manifest_version + "\"") !=
                std::string::npos);
        // What a 1.0 reader knows: it reads the 1.0 files and refuses the 1.1 ones at open; a 1.1
        // reader reads 1.1 files and refuses 1.3 ones (codec 3) at open.
        if (e.minor == 0) {
            REQUIRE_NOTHROW(detail::shard_file(only_shard(dir.str()), "s", detail::known_required_features_1_0));
        } else {
            REQUIRE_THROWS_WITH(detail::shard_file(only_shard(dir.str()), "s", detail::known_required_features_1_0),
                                Catch::Contains(e.minor == 3 ? "required feature bits 0x0000000000000006"
                                                             : "required feature bits 0x0000000000000002") &&
                                    Catch::Contains("a newer shardpack reader is needed"));
        }
        if (e.minor == 3) {
            REQUIRE_THROWS_WITH(detail::shard_file(only_shard(dir.str()), "s", detail::known_required_features_1_1),
                                Catch::Contains("required feature bits 0x0000000000000004") &&
                                    Catch::Contains("a newer shardpack reader is needed"));
        } else {
            REQUIRE_NOTHROW(detail::shard_file(only_shard(dir.str()), "s", detail::known_required_features_1_1));
        }
        auto ds = dataset::open(dir.str());
        for (std::size_t i = 0; i < samples.size(); ++i) {
            const auto s = ds.at(i);
            REQUIRE(std::equal(s.image().begin(), s.image().end(), samples[i].image.pixels.begin()));
        }
    }
}

TEST_CASE("a band-frame record in a shard without the feature bit is refused at open", "[format][bands][version]") {
  for (const bool per_region : {false, true}) {
    temp_dir dir("nobit");
    synthetic_options o;
    o.records = 2;
    o.band_rows = per_region ? 0 : 4;
    write_synthetic(dir.str(), o);
    const std::string shard = only_shard(dir.str());
    std::string bytes = read_file(shard);
    bytes[16] = per_region ? 0x02 : 0;  // clear required bit 2 (codec 3) or bit 1 (codec 2)
    auto* p = reinterpret_cast<unsigned char*>(bytes.data());
    const std::size_t size = bytes.size();
    const std::uint64_t index_offset = detail::load_u64(p + size - 40);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, p, detail::load_u32(p + 12));
    XXH3_64bits_update(&st, p + index_offset, 2 * 40);
    detail::store_u64(p + size - 24, XXH3_64bits_digest(&st));
    write_file(shard, bytes);
    REQUIRE_THROWS_WITH(detail::shard_file(shard, "s"),
                        Catch::Contains(per_region ? "record 0: record with per-region band heights in a shard that does not declare"
                                                   : "record 0: band-frame record in a shard that does not declare"));
  }
}

TEST_CASE("damaged band tables and frames are refused, naming the record", "[format][bands][damage]") {
    temp_dir dir("bandbad");
    synthetic_options o;
    o.records = 3;
    o.band_rows = 5;  // 3 bands of 12 rows: 5, 5, 2
    write_synthetic(dir.str(), o);
    const std::string shard = only_shard(dir.str());
    const std::string clean = read_file(shard);
    detail::shard_file f(shard, "s");
    const auto e = f.entry(1);
    REQUIRE(e.codec == detail::codec_zstd_bands);
    const std::size_t table = std::size_t(e.offset) + 64;  // image_offset is 64 for these short keys
    open_options lax;
    lax.verify_checksums = false;  // reach the band checks; with checksums on the damage is found first
    struct damage {
        const char* what;
        std::function<void(std::string&)> apply;
        const char* message;
    };
    const std::uint64_t frame0 = table + 8 + 8 * 6;
    const std::vector<damage> cases = {
        {"band rows 0", [&](std::string& b) { detail::store_u32(reinterpret_cast<unsigned char*>(&b[table]), 0); }, "band rows 0"},
        {"band rows over the height", [&](std::string& b) { detail::store_u32(reinterpret_cast<unsigned char*>(&b[table]), 13); },
         "band rows 13"},
        {"frame count", [&](std::string& b) { b[table + 4] = 5; }, "lists 5 frames, 6 expected"},
        {"frame size", [&](std::string& b) { b[table + 8] = static_cast<char>(b[table + 8] + 1); }, "band frame"},
        {"frame magic", [&](std::string& b) { b[frame0] ^= 0x40; }, "band frame 0"},
        {"raw flag on a zstd frame", [&](std::string& b) { b[table + 8 + 7] = static_cast<char>(0x80); }, "raw band 0 is"},
        {"block type", [&](std::string& b) { b[frame0 + 6] ^= 0x04; }, "band frame 0"},  // 1-byte FCS: block header at 6
    };
    for (const auto& d : cases) {
        INFO(d.what);
        std::string bytes = clean;
        d.apply(bytes);
        write_file(shard, bytes);
        auto ds = dataset::open(dir.str(), lax);
        REQUIRE_NOTHROW(ds.at(0));
        bool refused = false;
        try {
            ds.at(1);
            read_context ctx;
            std::vector<std::uint8_t> image(12 * 16 * 3);
            sample_buffers out;
            out.image_u8 = image.data();
            out.image_capacity = image.size();
            ds.read_into(1, out, ctx);
        } catch (const shardpack::error& ex) {
            refused = true;
            const std::string m = ex.what();
            REQUIRE_THAT(m, Catch::Contains("record 1 (dataset index 1)") && Catch::Contains(d.message));
        }
        REQUIRE(refused);
        // With checksums on (the default) the same damage is a checksum mismatch of that record.
        REQUIRE_THROWS_WITH(dataset::open(dir.str()).at(1), Catch::Contains("record 1 (dataset index 1): checksum mismatch"));
    }
    write_file(shard, clean);
}

TEST_CASE("compression auto compresses a band only where zstd saves at least half of it", "[format][bands][auto]") {
    synthetic_options so;
    so.segmentation = false;
    const detail::schema_record schema = [&] {
        auto s = synthetic_schema(so);
        s.fixed_height = s.fixed_width = 0;
        return s;
    }();
    // 32 rows in bands of 4: noisy bands (random bytes) do not compress, constant ones do.
    record_compressor zstd(record_codec::zstd, 1, schema, 4), automatic(record_codec::automatic, 1, schema, 4);
    std::size_t raw_bands = 0, zstd_bands = 0;
    for (std::uint32_t noisy : {0u, 8u, 20u, 32u}) {
        const auto decoded = record_with_noise(schema, 32, noisy);
        stored_record z, a;
        zstd.compress(decoded, z);
        automatic.compress(decoded, a);
        INFO(noisy << " noisy rows of 32");
        if (noisy == 32) {  // every band raw: the record is stored raw
            REQUIRE(a.codec == detail::codec_raw);
            REQUIRE(z.codec == detail::codec_raw);
            REQUIRE(a.bytes == decoded);
            continue;
        }
        REQUIRE(a.codec == detail::codec_zstd_bands);
        const auto layout = detail::parse_record(schema, decoded.data(), decoded.size());
        const auto table = detail::parse_band_table(layout, a.bytes.data(), a.bytes.size());
        const auto ztable = detail::parse_band_table(layout, z.bytes.data(), z.bytes.size());
        REQUIRE(table.image_bands == 8);
        REQUIRE(table.label_bands == 0);
        for (std::uint32_t f = 0; f < table.frame_count(); ++f) {
            const std::uint64_t band_bytes = 4 * 64 * 3;
            // The rule, from what plain zstd made of the same band.
            const bool saves_half = !ztable.frame_raw(f) && 2 * ztable.frame_size(f) <= band_bytes;
            REQUIRE(table.frame_raw(f) == !saves_half);
            REQUIRE(table.frame_raw(f) == (f * 4 < noisy));  // exactly the noisy bands
            raw_bands += table.frame_raw(f);
            zstd_bands += !table.frame_raw(f);
        }
        // Read back through the reader's band decoder: the same record.
        ZSTD_DCtx* dctx = ZSTD_createDCtx();
        std::vector<unsigned char> back(decoded.size(), 0);
        std::memcpy(back.data(), a.bytes.data(), static_cast<std::size_t>(layout.image_offset));
        detail::decompress_bands(dctx, table, layout.height, 0, layout.height, back.data() + layout.image_offset, nullptr);
        ZSTD_freeDCtx(dctx);
        REQUIRE(back == decoded);
    }
    REQUIRE(raw_bands >= 2);  // the rule is exercised on both sides
    REQUIRE(zstd_bands >= 2);
}

namespace {

// Every output of read_batch for `which`, with the outputs named in `want` only (the others
// null), so that both the straight-into-the-caller paths (one output alone) and the band-by-band
// conversions run. The images and labels of all outputs are appended into one byte string.
std::string read_outputs(const dataset& ds, const std::vector<std::size_t>& which, bool channels_first, unsigned want) {
    const auto& sc = ds.schema();
    const std::size_t pixels = sc.fixed_height * sc.fixed_width, n = which.size(), k = sc.class_count;
    std::vector<std::uint8_t> image_u8(n * pixels * sc.channels), label_u8(n * pixels * k), index_u8(n * pixels);
    std::vector<float> image_f32(image_u8.size()), label_f32(label_u8.size());
    std::vector<std::uint16_t> index(n * pixels);
    std::vector<std::int64_t> index_i64(n * pixels);
    sample_buffers out;
    out.channels_first = channels_first;
    out.norm = normalization::imagenet();
    out.image_capacity = image_u8.size();
    out.label_capacity = label_u8.size();
    out.label_index_capacity = index.size();
    if (want & 1) out.image_u8 = image_u8.data();
    if (want & 2) out.image_f32 = image_f32.data();
    if (want & 4) out.label_u8 = label_u8.data();
    if (want & 8) out.label_f32 = label_f32.data();
    if (want & 16) out.label_index = index.data();
    if (want & 32) out.label_index_i64 = index_i64.data();
    if ((want & 64) && k <= 255) out.label_index_u8 = index_u8.data();
    read_context ctx;
    ds.read_batch(which.data(), n, out, ctx);
    std::string all;
    auto add = [&all](const auto& v) { all.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0])); };
    add(image_u8), add(image_f32), add(label_u8), add(label_f32), add(index), add(index_i64), add(index_u8);
    return all;
}

}  // namespace

// Band records are converted band by band (read_slot), the others whole (dataset::fill): the
// results must be the same bytes for every output, alone and together, every layout, channel
// count and class count (the one-hot scan reads 8 bytes a pixel up to 8 classes and byte by byte
// beyond), and band heights that do and do not divide the height. About 1 s.
TEST_CASE("band-by-band conversions give the whole-record conversions' bytes for every output", "[format][bands][reader]") {
    struct variant {
        detail::layout_code layout;
        std::uint32_t channels, classes;
    };
    const variant variants[] = {
        {detail::layout_code::one_hot, 3, 6}, {detail::layout_code::one_hot, 1, 1}, {detail::layout_code::one_hot, 4, 8},
        {detail::layout_code::one_hot, 3, 9}, {detail::layout_code::one_hot, 3, 2}, {detail::layout_code::index, 3, 5},
        {detail::layout_code::index, 1, 300},
    };
    for (const auto& v : variants) {
        synthetic_options o;
        o.layout = v.layout;
        o.channels = v.channels;
        o.classes = v.classes;
        o.width = 13;
        o.height = 11;
        o.records = 5;
        temp_dir whole_dir("whole");
        o.codec = record_codec::none;
        write_synthetic(whole_dir.str(), o);
        const auto whole = dataset::open(whole_dir.str());
        // Codec 2 at three heights, codec 3 with the label's height from the data, and codec 3
        // with a label height other than the image's (4 and 3, 1 and 11).
        for (const auto [band_rows, label_band_rows] : {std::pair{1u, 0u}, {4u, 0u}, {11u, 0u}, {0u, 0u}, {4u, 3u}, {1u, 11u}}) {
            temp_dir band_dir("banded");
            o.codec = record_codec::zstd;
            o.band_rows = band_rows;
            o.label_band_rows = label_band_rows;
            write_synthetic(band_dir.str(), o);
            if (band_rows != 1) {  // (1-row bands of a tiny image may not pay: stored otherwise)
                detail::shard_file f(only_shard(band_dir.str()), "s");
                const std::uint32_t codec = band_rows && !label_band_rows ? detail::codec_zstd_bands : detail::codec_zstd_region_bands;
                for (std::size_t i = 0; i < f.record_count(); ++i) REQUIRE(f.entry(i).codec == codec);
            }
            const auto banded = dataset::open(band_dir.str());
            const std::vector<std::size_t> which = {4, 0, 2, 4};
            for (bool channels_first : {false, true})
                for (unsigned want : {1u, 2u, 4u, 8u, 16u, 32u, 64u, 1u | 64u, 1u | 4u, 127u}) {
                    INFO("layout " << int(v.layout) << ", channels " << v.channels << ", classes " << v.classes
                                   << ", band rows " << band_rows << "/" << label_band_rows << ", channels first " << channels_first
                                   << ", outputs " << want);
                    REQUIRE(read_outputs(banded, which, channels_first, want) ==
                            read_outputs(whole, which, channels_first, want));
                }
        }
    }
}

// The one-hot scan (8 bytes a pixel up to 8 classes) names the first class whose byte is set and
// the ignore value where none is, for every class count, pixel count and position, the last
// pixels included (their 8-byte load would run past the label: they are read byte by byte).
TEST_CASE("the one-hot scan finds each pixel's class and the ignore value, to the last pixel", "[reader]") {
    std::mt19937 rng(11);
    for (std::uint32_t k = 1; k <= 10; ++k)
        for (std::size_t pixels : {std::size_t(1), std::size_t(2), std::size_t(3), std::size_t(7), std::size_t(64)}) {
            detail::schema_record s;
            s.task = detail::task_code::segmentation;
            s.label_layout = detail::layout_code::one_hot;
            s.class_count = k;
            s.ignore_value = 255;
            std::vector<unsigned char> label(pixels * k, 0);
            std::vector<std::uint32_t> want(pixels);
            for (std::size_t p = 0; p < pixels; ++p) {
                const std::uint32_t c = rng() % (k + 1);  // k: ignored, all zeros
                want[p] = c < k ? c : 255;
                if (c < k) label[p * k + c] = static_cast<unsigned char>(1 + rng() % 255);
                // a second set byte after the first must not change the answer
                if (c + 1 < k && rng() % 3 == 0) label[p * k + c + 1] = 1;
            }
            std::vector<std::uint32_t> got(pixels, 1000);
            detail::for_each_stored_class(s, label.data(), pixels, [&got](std::size_t p, std::uint32_t c) { got[p] = c; });
            INFO("classes " << k << ", pixels " << pixels);
            REQUIRE(got == want);
        }
}

// Index labels into every label output (one-hot uint8 and float32, interleaved and planar; class
// ids as uint16, int64 and uint8): the vector loops (16 pixels a step, SSSE3 shuffles where the
// CPU has them, SSE2 widening) give what a per-pixel reference gives, for every class count up to
// the shuffles' 16 and past it, ids at and past the class count (the ignore value: an all-zero
// one-hot pixel), and spans of every length around the steps at odd places in the record, which
// leave every byte outside the span as it was. uint16 ids (the scalar path) alike. About 0.2 s.
TEST_CASE("index labels convert to every label output as a per-pixel reference says, vector loops or not", "[reader]") {
    std::mt19937 rng(23);
    const std::size_t pixels = 1000;
    const std::pair<std::size_t, std::size_t> spans[] = {{0, pixels}, {0, 1},   {3, 15},  {5, 16},   {7, 17},  {1, 31},
                                                         {2, 33},     {11, 47}, {64, 49}, {517, 483}, {999, 1}, {100, 0}};
    struct variant {
        std::uint32_t classes, dtype_bytes;
    };
    std::vector<variant> variants;
    for (std::uint32_t k : {1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 12u, 15u, 16u, 17u, 40u, 255u}) variants.push_back({k, 1});
    variants.push_back({6, 2});
    variants.push_back({300, 2});
    for (const variant& v : variants) {
        detail::schema_record s;
        s.task = detail::task_code::segmentation;
        s.label_layout = detail::layout_code::index;
        s.label_dtype_bytes = static_cast<std::uint8_t>(v.dtype_bytes);
        s.class_count = v.classes;
        s.ignore_value = v.dtype_bytes == 1 ? 255u : 65535u;
        const std::size_t k = v.classes;
        const std::uint32_t id_limit = v.dtype_bytes == 1 ? 256u : 65536u;
        std::vector<std::uint32_t> ids(pixels);
        for (auto& id : ids) {
            const std::uint32_t r = rng() % 10;
            id = r == 0 ? s.ignore_value : r == 1 ? std::uint32_t(k + rng() % (id_limit - k)) : std::uint32_t(rng() % k);
        }
        std::vector<unsigned char> stored(pixels * v.dtype_bytes);
        for (std::size_t p = 0; p < pixels; ++p) {
            if (v.dtype_bytes == 1) stored[p] = static_cast<unsigned char>(ids[p]);
            else detail::store_u16(stored.data() + 2 * p, static_cast<std::uint16_t>(ids[p]));
        }
        for (const auto& [first, count] : spans)
            for (bool planar : {false, true}) {
                INFO("classes " << k << ", id bytes " << v.dtype_bytes << ", span " << first << "+" << count << ", planar " << planar);
                // Outputs prefilled with a marker, the span converted from its stored ids alone.
                std::vector<std::uint8_t> one_hot(pixels * k, 7), index_u8(pixels, 7);
                std::vector<float> one_hot_f32(pixels * k, 7.0f);
                std::vector<std::uint16_t> index(pixels, 7);
                std::vector<std::int64_t> index_i64(pixels, 7);
                sample_buffers out;
                out.label_u8 = one_hot.data();
                out.label_f32 = one_hot_f32.data();
                out.label_capacity = one_hot.size();
                out.label_index = index.data();
                out.label_index_i64 = index_i64.data();
                if (k <= 255) out.label_index_u8 = index_u8.data();
                out.label_index_capacity = pixels;
                out.channels_first = planar;
                // The span's ids in a buffer of their size: a read past them is seen by ASan.
                const std::vector<unsigned char> span_ids(stored.begin() + std::ptrdiff_t(first * v.dtype_bytes),
                                                          stored.begin() + std::ptrdiff_t((first + count) * v.dtype_bytes));
                const unsigned char* label = count ? span_ids.data() : stored.data() + first * v.dtype_bytes;  // never null
                detail::fill_label_span(s, label, detail::pixel_span{first, count, pixels}, out, 0);
                // Every value of every output against the reference; the first wrong one named.
                std::size_t wrong = 0;
                std::string first_wrong;
                const auto expect = [&](bool ok, std::size_t p, const char* output) {
                    if (ok) return;
                    if (wrong++ == 0) first_wrong = std::string(output) + " at pixel " + std::to_string(p) + " (id " + std::to_string(ids[p]) + ")";
                };
                for (std::size_t p = 0; p < pixels; ++p) {
                    const bool in = p >= first && p < first + count;
                    for (std::size_t c = 0; c < k; ++c) {
                        const std::size_t at = planar ? c * pixels + p : p * k + c;
                        const int want = in ? int(ids[p] == c) : 7;
                        expect(one_hot[at] == want, p, "one-hot uint8");
                        expect(one_hot_f32[at] == float(want), p, "one-hot float32");
                    }
                    expect(index[p] == (in ? ids[p] : 7u), p, "uint16 ids");
                    expect(index_i64[p] == (in ? std::int64_t(ids[p]) : 7), p, "int64 ids");
                    // (uint8 ids narrowed: a uint16 map's ignore value 65535 becomes 255)
                    if (k <= 255) expect(index_u8[p] == (in ? std::uint8_t(ids[p]) : 7u), p, "uint8 ids");
                }
                INFO(first_wrong);
                REQUIRE(wrong == 0);
            }
    }
}

// float32 images: the vector conversion (AVX2 where the CPU has it) gives, bit for bit, the
// scalar expression (v / 255 - mean) / stddev that the per-channel lookup table holds, for every
// byte value, channel count, length (the vector loop's 24-value steps and the scalar rest) and
// normalisation, extreme ones included; and a read's float32 planes (the table) and interleaved
// values (the vector loop) are the same numbers. About 0.1 s.
TEST_CASE("float32 image conversions give the scalar expression's bits, vector loop or not", "[reader]") {
    std::vector<normalization> norms = {normalization::unit(), normalization::imagenet()};
    normalization odd;
    const float means[4] = {0.5f, -3.25f, 1e-3f, 0.999f}, stddevs[4] = {1e-7f, 3.0f, 0.123456f, 1e6f};
    for (int c = 0; c < 4; ++c) {
        odd.mean[c] = means[c];
        odd.stddev[c] = stddevs[c];
    }
    norms.push_back(odd);
    std::mt19937 rng(3);
    for (const normalization& norm : norms)
        for (std::size_t n : {std::size_t(1), std::size_t(3), std::size_t(4)})
            for (std::size_t count : {std::size_t(0), std::size_t(1), std::size_t(23), std::size_t(24), std::size_t(25),
                                      std::size_t(47), std::size_t(96), std::size_t(768), std::size_t(1000)}) {
                const std::size_t values = count / n * n;
                std::vector<unsigned char> src(values + 8);  // + 8: a load past the end would be seen by ASan
                for (std::size_t i = 0; i < values; ++i) src[i] = values == 768 ? static_cast<unsigned char>(i / n) : static_cast<unsigned char>(rng());
                std::vector<float> got(values), want(values);
                detail::normalize_interleaved(src.data(), got.data(), values, n, norm);
                for (std::size_t i = 0; i < values; ++i)
                    want[i] = (float(src[i]) / 255.0f - norm.mean[i % n]) / norm.stddev[i % n];
                INFO("channels " << n << ", values " << values << ", mean " << norm.mean[0]);
                // An empty vector's data() may be null, which memcmp must not be given (UBSan).
                if (values != 0) REQUIRE(std::memcmp(got.data(), want.data(), values * sizeof(float)) == 0);
            }
    // Through the reader: NHWC float32 (the vector loop) and NCHW float32 (the table, 3 channels)
    // hold the same numbers.
    temp_dir dir("f32");
    synthetic_options o;
    o.width = 29;
    o.height = 7;
    o.records = 3;
    write_synthetic(dir.str(), o);
    const auto ds = dataset::open(dir.str());
    const std::size_t pixels = 29 * 7, c = ds.schema().channels;
    std::vector<float> nhwc(pixels * c), nchw(pixels * c);
    read_context ctx;
    for (std::size_t i = 0; i < ds.size(); ++i) {
        sample_buffers out;
        out.norm = normalization::imagenet();
        out.image_f32 = nhwc.data();
        out.image_capacity = nhwc.size();
        ds.read_into(i, out, ctx);
        out.image_f32 = nchw.data();
        out.channels_first = true;
        ds.read_into(i, out, ctx);
        for (std::size_t p = 0; p < pixels; ++p)
            for (std::size_t ch = 0; ch < c; ++ch)
                REQUIRE(std::memcmp(&nhwc[p * c + ch], &nchw[ch * pixels + p], sizeof(float)) == 0);
    }
}

namespace {

// The 8x8 segmentation record of the golden band shard (spec 16.4): index labels, image rows 0-3
// 0x11 and 4-7 0x22, label rows 0-3 class 0 and 4-7 class 1.
detail::schema_record small_seg_schema() { return golden_segmentation_options("", 8, 8).schema; }

std::vector<unsigned char> small_seg_record(const detail::schema_record& schema) {
    image_u8 img{8, 8, 3, std::vector<std::uint8_t>(192, 0x11)};
    std::fill(img.pixels.begin() + 96, img.pixels.end(), 0x22);
    std::uint16_t ids[64] = {};
    std::fill(std::begin(ids) + 32, std::end(ids), 1);
    std::vector<unsigned char> decoded;
    encode_record(schema, "b.png", img, ids, -1, decoded);
    return decoded;
}

// A dataset of one stored record, written as given (its checksum recomputed): a band record a
// conforming writer would never make reaches the reader.
void write_one_record(const std::string& dir, const detail::schema_record& schema, stored_record stored) {
    dataset_writer_options wo;
    wo.out_dir = dir;
    wo.schema = schema;
    wo.classes = {{"bg", true, 0, 0, 0}, {"fg", true, 255, 0, 0}};
    wo.codec = shard_codec::zstd_region_bands;
    wo.input_digest = "0000000000000000";
    stored.checksum = XXH3_64bits(stored.bytes.data(), stored.bytes.size());
    dataset_writer writer(wo);
    writer.add(stored);
    writer.publish();
}

std::string read_error(const std::string& dir) {
    try {
        dataset::open(dir).at(0);
    } catch (const shardpack::error& e) {
        return e.what();
    }
    return "";
}

}  // namespace

// Spec 10.3: each band entry is exactly one zstd frame. libzstd's ZSTD_decompressDCtx reads
// several concatenated frames and skips skippable ones, so the reader checks the entry's end
// itself; before format 1.3's text the reference reader accepted both.
TEST_CASE("a band entry holding a skippable frame or a second zstd frame after its frame is refused", "[format][bands][damage]") {
    const auto schema = small_seg_schema();
    const auto decoded = small_seg_record(schema);
    for (const std::uint32_t label_rows : {0u, 8u}) {  // codec 2 (band_rows 4), codec 3 (image 4, label 8)
        record_compressor compressor(record_codec::zstd, 1, schema, 4, label_rows);
        stored_record clean;
        compressor.compress(decoded, clean);
        REQUIRE(clean.codec == (label_rows ? detail::codec_zstd_region_bands : detail::codec_zstd_bands));
        const std::size_t fixed = label_rows ? detail::region_band_table_fixed_size : detail::band_table_fixed_size;
        const std::size_t table = 64 + fixed;  // image_offset 64
        const std::uint32_t frames = detail::load_u32(clean.bytes.data() + table - 4);
        const std::size_t frame0 = table + 8 * std::size_t(frames);
        const std::uint64_t size0 = detail::load_u64(clean.bytes.data() + table);
        // An empty zstd frame (content size 0) and a skippable frame with 4 bytes of payload.
        std::vector<unsigned char> empty_frame(ZSTD_compressBound(0));
        empty_frame.resize(ZSTD_compress(empty_frame.data(), empty_frame.size(), nullptr, 0, 1));
        const std::vector<unsigned char> skippable = {0x50, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 2, 3, 4};
        for (const auto& extra : {skippable, empty_frame}) {
            INFO("label rows " << label_rows << ", extra bytes " << extra.size());
            stored_record bad = clean;
            bad.bytes.insert(bad.bytes.begin() + static_cast<std::ptrdiff_t>(frame0 + size0), extra.begin(), extra.end());
            detail::store_u64(bad.bytes.data() + table, size0 + extra.size());
            // libzstd alone takes the entry: it decompresses to the band.
            std::vector<unsigned char> band(96);
            REQUIRE(ZSTD_decompress(band.data(), band.size(), bad.bytes.data() + frame0, size0 + extra.size()) == 96);
            temp_dir dir("extra");
            write_one_record(dir.str(), schema, bad);
            REQUIRE_THAT(read_error(dir.str()), Catch::Contains("record 0 (dataset index 0)") &&
                                                    Catch::Contains("band frame 0 is followed by " + std::to_string(extra.size()) +
                                                                    " more bytes"));
        }
        temp_dir dir("clean");
        write_one_record(dir.str(), schema, clean);
        REQUIRE(read_error(dir.str()).empty());
    }
}

// Spec 10.3 rule 3: the frame sizes are added without wrapping around 2^64. Four sizes each
// 2^62 too large add up to the right total modulo 2^64; the reader refuses the first.
TEST_CASE("band frame sizes that add up to the record only modulo 2^64 are refused", "[format][bands][damage]") {
    const auto schema = small_seg_schema();
    record_compressor compressor(record_codec::zstd, 1, schema, 4);
    stored_record stored;
    compressor.compress(small_seg_record(schema), stored);
    REQUIRE(detail::load_u32(stored.bytes.data() + 68) == 4);  // 2 bands x 2 regions
    std::uint64_t sum = 0;
    for (std::size_t f = 0; f < 4; ++f) {
        unsigned char* entry = stored.bytes.data() + 72 + 8 * f;
        detail::store_u64(entry, detail::load_u64(entry) + (std::uint64_t(1) << 62));
        REQUIRE((detail::load_u64(entry) & detail::band_stored_raw) == 0);
        sum += detail::load_u64(entry);
    }
    REQUIRE(sum == stored.bytes.size() - (72 + 32));  // wrapped: what a reader summing in u64 would see
    temp_dir dir("wrap");
    write_one_record(dir.str(), schema, stored);
    REQUIRE_THAT(read_error(dir.str()), Catch::Contains("band frame 0 runs past the stored record"));
}

TEST_CASE("damaged per-region band tables are refused, naming the record", "[format][bands][damage]") {
    const auto schema = small_seg_schema();
    record_compressor compressor(record_codec::zstd, 1, schema, 4, 8);  // image 2 bands, label 1: 3 frames
    stored_record clean;
    compressor.compress(small_seg_record(schema), clean);
    REQUIRE(clean.codec == detail::codec_zstd_region_bands);
    REQUIRE(detail::load_u32(clean.bytes.data() + 64) == 4);
    REQUIRE(detail::load_u32(clean.bytes.data() + 68) == 8);
    REQUIRE(detail::load_u32(clean.bytes.data() + 72) == 3);
    struct damage {
        std::size_t at;
        std::uint32_t value;
        const char* message;
    };
    for (const auto& d : {damage{68, 0, "label band rows 0 is not between 1 and the height 8"},
                          damage{68, 9, "label band rows 9 is not between 1 and the height 8"},
                          damage{68, 4, "band table lists 3 frames, 4 expected"},
                          damage{64, 8, "band table lists 3 frames, 2 expected"},
                          damage{72, 4, "band table lists 4 frames, 3 expected"}}) {
        INFO(d.message);
        stored_record bad = clean;
        detail::store_u32(bad.bytes.data() + d.at, d.value);
        temp_dir dir("region");
        write_one_record(dir.str(), schema, bad);
        REQUIRE_THAT(read_error(dir.str()), Catch::Contains("record 0 (dataset index 0)") && Catch::Contains(d.message));
    }
}

// Spec 10.3 and 13.3: --band-rows above a record's height gives bands of the whole height in that
// record (sizes vary between records, so the option is not refused), and the manifest keeps the
// option as given.
TEST_CASE("a band height above the record's height stores one band of the whole height", "[format][bands]") {
    temp_dir dir("tall");
    synthetic_options o;
    o.band_rows = 1000;
    o.records = 2;
    write_synthetic(dir.str(), o);
    detail::shard_file f(only_shard(dir.str()), "s");
    const auto e = f.entry(0);
    REQUIRE(e.codec == detail::codec_zstd_bands);
    REQUIRE(detail::load_u32(f.bytes() + e.offset + 64) == 12);  // the height, not 1000
    REQUIRE(detail::load_u32(f.bytes() + e.offset + 68) == 2);   // one band per region
}

// Crops read only the bands their rows lie in, each region at its own height: the same pixels
// and labels as crops of raw records at the same boxes. About 0.2 s.
TEST_CASE("crops of per-region band records equal crops of raw records", "[format][bands][augment]") {
    synthetic_options o;
    o.records = 6;
    o.width = 13;
    o.height = 11;
    o.codec = record_codec::none;
    temp_dir raw_dir("rawcrop");
    write_synthetic(raw_dir.str(), o);
    const auto raw = dataset::open(raw_dir.str());
    for (const auto [band_rows, label_band_rows] : {std::pair{4u, 3u}, {2u, 11u}, {11u, 1u}, {0u, 0u}}) {
        temp_dir band_dir("bandcrop");
        o.codec = record_codec::zstd;
        o.band_rows = band_rows;
        o.label_band_rows = label_band_rows;
        write_synthetic(band_dir.str(), o);
        const auto banded = dataset::open(band_dir.str());
        REQUIRE(banded.shard(0).entry(0).codec == detail::codec_zstd_region_bands);
        augmentation a;
        a.height = 5;
        a.width = 6;
        a.position = crop_position::random;
        a.seed = 3;
        const std::vector<std::size_t> which = {0, 1, 2, 3, 4, 5};
        for (std::uint64_t epoch : {0u, 1u, 2u}) {
            INFO("band rows " << band_rows << "/" << label_band_rows << ", epoch " << epoch);
            a.epoch = epoch;
            REQUIRE(crop_batch_bytes(banded, which, a, o.classes, false) == crop_batch_bytes(raw, which, a, o.classes, false));
        }
    }
}

// The writer's rule for codec 3 (spec 10.3.1, record_compressor.hpp): a label plane that zstd
// shrinks 32 times or more is one frame and the image is cut into bands of about 128 KiB; a label
// that shrinks less is cut at the image's height of about 256 KiB, as codec 2 cuts both. Records
// of 1024x100 RGB pixels (3072-byte rows: 42 rows a band at 128 KiB, 85 at 256 KiB). Under a second.
// A crop decompresses a band that its last row ends early in only up to that row (streaming zstd,
// where that skips 1/8 of the band or more: a label stored as one frame, mostly). Every window
// position of every height, so that crops end in every row of every band, flipped or not, of
// records whose label is one zstd frame or in bands, one-hot and index labels: the same bytes as
// the crop of the raw record. About 1 s.
TEST_CASE("a crop at every position of a band record equals that crop of the raw record", "[format][bands][augment]") {
    for (const auto layout : {detail::layout_code::one_hot, detail::layout_code::index}) {
        synthetic_options o;
        o.records = 3;
        o.width = 9;
        o.height = 40;
        o.classes = 5;
        o.layout = layout;
        o.codec = record_codec::none;
        temp_dir raw_dir("rawcrop");
        write_synthetic(raw_dir.str(), o);
        const auto raw = dataset::open(raw_dir.str());
        // Label one frame with image bands of 4 and 13 rows and one frame; both in bands of 7 rows.
        for (const auto [band_rows, label_band_rows] : {std::pair{4u, 40u}, {13u, 40u}, {40u, 40u}, {7u, 0u}}) {
            temp_dir band_dir("bandcrop");
            o.codec = record_codec::zstd;
            o.band_rows = band_rows;
            o.label_band_rows = label_band_rows;
            write_synthetic(band_dir.str(), o);
            const auto banded = dataset::open(band_dir.str());
            {  // the label frames are zstd frames (the partial decode is for those)
                detail::shard_file f(only_shard(band_dir.str()), "s");
                const auto schema = detail::decode_schema(reinterpret_cast<const unsigned char*>(f.schema_bytes().data()),
                                                          f.schema_bytes().size());
                for (std::size_t i = 0; i < f.record_count(); ++i) {
                    const detail::index_entry e = f.entry(i);
                    const unsigned char* stored = f.bytes() + e.offset;
                    const auto bands = detail::parse_band_table(detail::parse_record(schema, stored, e.decoded_size), stored,
                                                                e.stored_size, e.codec);
                    for (std::uint32_t b = 0; b < bands.label_bands; ++b) REQUIRE_FALSE(bands.frame_raw(bands.image_bands + b));
                }
            }
            for (std::uint32_t crop_height : {1u, 5u, 34u, 40u}) {
                const std::uint32_t crop_width = 4;
                std::vector<crop_box> boxes;
                for (std::uint32_t y = 0; y + crop_height <= o.height; ++y)
                    for (std::uint32_t x = 0; x + crop_width <= o.width; ++x) {
                        crop_box b;
                        b.y = y;
                        b.x = x;
                        b.hflip = (x + y) % 3 == 1;
                        b.vflip = (x + y) % 5 == 2;
                        boxes.push_back(b);
                    }
                augmentation a;
                a.height = crop_height;
                a.width = crop_width;
                a.position = crop_position::given;
                a.hflip = flip_mode::given;
                a.vflip = flip_mode::given;
                a.given = boxes.data();
                for (std::size_t record = 0; record < o.records; ++record) {
                    INFO("layout " << int(layout) << ", band rows " << band_rows << "/" << label_band_rows << ", crop height "
                                   << crop_height << ", record " << record);
                    const std::vector<std::size_t> which(boxes.size(), record);
                    REQUIRE(crop_batch_bytes(banded, which, a, o.classes, true) == crop_batch_bytes(raw, which, a, o.classes, true));
                }
            }
        }
    }
}

TEST_CASE("codec 3 cuts the image finer and keeps the label one frame only when the label shrinks 32 times", "[format][bands]") {
    detail::schema_record schema = golden_segmentation_options("", 0, 0).schema;  // sizes vary per record
    schema.class_count = 200;
    const std::uint32_t width = 1024, height = 100;
    image_u8 img{width, height, 3, std::vector<std::uint8_t>(std::size_t(width) * height * 3)};
    std::mt19937 rng(11);
    for (auto& p : img.pixels) p = static_cast<std::uint8_t>(rng() % 16);
    struct label_case {
        const char* what;
        std::uint32_t noisy_every;  // every this many pixels a random class, else class 0 (0: none)
        std::uint32_t image_rows, label_rows;
    };
    for (const auto& c : {label_case{"a mask of two regions", 0, 42, height}, label_case{"a noisy mask", 1, 85, 85},
                          label_case{"a mask with a random class every 16th pixel (shrinks < 32x)", 16, 85, 85}}) {
        std::vector<std::uint16_t> ids(std::size_t(width) * height, 0);
        std::fill(ids.begin() + ids.size() / 2, ids.end(), 1);
        if (c.noisy_every)
            for (std::size_t p = 0; p < ids.size(); p += c.noisy_every) ids[p] = static_cast<std::uint16_t>(rng() % 200);
        std::vector<unsigned char> decoded;
        encode_record(schema, "m.png", img, ids.data(), -1, decoded);
        record_compressor compressor(record_codec::zstd, 1, schema);
        REQUIRE(compressor.per_region());
        stored_record stored;
        compressor.compress(decoded, stored);
        INFO(c.what);
        REQUIRE(stored.codec == detail::codec_zstd_region_bands);
        const auto layout = detail::parse_record(schema, decoded.data(), decoded.size());
        const auto table = detail::parse_band_table(layout, stored.bytes.data(), stored.bytes.size(), stored.codec);
        REQUIRE(table.image_band_rows == c.image_rows);
        REQUIRE(table.label_band_rows == c.label_rows);
        // Whichever heights: the record reads back exactly.
        std::vector<unsigned char> back(decoded.size());
        std::memcpy(back.data(), stored.bytes.data(), std::size_t(layout.image_offset));
        std::unique_ptr<ZSTD_DCtx, decltype(&ZSTD_freeDCtx)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
        detail::decompress_bands(dctx.get(), table, height, 0, height, back.data() + layout.image_offset, back.data() + layout.label_offset);
        REQUIRE(back == decoded);
    }
}
