// Per-sample fields (format 1.5, issue 31): the golden vector, values round-tripping through every
// codec, boxes following read_batch's windows, old readers refusing the shards, damaged values
// refused.
#include <catch2/catch.hpp>

#include <cstring>

#include "format/record_compressor.hpp"
#include "errors.hpp"
#include "format/record_encoder.hpp"
#include "input/field_columns.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

std::string golden_vector(const std::string& name, const std::string& bytes) {
    const std::string path = std::string(SHARDPACK_TEST_FILES) + "/golden/" + name;
    if (std::getenv("SHARDPACK_UPDATE_GOLDEN")) write_file(path, hex_dump(bytes));
    return parse_hex_dump(read_file(path));
}

// A classification schema of w x h RGB records with one class and the seven kinds of field.
dataset_writer_options fields_options(const std::string& dir, std::uint32_t w, std::uint32_t h) {
    dataset_writer_options wo;
    wo.out_dir = dir;
    wo.schema.task = detail::task_code::classification;
    wo.schema.channels = 3;
    wo.schema.channel_order = detail::order_code::rgb;
    wo.schema.label_layout = detail::layout_code::class_id;
    wo.schema.label_dtype_bytes = 0;
    wo.schema.fixed_height = h;
    wo.schema.fixed_width = w;
    wo.schema.class_count = 1;
    wo.schema.ignore_value = 255;
    wo.schema.fields = {{"n", field_kind::int64, {}},        {"s", field_kind::float64, {}},
                        {"t", field_kind::string, {}},       {"il", field_kind::int64_list, {}},
                        {"fl", field_kind::float64_list, {}}, {"tags", field_kind::tags, {"a", "b", "c"}},
                        {"boxes", field_kind::boxes, {"x"}}};
    wo.classes = {{"cat", false, 0, 0, 0}};
    wo.codec = shard_codec::raw;
    return wo;
}

std::vector<field_value> values_of(std::int64_t n, double s, std::string t, std::vector<std::int64_t> il,
                                   std::vector<double> fl, std::vector<std::uint32_t> tags, std::vector<box> boxes) {
    std::vector<field_value> v(7);
    v[0].kind = field_kind::int64;
    v[0].ints = {n};
    v[1].kind = field_kind::float64;
    v[1].floats = {s};
    v[2].kind = field_kind::string;
    v[2].text = std::move(t);
    v[3].kind = field_kind::int64_list;
    v[3].ints = std::move(il);
    v[4].kind = field_kind::float64_list;
    v[4].floats = std::move(fl);
    v[5].kind = field_kind::tags;
    v[5].ids = std::move(tags);
    v[6].kind = field_kind::boxes;
    v[6].boxes = std::move(boxes);
    return v;
}

void require_same(const std::vector<field_value>& a, const std::vector<field_value>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        INFO("field " << i);
        REQUIRE(a[i].ints == b[i].ints);
        REQUIRE(a[i].floats == b[i].floats);
        REQUIRE(a[i].text == b[i].text);
        REQUIRE(a[i].ids == b[i].ids);
        REQUIRE(a[i].boxes == b[i].boxes);
    }
}

// `count` records of w x h with varied values, written with `codec`.
std::vector<std::vector<field_value>> write_fields_dataset(const std::string& dir, record_codec codec, std::uint32_t w,
                                                           std::uint32_t h, std::size_t count) {
    dataset_writer_options wo = fields_options(dir, w, h);
    wo.codec = shard_codec_for(codec, wo.schema, 0);
    std::vector<std::vector<field_value>> all;
    dataset_writer writer(wo);
    record_compressor compressor(codec, 1, wo.schema);
    for (std::size_t i = 0; i < count; ++i) {
        std::vector<box> boxes;
        for (std::size_t k = 0; k < i % 4; ++k) {
            const float x0 = float((i * 7 + k * 5) % (w - 4)) + 0.5f, y0 = float((i * 3 + k * 11) % (h - 4)) + 0.25f;
            boxes.push_back({x0, y0, std::min(float(w), x0 + 3.0f + float(k * 4)), std::min(float(h), y0 + 2.5f + float(i % 9)), 0});
        }
        std::vector<std::uint32_t> tags;
        for (std::uint32_t t = 0; t < 3; ++t)
            if ((i >> t) & 1) tags.push_back(t);
        all.push_back(values_of(std::int64_t(i) * -1000003, double(i) / 3.0, "row " + std::to_string(i),
                                std::vector<std::int64_t>(i % 3, std::int64_t(i)), std::vector<double>(i % 2, 1.5 * double(i)),
                                tags, boxes));
        std::vector<unsigned char> field_bytes;
        detail::encode_field_values(wo.schema.fields, all.back(), field_bytes);
        image_u8 img{w, h, 3, std::vector<std::uint8_t>(std::size_t(w) * h * 3, std::uint8_t(i))};
        std::vector<unsigned char> decoded;
        encode_record(wo.schema, "k" + std::to_string(i), img, nullptr, 0, decoded, &field_bytes);
        stored_record stored;
        compressor.compress(decoded, stored);
        writer.add(stored);
    }
    writer.publish();
    return all;
}

}  // namespace

