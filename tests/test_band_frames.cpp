// Format 1.1: band-frame records (codec 2), the version the writer declares, how a 1.0 reader
// meets a 1.1 shard, damaged frames, and the --compression auto rule.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
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

}  // namespace

TEST_CASE("band-frame records round-trip exactly for every band height, layout and task", "[format][bands]") {
    for (auto layout : {detail::layout_code::one_hot, detail::layout_code::index}) {
        for (std::uint32_t band_rows : {1u, 5u, 12u, 0u}) {
            for (bool seg : {true, false}) {
                temp_dir dir("bands");
                synthetic_options o;
                o.layout = layout;
                o.segmentation = seg;
                o.band_rows = band_rows;
                o.records = 4;
                const auto samples = write_synthetic(dir.str(), o);
                const std::string shard = only_shard(dir.str());
                detail::shard_file f(shard, "s");
                INFO("layout " << int(layout) << ", band rows " << band_rows << ", seg " << seg);
                REQUIRE(f.header().minor == 1);
                REQUIRE(f.header().required_features == detail::feature_band_frames);
                std::size_t banded = 0;
                for (std::size_t i = 0; i < f.record_count(); ++i) banded += f.entry(i).codec == detail::codec_zstd_bands;
                if (band_rows != 1) REQUIRE(banded == f.record_count());  // 1-row bands of a tiny image do not pay
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
    for (const auto& e : {expectation{record_codec::zstd, 1, detail::feature_band_frames, "1.1"},
                          expectation{record_codec::automatic, 1, detail::feature_band_frames, "1.1"},
                          expectation{record_codec::zstd_record, 0, detail::feature_zstd_records, "1.0"},
                          expectation{record_codec::none, 0, 0, "1.0"}}) {
        temp_dir dir("minor");
        synthetic_options o;
        o.codec = e.codec;
        o.records = 3;
        const auto samples = write_synthetic(dir.str(), o);
        const std::string bytes = read_file(only_shard(dir.str()));
        INFO("codec " << word_of(compression_words, e.codec));
        REQUIRE(header_minor(bytes) == e.minor);
        REQUIRE(detail::load_u64(reinterpret_cast<const unsigned char*>(bytes.data()) + 16) == e.features);
        REQUIRE(read_file(dir / "manifest.json").find(std::string("\"format_version\": \"") + e.manifest_version + "\"") !=
                std::string::npos);
        // What a 1.0 reader knows: it reads the 1.0 files and refuses the 1.1 ones at open.
        if (e.minor == 0) {
            REQUIRE_NOTHROW(detail::shard_file(only_shard(dir.str()), "s", detail::known_required_features_1_0));
        } else {
            REQUIRE_THROWS_WITH(detail::shard_file(only_shard(dir.str()), "s", detail::known_required_features_1_0),
                                Catch::Contains("required feature bits 0x0000000000000002") &&
                                    Catch::Contains("a newer shardpack reader is needed"));
        }
        auto ds = dataset::open(dir.str());
        for (std::size_t i = 0; i < samples.size(); ++i) {
            const auto s = ds.at(i);
            REQUIRE(std::equal(s.image().begin(), s.image().end(), samples[i].image.pixels.begin()));
        }
    }
}

TEST_CASE("a band-frame record in a shard without the feature bit is refused at open", "[format][bands][version]") {
    temp_dir dir("nobit");
    synthetic_options o;
    o.records = 2;
    write_synthetic(dir.str(), o);
    const std::string shard = only_shard(dir.str());
    std::string bytes = read_file(shard);
    bytes[16] = 0;  // clear required bit 1
    auto* p = reinterpret_cast<unsigned char*>(bytes.data());
    const std::size_t size = bytes.size();
    const std::uint64_t index_offset = detail::load_u64(p + size - 40);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, p, detail::load_u32(p + 12));
    XXH3_64bits_update(&st, p + index_offset, 2 * 40);
    detail::store_u64(p + size - 24, XXH3_64bits_digest(&st));
    write_file(shard, bytes);
    REQUIRE_THROWS_WITH(detail::shard_file(shard, "s"), Catch::Contains("record 0: band-frame record in a shard that does not declare"));
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
        REQUIRE(table.bands == 8);
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
        for (std::uint32_t band_rows : {1u, 4u, 11u}) {
            temp_dir band_dir("banded");
            o.codec = record_codec::zstd;
            o.band_rows = band_rows;
            write_synthetic(band_dir.str(), o);
            if (band_rows != 1) {  // (1-row bands of a tiny image may not pay: stored otherwise)
                detail::shard_file f(only_shard(band_dir.str()), "s");
                for (std::size_t i = 0; i < f.record_count(); ++i) REQUIRE(f.entry(i).codec == detail::codec_zstd_bands);
            }
            const auto banded = dataset::open(band_dir.str());
            const std::vector<std::size_t> which = {4, 0, 2, 4};
            for (bool channels_first : {false, true})
                for (unsigned want : {1u, 2u, 4u, 8u, 16u, 32u, 64u, 1u | 64u, 1u | 4u, 127u}) {
                    INFO("layout " << int(v.layout) << ", channels " << v.channels << ", classes " << v.classes
                                   << ", band rows " << band_rows << ", channels first " << channels_first
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
                REQUIRE(std::memcmp(got.data(), want.data(), values * sizeof(float)) == 0);
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