TEST_CASE("the golden fields shard (format 1.5) matches its test vector in the spec byte for byte", "[fields][golden]") {
    temp_dir dir("golden15");
    dataset_writer_options wo = fields_options(dir.str(), 2, 2);
    const auto values = values_of(-7, 0.5, "hi", {1, -2}, {}, {0, 2}, {{0.5f, 0.0f, 2.0f, 1.5f, 0}});
    {
        dataset_writer writer(wo);
        std::vector<unsigned char> field_bytes;
        detail::encode_field_values(wo.schema.fields, values, field_bytes);
        image_u8 img{2, 2, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
        std::vector<unsigned char> decoded;
        encode_record(wo.schema, "d.png", img, nullptr, 0, decoded, &field_bytes);
        record_compressor raw(record_codec::none, 0);
        stored_record stored;
        raw.compress(decoded, stored);
        writer.add(stored);
        writer.publish();
    }
    const std::string bytes = read_file(only_shard(dir.str()));
    const std::string golden = golden_vector("fields_shard.hex", bytes);
    REQUIRE(hex_dump(bytes) == hex_dump(golden));
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    REQUIRE(detail::load_u16(p + 10) == 5);                              // version 1.5
    REQUIRE(detail::load_u64(p + 16) == detail::feature_fields);         // required feature bit 4 alone
    REQUIRE(read_file(dir / "manifest.json").find("\"format_version\": \"1.5\"") != std::string::npos);
    auto ds = dataset::open(dir.str());
    REQUIRE(ds.fields().size() == 7);
    REQUIRE(ds.fields()[5].vocabulary == std::vector<std::string>{"a", "b", "c"});
    const auto s = ds.at(0);
    REQUIRE(s.key() == "d.png");
    REQUIRE(s.image()[11] == 12);
    require_same(s.fields(), values);
    require_same(ds.fields(0), values);
}

TEST_CASE("a reader that does not know fields (1.3) refuses the shard, never misreads it", "[fields][versions]") {
    temp_dir dir("fields-old");
    write_fields_dataset(dir.str(), record_codec::none, 8, 6, 2);
    const std::string shard = only_shard(dir.str());
    REQUIRE_NOTHROW(detail::shard_file(shard, "s"));
    REQUIRE_THROWS_WITH(detail::shard_file(shard, "s", detail::known_required_features_1_3),
                        Catch::Contains("a newer shardpack reader is needed"));
    // The section without the feature bit (a writer that forgot it) is refused too: a 1.3 reader
    // would refuse its unknown required section, and this reader cannot trust the records' layout.
    std::string bytes = read_file(shard);
    auto* p = reinterpret_cast<unsigned char*>(bytes.data());
    detail::store_u64(p + 16, 0);
    const std::uint32_t header_length = detail::load_u32(p + 12);
    const std::uint64_t index_offset = detail::load_u64(p + bytes.size() - 40), count = detail::load_u64(p + bytes.size() - 32);
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, p, header_length);
    XXH3_64bits_update(&st, p + index_offset, count * 40);
    detail::store_u64(p + bytes.size() - 24, XXH3_64bits_digest(&st));
    write_file(dir / "edited.spk", bytes);
    REQUIRE_THROWS_WITH(detail::shard_file(dir / "edited.spk", "edited.spk"), Catch::Contains("without the fields feature bit"));
    REQUIRE_THROWS_WITH(detail::shard_file(dir / "edited.spk", "edited.spk", detail::known_required_features_1_3),
                        Catch::Contains("unknown required section type 3"));
}

TEST_CASE("field values round-trip through every codec, read from the prefix alone", "[fields]") {
    for (const record_codec codec : {record_codec::none, record_codec::zstd_record, record_codec::zstd, record_codec::automatic}) {
        temp_dir dir("fields-codec");
        const auto all = write_fields_dataset(dir.str(), codec, 40, 30, 12);
        for (const bool mmap : {true, false}) {
            open_options o;
            o.io = mmap ? io_mode::mmap : io_mode::pread;
            auto ds = dataset::open(dir.str(), o);
            read_context ctx;
            std::vector<field_value> got;
            for (std::size_t i = 0; i < all.size(); ++i) {
                INFO("codec " << int(codec) << ", mmap " << mmap << ", record " << i);
                const auto [h, w] = ds.read_fields(i, got, ctx);
                REQUIRE((h == 30 && w == 40));
                require_same(got, all[i]);
                require_same(ds.at(i).fields(), all[i]);
            }
            REQUIRE(ds.field_index("tags") == 5);
            REQUIRE_THROWS_WITH(ds.field_index("nope"), Catch::Contains("no field named 'nope'"));
        }
    }
}

TEST_CASE("read_batch's boxes follow each sample's window and flips, as window_boxes computes them", "[fields][augment]") {
    temp_dir dir("fields-batch");
    const auto all = write_fields_dataset(dir.str(), record_codec::zstd, 40, 30, 16);
    auto ds = dataset::open(dir.str());
    augmentation aug;
    aug.height = 20;
    aug.width = 24;
    aug.position = crop_position::random;
    aug.hflip = aug.vflip = flip_mode::random;
    aug.seed = 11;
    std::vector<std::size_t> idx(16);
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = 15 - i;
    std::vector<std::uint8_t> images(idx.size() * 20 * 24 * 3);
    std::vector<crop_box> applied(idx.size());
    field_batch fb;
    fb.fields = {ds.field_index("boxes"), ds.field_index("n")};
    fb.min_box_visibility = 0.3;
    sample_buffers out;
    out.image_u8 = images.data();
    out.image_capacity = images.size();
    out.augment = &aug;
    out.applied = applied.data();
    out.fields = &fb;
    read_context ctx;
    std::size_t kept = 0;
    for (std::uint64_t epoch = 0; epoch < 3; ++epoch) {
        aug.epoch = epoch;
        ds.read_batch(idx.data(), idx.size(), out, ctx);
        REQUIRE(fb.slots.size() == idx.size());
        for (std::size_t j = 0; j < idx.size(); ++j) {
            std::vector<box> want = all[idx[j]][6].boxes;
            const crop_box& b = applied[j];
            detail::window_boxes(want, b.x, b.y, b.width, b.height, b.hflip, b.vflip, 0.3);
            REQUIRE(fb.slots[j][6].boxes == want);
            REQUIRE(fb.slots[j][0].ints == all[idx[j]][0].ints);
            REQUIRE(fb.slots[j][2].text.empty());  // not asked for
            kept += want.size();
        }
    }
    REQUIRE(kept > 5);
}

TEST_CASE("window_boxes: clipping, the visibility rule and flips", "[fields][augment]") {
    std::vector<box> b = {{2, 2, 6, 6, 0}, {9, 0, 12, 4, 1}, {0, 0, 1, 1, 2}, {4, 3, 5.5f, 9, 3}};
    // A 6 x 5 window at x 3, y 1: box 0 keeps (3..6) x (1..5) of 4 x 4 -> 3 x 4 = 0.75 of it;
    // box 1 is outside; box 2 is outside; box 3 keeps rows 3..6 of 3..9: 3 x 1.5 = 0.5 of it.
    auto v = b;
    detail::window_boxes(v, 3, 1, 6, 5, false, false, 0.6);
    REQUIRE(v == std::vector<box>{{0, 1, 3, 5, 0}});
    v = b;
    detail::window_boxes(v, 3, 1, 6, 5, true, true, 0.5);
    REQUIRE(v == std::vector<box>{{3, 0, 6, 4, 0}, {3.5f, 0, 5, 3, 3}});
}

TEST_CASE("damaged field values are refused when read, naming the field", "[fields][damage]") {
    temp_dir dir("fields-bad");
    dataset_writer_options wo = fields_options(dir.str(), 4, 4);
    {
        dataset_writer writer(wo);
        // A box past the record's right edge: the writer's encoder does not check, the reader must.
        const auto values = values_of(1, 1, "", {}, {}, {}, {{1, 1, 4.5f, 2, 0}});
        std::vector<unsigned char> field_bytes;
        detail::encode_field_values(wo.schema.fields, values, field_bytes);
        image_u8 img{4, 4, 3, std::vector<std::uint8_t>(48, 9)};
        std::vector<unsigned char> decoded;
        encode_record(wo.schema, "e", img, nullptr, 0, decoded, &field_bytes);
        record_compressor raw(record_codec::none, 0);
        stored_record stored;
        raw.compress(decoded, stored);
        writer.add(stored);
        writer.publish();
    }
    auto ds = dataset::open(dir.str());
    REQUIRE_THROWS_WITH(ds.fields(0), Catch::Contains("field 'boxes': box 0 is not inside the 4x4 record"));
    REQUIRE_THROWS_WITH(ds.fields(0), Catch::Contains("record 0"));
    // verify reads every record's fields and reports the damage.
    const auto r = cli({"verify", dir.str()});
    REQUIRE(r.code == 1);
    REQUIRE(r.err.find("its fields: field 'boxes': box 0") != std::string::npos);
}

TEST_CASE("field_cell_parser: a sample stream's cells by the rules of a CSV column", "[fields][stream]") {
    temp_dir dir("cells");
    write_file(dir / "tags.txt", "name\nant\nbee\n");
    write_file(dir / "boxes.txt", "name\ncar\n");
    std::vector<field_spec> specs;
    for (const char* s : {"n:int", "s:float", "t:str", "il:int-list", "tags:tags", "b:boxes"}) specs.push_back(parse_field_spec(s));
    std::vector<field_spec> without_names = specs;
    // A stream cannot find the names of tags and boxes in data still to come.
    CHECK_THROWS_AS(field_cell_parser(without_names, unknown_name_policy::error, "--samples"), usage_error);
    apply_field_names(specs, "tags=" + (dir / "tags.txt"));
    apply_field_names(specs, "b=" + (dir / "boxes.txt"));
    field_cell_parser parser(specs, unknown_name_policy::error, "--samples");
    REQUIRE(parser.declarations().size() == 6);
    CHECK(parser.declarations()[4].vocabulary == std::vector<std::string>{"ant", "bee"});

    std::string bytes;
    parser.parse({"-7", "0.25", "a b", "[1, 2]", "bee|0", "1.5 2 10 12.5 car; 0 0 1 1 0"}, bytes);
    std::vector<field_value> values;
    std::vector<std::vector<source_box>> boxes;
    decode_source_row(parser.declarations(), bytes, values, boxes);
    CHECK(values[0].ints == std::vector<std::int64_t>{-7});
    CHECK(values[1].floats == std::vector<double>{0.25});
    CHECK(values[2].text == "a b");
    CHECK(values[3].ints == std::vector<std::int64_t>{1, 2});
    CHECK(values[4].ids == std::vector<std::uint32_t>{0, 1});
    REQUIRE(boxes.size() == 1);
    REQUIRE(boxes[0].size() == 2);
    CHECK((boxes[0][0].x0 == 1.5 && boxes[0][0].y1 == 12.5 && boxes[0][0].label == 0));

    // The CSV reader's errors, without a line (the build names the sample).
    CHECK_THROWS_WITH(parser.parse({"x", "0", "", "", "", ""}, bytes), "field 'n' (int): 'x' is not a 64-bit integer");
    CHECK_THROWS_WITH(parser.parse({"1", "0", "", "", "fly", ""}, bytes),
                      Catch::Contains("field 'tags': 'fly' is not one of its 2 names"));
    CHECK_THROWS_AS(parser.parse({"1"}, bytes), input_error);
}
