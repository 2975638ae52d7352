// Real label data (issue #11): `shardpack colors`, --color-tolerance, helpful unknown-color
// messages, index masks (gray 8/16-bit, palette indices, sparse name,id tables, --ignore-values),
// and failed skip builds that keep their reasons. Library units first, then the CLI end to end.
#include <catch2/catch.hpp>

#include <png.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <map>

#include "decode/image_decoder.hpp"
#include "decode/png_encoder.hpp"
#include "decode/png_value_decoder.hpp"
#include "dataset/input_fingerprints.hpp"
#include "input/class_table.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"
#include "transform/index_mask.hpp"
#include "transform/label_map.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

cli_result cli(const std::vector<std::string>& args) { return run_command(SHARDPACK_CLI, args); }

void make_samples(const std::string& dir, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--out", dir};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_command(SHARDPACK_SAMPLE_TOOL, args);
    REQUIRE(r.code == 0);
}

image_u8 decode_file(const std::string& path) {
    const std::string bytes = read_file(path);
    decode_request req;
    req.layout = pixel_layout::rgb;
    return decode_image(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), req);
}

std::uint32_t pack(const std::uint8_t* p) { return std::uint32_t(p[0]) << 16 | std::uint32_t(p[1]) << 8 | p[2]; }

// The masks' color histogram, counted here the plain way.
std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> histogram(const std::string& src, int count) {
    std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> h;  // color -> pixels, files
    for (int i = 0; i < count; ++i) {
        char stem[32];
        std::snprintf(stem, sizeof stem, "img_%04d", i);
        const image_u8 m = decode_file(src + "/masks/" + stem + ".png");
        std::map<std::uint32_t, std::uint64_t> one;
        for (std::size_t p = 0; p < std::size_t(m.width) * m.height; ++p) ++one[pack(&m.pixels[p * 3])];
        for (const auto& [c, n] : one) {
            h[c].first += n;
            h[c].second += 1;
        }
    }
    return h;
}

// A PNG of raw samples: gray 8/16-bit or palette (with a palette whose colors are not the ids).
void write_raw_png(const std::string& path, std::uint32_t w, std::uint32_t h, int bit_depth, int color_type,
                   const std::vector<std::uint16_t>& values) {
    FILE* f = std::fopen(path.c_str(), "wb");
    REQUIRE(f != nullptr);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    std::vector<png_byte> row(std::size_t(w) * (bit_depth == 16 ? 2 : 1));
    std::vector<png_color> palette(256);
    for (int i = 0; i < 256; ++i) palette[std::size_t(i)] = {png_byte(255 - i), png_byte(i * 7), png_byte(i * 13)};
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        std::fclose(f);
        FAIL("libpng failed");
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, w, h, bit_depth, color_type, PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (color_type == PNG_COLOR_TYPE_PALETTE) png_set_PLTE(png, info, palette.data(), 256);
    png_write_info(png, info);
    for (std::uint32_t y = 0; y < h; ++y) {
        for (std::uint32_t x = 0; x < w; ++x) {
            const std::uint16_t v = values[std::size_t(y) * w + x];
            if (bit_depth == 16) {
                row[2 * x] = png_byte(v >> 8);
                row[2 * x + 1] = png_byte(v & 0xFF);
            } else {
                row[x] = png_byte(v);
            }
        }
        png_write_row(png, row.data());
    }
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Library units

TEST_CASE("color_lookup with a tolerance maps within N of one class and flags it (table and search agree)",
          "[labels][tolerance]") {
    const std::vector<label_color> dict = {{0, 0, 0}, {128, 64, 128}, {2, 140, 210}, {250, 250, 250}};
    const color_lookup exact(dict);
    CHECK(exact.find(0, 140, 210) == -1);
    CHECK(exact.find(2, 140, 210) == 2);
    for (unsigned n : {2u, 40u}) {  // 40: too large for the table of every color; searched on a miss
        const color_lookup near(dict, n);
        CHECK(near.find(2, 140, 210) == 2);
        CHECK(near.find_packed(color_lookup::pack(2, 140, 210)) == 2);  // exact: not flagged
        const int v = near.find_packed(color_lookup::pack(0, 140, 212));
        CHECK(v == (2 | color_lookup::by_tolerance));
        CHECK(near.find(0, 140, 212) == 2);
        CHECK(near.find(std::uint8_t(128 - n), std::uint8_t(64 + n), 128) == 1);
        CHECK(near.find(std::uint8_t(128 - n - 1), 64, 128) == -1);  // one more is too far
        const auto nearest = near.nearest(color_lookup::pack(5, 140, 210));
        CHECK(nearest.id == 2);
        CHECK(nearest.distance == 3);
    }
    // Two colors within 2N: refused
    CHECK_THROWS_AS(color_lookup(std::vector<label_color>{{10, 10, 10}, {14, 10, 10}}, 2), input_error);
    CHECK_NOTHROW(color_lookup(std::vector<label_color>{{10, 10, 10}, {15, 10, 10}}, 2));
}

TEST_CASE("map_mask counts tolerance pixels per class and tallies unknown colors (also on repeated rows)",
          "[labels][tolerance]") {
    const std::vector<label_color> dict = {{0, 0, 0}, {100, 100, 100}};
    const color_lookup lookup(dict, 1);
    image_u8 m;
    m.width = 4;
    m.height = 2;
    m.channels = 3;
    const std::uint8_t px[8][3] = {{0, 0, 0}, {1, 0, 0}, {101, 100, 99}, {7, 7, 7},
                                   {100, 100, 100}, {7, 7, 7}, {0, 1, 1}, {50, 50, 50}};
    for (int i = 0; i < 8; ++i) m.pixels.insert(m.pixels.end(), px[i], px[i] + 3);
    geometry_options g;
    g.width = 8;
    g.height = 4;
    g.resize = resize_mode::stretch;
    const auto up = plan_geometry(4, 2, g);  // 2x2 output pixels per source pixel
    label_plane out;
    std::uint64_t unknown = 0;
    mask_mapping_stats stats;
    map_mask(m, up, lookup, unknown_color_policy::ignore, 255, out, nullptr, &unknown, &stats);
    REQUIRE(stats.by_tolerance.size() == 2);
    CHECK(stats.by_tolerance[0] == 8);  // (1,0,0) and (0,1,1): 2 source pixels x 4
    CHECK(stats.by_tolerance[1] == 4);  // (101,100,99)
    CHECK(unknown == 12);
    REQUIRE(stats.unknown.size() == 2);
    CHECK(stats.unknown[0].rgb == 0x070707u);
    CHECK(stats.unknown[0].pixels == 8);
    CHECK(stats.unknown[0].x == 3);
    CHECK(stats.unknown[0].y == 0);
    CHECK(stats.unknown[1].rgb == 0x323232u);
    CHECK(stats.unknown[1].pixels == 4);
    // under error: unknown_color_error with the color and its source position
    try {
        map_mask(m, up, lookup, unknown_color_policy::error, 255, out, nullptr, &unknown, &stats);
        FAIL("no error");
    } catch (const unknown_color_error& e) {
        CHECK(e.rgb == 0x070707u);
        CHECK(e.x == 3);
        CHECK(e.y == 0);
    }
}

TEST_CASE("class tables with ids for index masks and the 2N refusal naming both classes and lines", "[labels][table]") {
    temp_dir dir("table");
    write_file(dir / "ids.csv", "name,id\nroad,7\ncar,26\nsky,23\n");
    const auto ids = load_class_dict(dir / "ids.csv");
    REQUIRE(ids.size() == 3);
    CHECK(ids[1].value == 26);
    CHECK(classes_have_values(ids));
    CHECK_FALSE(classes_have_colors(ids));
    write_file(dir / "dup.csv", "name,id\nroad,7\ncar,7\n");
    CHECK_THROWS_WITH(load_class_dict(dir / "dup.csv"), Catch::Contains("line 2") && Catch::Contains("'road'"));
    write_file(dir / "close.csv", "name,r,g,b\nwater,2,140,210\nsky,128,128,128\nlake,5,140,210\n");
    const auto close = load_class_dict(dir / "close.csv");
    CHECK_NOTHROW(check_color_tolerance(close, 1, dir / "close.csv"));
    try {
        check_color_tolerance(close, 2, dir / "close.csv");
        FAIL("no error");
    } catch (const usage_error& e) {
        const std::string what = e.what();
        CHECK_THAT(what, Catch::Contains("'water' (2,140,210) on line 2") && Catch::Contains("'lake' (5,140,210) on line 4") &&
                             Catch::Contains("differ by only 3") && Catch::Contains("--color-tolerance 1"));
    }
}

TEST_CASE("index masks read gray 8/16-bit values and palette indices (not colors) with sparse ids remapped and ignore values",
          "[labels][index]") {
    temp_dir dir("values");
    const std::vector<std::uint16_t> v8 = {0, 7, 26, 255, 7, 7};
    write_raw_png(dir / "pal.png", 3, 2, 8, PNG_COLOR_TYPE_PALETTE, v8);
    write_raw_png(dir / "gray.png", 3, 2, 8, PNG_COLOR_TYPE_GRAY, v8);
    const std::vector<std::uint16_t> v16 = {0, 7, 1000, 65535, 300, 7};
    write_raw_png(dir / "gray16.png", 3, 2, 16, PNG_COLOR_TYPE_GRAY, v16);
    value_plane plane;
    for (const char* name : {"pal.png", "gray.png"}) {
        const std::string bytes = read_file(dir / name);
        decode_mask_values(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), 0, plane);
        CHECK(plane.values == v8);
    }
    const std::string b16 = read_file(dir / "gray16.png");
    decode_mask_values(reinterpret_cast<const std::uint8_t*>(b16.data()), b16.size(), 0, plane);
    CHECK(plane.values == v16);  // full 16 bits, not the high byte
    // an RGB mask is refused for index mode, saying why
    image_u8 rgb;
    rgb.width = rgb.height = 1;
    rgb.channels = 3;
    rgb.pixels = {1, 2, 3};
    write_file(dir / "rgb.png", [&] {
        const auto bytes = encode_png(rgb);
        return std::string(bytes.begin(), bytes.end());
    }());
    const std::string brgb = read_file(dir / "rgb.png");
    CHECK_THROWS_WITH(decode_mask_values(reinterpret_cast<const std::uint8_t*>(brgb.data()), brgb.size(), 0, plane),
                      Catch::Contains("RGB PNG") && Catch::Contains("--mask-values color"));

    // sparse ids 7, 26, 1000 -> 0, 1, 2 in table order; 65535 and 0 ignored; 300 unknown
    const value_lookup lookup({7, 26, 1000}, {0, 65535});
    geometry_options g;
    const auto plan = plan_geometry(3, 2, g);
    value_plane p16;
    p16.width = 3;
    p16.height = 2;
    p16.values = v16;
    label_plane out;
    std::uint64_t unknown = 0;
    mask_mapping_stats stats;
    map_index_mask(p16, plan, lookup, unknown_color_policy::ignore, 255, out, &unknown, &stats);
    CHECK(out.ids == std::vector<std::uint16_t>{255, 0, 2, 255, 255, 0});
    CHECK(unknown == 1);
    REQUIRE(stats.unknown.size() == 1);
    CHECK(stats.unknown[0].rgb == 300);
    CHECK_THROWS_WITH(map_index_mask(p16, plan, lookup, unknown_color_policy::error, 255, out, &unknown, &stats),
                      Catch::Contains("unknown mask value 300 at pixel (1,1)"));
    CHECK_THROWS_AS(value_lookup({7, 26}, {26}), usage_error);  // a class and ignored: refused
}

TEST_CASE("fingerprint lines keep tolerance counts and unknown values and old 11-field lines still load", "[labels][rebuild]") {
    temp_dir dir("fp");
    record_fingerprint r;
    r.key = "a.png";
    r.label_key = "a_mask.png";
    r.class_counts = {{0, 10}, {2, 5}};
    r.tolerance_counts = {{2, 4}};
    r.unknown_values = {{0xFA0AFAu, 12, 5, 6}, {300, 1, 0, 0}};
    fingerprint_group g{"shard-00000-x.spk", {r, record_fingerprint{}}};
    g.records[1].key = "b.png";
    write_file(dir / "f.tsv", format_fingerprint_header("abc", "def") + format_fingerprint_group(g));
    const auto f = load_fingerprints(dir / "f.tsv");
    REQUIRE(f);
    REQUIRE(f->groups.at(0).records.size() == 2);
    const auto& back = f->groups[0].records[0];
    CHECK(back.tolerance_counts == r.tolerance_counts);
    CHECK(back.unknown_values == r.unknown_values);
    CHECK(f->groups[0].records[1].unknown_values.empty());
    const std::string text = read_file(dir / "f.tsv");
    CHECK(std::count(text.begin(), text.end(), '\t') == 3 + 2 + 12 + 10);  // header, group, 13 fields, 11 fields
}

// ---------------------------------------------------------------------------------------------
// The command line

TEST_CASE("colors gives exact counts and the nearest class and distance and unused classes and a dictionary that builds", "[labels][colors]") {
    temp_dir dir("colors");
    make_samples(dir / "src", {"--count", "12", "--width", "96", "--height", "64", "--off-colors", "--stray-colors"});
    // the dictionary also lists a class no mask uses
    {
        std::ofstream dict(dir / "src/class_dict.csv", std::ios::app);
        dict << "bicycle,0,128,192,two wheels\n";
    }
    const auto expected = histogram(dir / "src", 12);
    auto r = cli({"colors", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--json", "--threads", "2"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = detail::json::parse(r.out);
    CHECK(j.at("masks").as_u64() == 12);
    CHECK(j.at("pixels").as_u64() == 12u * 96 * 64);
    const auto& colors = j.at("colors").as_array();
    REQUIRE(colors.size() == expected.size());
    std::map<std::uint32_t, const detail::json*> by_color;
    for (const auto& c : colors) {
        const auto& a = c.at("color").as_array();
        const std::uint32_t key = std::uint32_t(a[0].as_u64()) << 16 | std::uint32_t(a[1].as_u64()) << 8 | std::uint32_t(a[2].as_u64());
        by_color[key] = &c;
        REQUIRE(expected.count(key));
        CHECK(c.at("pixels").as_u64() == expected.at(key).first);
        CHECK(c.at("files").as_u64() == expected.at(key).second);
    }
    // sky is exact; the masks hold road (128,64,128) as (128,65,128)
    CHECK(by_color.at(0x808080u)->at("match").as_string() == "exact");
    const auto& road = *by_color.at(0x804180u);
    CHECK(road.at("match").as_string() == "unknown");
    CHECK(road.at("nearest_class").as_string() == "road");
    CHECK(road.at("distance").as_u64() == 1);
    const auto& stray = *by_color.at(0xFA0AFAu);
    CHECK(stray.at("files").as_u64() == 1);  // mask 3 only (every 10th from the 4th)
    CHECK(stray.at("pixels").as_u64() == 12);
    CHECK(stray.at("example").at("mask").as_string() == "masks/img_0003.png");
    CHECK(stray.at("example").at("x").as_u64() == 5);
    CHECK(stray.at("example").at("y").as_u64() == 5);
    std::vector<std::string> unused;
    for (const auto& u : j.at("unused_classes").as_array()) unused.push_back(u.at("name").as_string());
    CHECK(unused == std::vector<std::string>{"building", "road", "tree", "car", "bicycle"});

    // with the tolerance the off colors map; the text output says so
    r = cli({"colors", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--color-tolerance", "2",
             "--write-dict", dir / "fixed.csv"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("road (by tolerance, distance 1)") && Catch::Contains("classes no mask uses: 6 'bicycle'") &&
                          Catch::Contains("UNKNOWN: nearest"));
    CHECK_THAT(r.err, Catch::Contains("wrote " + dir / "fixed.csv"));
    const std::string dict = read_file(dir / "fixed.csv");
    CHECK_THAT(dict, Catch::StartsWith("name,r,g,b\nsky,128,128,128\nbuilding,") && Catch::Contains("\nroad,128,65,128\n") &&
                         Catch::Contains("\nbicycle,0,128,192\n") && Catch::Contains("\nclass_3_3_3,3,3,3\n") &&
                         Catch::Contains("\nclass_250_10_250,250,10,250\n"));
    // the written dictionary builds, exactly, with ids of the old classes kept
    r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "fixed.csv", "--out", dir / "ds", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto ds = dataset::open(dir / "ds");
    REQUIRE(ds.classes().size() == 9);
    CHECK(ds.classes()[2].name == "road");
    CHECK(ds.classes()[7].name == "class_3_3_3");
    // the same without a dictionary: every color is a class_R_G_B
    r = cli({"colors", "--csv", dir / "src/list.csv", "--write-dict", dir / "all.csv"});
    REQUIRE(r.code == 0);
    const std::string all = read_file(dir / "all.csv");
    CHECK(std::count(all.begin(), all.end(), '\n') == long(expected.size()) + 1);
    CHECK_THAT(all, Catch::Contains("\nclass_128_128_128,128,128,128\n"));
}

TEST_CASE("build with a color tolerance: the error helps and the tolerance maps as fixed masks would with counts split",
          "[labels][tolerance]") {
    temp_dir dir("tol");
    make_samples(dir / "off", {"--count", "5", "--width", "80", "--height", "48", "--off-colors"});
    make_samples(dir / "exact", {"--count", "5", "--width", "80", "--height", "48"});
    auto r = cli({"build", "--csv", dir / "off/list.csv", "--classes", dir / "off/class_dict.csv", "--out", dir / "ds"});
    REQUIRE(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains("list.csv:2") && Catch::Contains("img_0000.png: unknown color (") &&
                          Catch::Contains("nearest class '") && Catch::Contains("at distance ") &&
                          Catch::Contains("--color-tolerance ") && Catch::Contains("would map it to '") &&
                          Catch::Contains("shardpack colors --csv " + dir / "off/list.csv" + " --classes " +
                                          dir / "off/class_dict.csv"));
    r = cli({"build", "--csv", dir / "off/list.csv", "--classes", dir / "off/class_dict.csv", "--out", dir / "ds",
             "--color-tolerance", "2", "--label-layout", "index", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    r = cli({"build", "--csv", dir / "exact/list.csv", "--classes", dir / "exact/class_dict.csv", "--out", dir / "ref",
             "--label-layout", "index"});
    REQUIRE(r.code == 0);
    auto ds = dataset::open(dir / "ds");
    auto ref = dataset::open(dir / "ref");
    REQUIRE(ds.size() == ref.size());
    for (std::size_t i = 0; i < ds.size(); ++i) {
        const auto sa = ds.at(i), sb = ref.at(i);
        const auto a = sa.label(), b = sb.label();
        REQUIRE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
    }
    const auto report = detail::json::parse(read_file(dir / "ds/report.json"));
    std::uint64_t exact = 0, tolerance = 0;
    for (const auto& c : report.at("class_frequencies").as_array()) {
        CHECK(c.at("pixels").as_u64() == c.at("exact_pixels").as_u64() + c.at("tolerance_pixels").as_u64());
        const std::string name = c.at("class").as_string();
        if (name == "sky" || name == "pedestrian") CHECK(c.at("tolerance_pixels").as_u64() == 0);
        else if (c.at("pixels").as_u64() > 0) CHECK(c.at("exact_pixels").as_u64() == 0);
        exact += c.at("exact_pixels").as_u64();
        tolerance += c.at("tolerance_pixels").as_u64();
    }
    CHECK(exact > 0);
    CHECK(tolerance > 0);
    CHECK(exact + tolerance == 5u * 80 * 48);
    // an incremental rebuild takes the records back and keeps the split
    r = cli({"build", "--csv", dir / "off/list.csv", "--classes", dir / "off/class_dict.csv", "--out", dir / "ds",
             "--color-tolerance", "2", "--label-layout", "index", "--json"});
    REQUIRE(r.code == 0);
    const auto again = detail::json::parse(r.out);
    CHECK(again.at("reused_records").as_u64() == 5);
    CHECK(again.at("class_frequencies").dump() == report.at("class_frequencies").dump());

    // a dictionary whose colors lie within 2N: refused at load, naming both classes (exit 2)
    write_file(dir / "close.csv", "name,r,g,b\nsky,128,128,128\nroad,128,64,128\nroad2,128,67,128\n");
    r = cli({"build", "--csv", dir / "off/list.csv", "--classes", dir / "close.csv", "--out", dir / "x", "--color-tolerance", "2"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("'road' (128,64,128) on line 3") && Catch::Contains("'road2' (128,67,128) on line 4"));
    r = cli({"colors", "--csv", dir / "off/list.csv", "--classes", dir / "close.csv", "--color-tolerance", "2"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("'road2'"));
}

TEST_CASE("unknown-label ignore lists every unknown color and empty classes are warnings", "[labels][ignore]") {
    temp_dir dir("ign");
    make_samples(dir / "src", {"--count", "14", "--width", "64", "--height", "48", "--stray-colors"});
    {
        std::ofstream dict(dir / "src/class_dict.csv", std::ios::app);
        dict << "bicycle,0,128,192,two wheels\n";
    }
    const auto r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds",
                        "--unknown-label", "ignore", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto report = detail::json::parse(r.out);
    const auto& unknown = report.at("unknown_colors").as_array();
    REQUIRE(unknown.size() == 2);
    CHECK(report.at("unknown_color_pixels").as_u64() == 2 * 2 * 12);  // masks 3 and 13, 12 pixels of each color
    for (const auto& u : unknown) {
        CHECK(u.at("pixels").as_u64() == 24);
        CHECK(u.at("files").as_u64() == 2);
        CHECK(u.at("example").at("mask").as_string() == "masks/img_0003.png");
        CHECK(u.at("example").at("line").as_u64() == 5);
    }
    const auto& warnings = report.at("warnings").as_array();
    REQUIRE(warnings.size() == 2);
    CHECK_THAT(warnings[0].as_string(), Catch::Contains("class 6 'bicycle' has 0 pixels"));
    CHECK_THAT(warnings[1].as_string(), Catch::Contains("48 pixels of the whole masks had colors not in the dictionary") &&
                                            Catch::Contains("(counted as `shardpack colors` counts them)") &&
                                            Catch::Contains("(3,3,3): 24 pixels in 2 file(s), e.g. masks/img_0003.png (line 5) at pixel (") &&
                                            Catch::Contains("(250,10,250)") && Catch::Contains("nearest class '"));
    CHECK_THAT(r.err, Catch::Contains("warning: class 6 'bicycle' has 0 pixels") && Catch::Contains("(250,10,250): 24 pixels"));
    // a rebuild that takes every record back reports the same unknown colors
    const auto again = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out",
                            dir / "ds", "--unknown-label", "ignore", "--json"});
    REQUIRE(again.code == 0);
    const auto second = detail::json::parse(again.out);
    CHECK(second.at("reused_records").as_u64() == 14);
    CHECK(second.at("unknown_colors").dump() == report.at("unknown_colors").dump());
}

TEST_CASE("index masks end to end with VOC palettes and 255 boundaries and 16-bit masks and sparse id tables", "[labels][index]") {
    temp_dir dir("idx");
    fs::create_directories(dir / "m");
    image_u8 img;
    img.width = 6;
    img.height = 4;
    img.channels = 3;
    img.pixels.assign(6 * 4 * 3, 90);
    const auto img_png = encode_png(img);
    write_file(dir / "m/img.png", std::string(img_png.begin(), img_png.end()));
    // VOC style: palette indices 0..2 are classes, 255 the boundary; the palette's colors are not ids
    std::vector<std::uint16_t> voc(24, 0);
    for (std::size_t i = 0; i < 24; ++i) voc[i] = i % 6 < 2 ? 0 : i % 6 < 4 ? 1 : i % 6 == 4 ? 2 : 255;
    write_raw_png(dir / "m/voc.png", 6, 4, 8, PNG_COLOR_TYPE_PALETTE, voc);
    write_file(dir / "voc.csv", "image,mask\nm/img.png,m/voc.png\n");
    write_file(dir / "voc_dict.csv", "name,r,g,b\nbackground,0,0,0\naeroplane,128,0,0\nbicycle,0,128,0\n");
    auto r = cli({"build", "--csv", dir / "voc.csv", "--classes", dir / "voc_dict.csv", "--out", dir / "ds", "--mask-values",
                  "index", "--label-layout", "index"});
    CHECK(r.code == 1);  // 255 not in the table: the message says what to do
    CHECK_THAT(r.err, Catch::Contains("unknown mask value 255 at pixel (5,0)") && Catch::Contains("--ignore-values 255"));
    r = cli({"build", "--csv", dir / "voc.csv", "--classes", dir / "voc_dict.csv", "--out", dir / "ds", "--mask-values",
             "index", "--ignore-values", "255", "--label-layout", "index"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    {
        auto ds = dataset::open(dir / "ds");
        const auto s0 = ds.at(0);
        const auto lab = s0.label();
        std::vector<std::uint16_t> got(lab.begin(), lab.end());
        CHECK(got == voc);  // ids as stored, 255 = the ignore value
        const auto m = detail::json::parse(read_file(dir / "ds/manifest.json"));
        CHECK(m.at("build").at("mask_values").as_string() == "index");
        CHECK(m.at("build").at("ignore_values").dump(-1) == "[255]");
    }
    // the colors path reads the same palette masks by color: the palette's colors are not in the dictionary
    r = cli({"build", "--csv", dir / "voc.csv", "--classes", dir / "voc_dict.csv", "--out", dir / "ds2"});
    CHECK(r.code == 1);

    // 16-bit masks with Cityscapes-like sparse ids; the table's order gives the ids; auto picks index
    std::vector<std::uint16_t> city(24);
    for (std::size_t i = 0; i < 24; ++i) city[i] = i < 8 ? 7 : i < 16 ? 26 : i < 20 ? 1000 : 0;
    write_raw_png(dir / "m/city.png", 6, 4, 16, PNG_COLOR_TYPE_GRAY, city);
    write_raw_png(dir / "m/city8.png", 6, 4, 8, PNG_COLOR_TYPE_GRAY, std::vector<std::uint16_t>(24, 26));
    write_file(dir / "city.csv", "image,mask\nm/img.png,m/city.png\nm/img.png,m/city8.png\n");
    write_file(dir / "city_dict.csv", "name,id\ncar,26\nroad,7\nbig,1000\n");
    r = cli({"build", "--csv", dir / "city.csv", "--classes", dir / "city_dict.csv", "--out", dir / "ds3", "--ignore-values",
             "0", "--label-layout", "index", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto ds = dataset::open(dir / "ds3");
    REQUIRE(ds.classes().size() == 3);
    CHECK(ds.classes()[0].name == "car");
    const auto s0 = ds.at(0), s1 = ds.at(1);
    const auto lab = s0.label();
    for (std::size_t i = 0; i < 24; ++i) CHECK(lab[i] == (i < 8 ? 1 : i < 16 ? 0 : i < 20 ? 2 : 255));
    const auto lab8 = s1.label();
    CHECK(std::all_of(lab8.begin(), lab8.end(), [](auto v) { return v == 0; }));
    // colors lists values for index masks
    r = cli({"colors", "--csv", dir / "city.csv", "--classes", dir / "city_dict.csv", "--json"});
    REQUIRE(r.code == 0);
    const auto j = detail::json::parse(r.out);
    CHECK(j.at("mask_values").as_string() == "index");
    const auto& values = j.at("values").as_array();
    REQUIRE(values.size() == 4);
    CHECK(values[0].at("value").as_u64() == 26);
    CHECK(values[0].at("pixels").as_u64() == 8 + 24);
    CHECK(values[0].at("files").as_u64() == 2);
    CHECK(values[2].at("value").as_u64() == 0);  // 4 pixels, as many as 1000: the smaller value first
    CHECK(values[2].at("match").as_string() == "unknown");
    CHECK(values[3].at("value").as_u64() == 1000);
    CHECK(values[3].at("class").as_string() == "big");
    // options that do not fit the mask kind are usage errors
    r = cli({"build", "--csv", dir / "city.csv", "--classes", dir / "city_dict.csv", "--out", dir / "x", "--mask-values", "color"});
    CHECK(r.code == 2);
    r = cli({"build", "--csv", dir / "voc.csv", "--classes", dir / "voc_dict.csv", "--out", dir / "x", "--ignore-values", "255"});
    CHECK(r.code == 2);
    r = cli({"build", "--csv", dir / "voc.csv", "--classes", dir / "voc_dict.csv", "--out", dir / "x", "--ignore-values", "7x"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("'7x' is not a value"));
}

TEST_CASE("a skip build that packs nothing or that max-errors stops keeps its rejected rows and report",
          "[labels][failed]") {
    temp_dir dir("failed");
    make_samples(dir / "src", {"--count", "6", "--width", "48", "--height", "32", "--off-colors"});
    fs::remove(dir / "src/images/img_0005.png");
    auto r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds",
                  "--on-error", "skip"});
    REQUIRE(r.code == 1);
    const std::string partial = dir / "ds/.partial";
    CHECK_THAT(r.err, Catch::Contains("no row could be packed (6 rejected); nothing was published") &&
                          Catch::Contains("Most common reasons: 5 x unknown color (N,N,N) at pixel (N,N)") &&
                          Catch::Contains("1 x cannot open: No such file or directory") &&
                          Catch::Contains("Rejected rows: " + partial + "/rejected.csv; report: " + partial + "/report.json"));
    CHECK_FALSE(fs::exists(dir / "ds/manifest.json"));
    const std::string rejected = read_file(partial + "/rejected.csv");
    CHECK(std::count(rejected.begin(), rejected.end(), '\n') == 7);
    const auto report = detail::json::parse(read_file(partial + "/report.json"));
    CHECK(report.at("published").as_bool() == false);
    CHECK(report.at("skipped").as_u64() == 6);
    // --max-errors stops early, with the same files, and --report gets a copy
    r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds",
             "--on-error", "skip", "--max-errors", "2", "--report", dir / "r.json", "--threads", "1"});
    REQUIRE(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains("stopping after 2 rejected rows (--max-errors)") && Catch::Contains(dir / "r.json"));
    CHECK(detail::json::parse(read_file(dir / "r.json")).at("skipped").as_u64() == 2);
    // a later good build publishes and the failure's files go with .partial/
    r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds",
             "--on-error", "skip", "--color-tolerance", "2"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_FALSE(fs::exists(partial));
    const std::string kept = read_file(dir / "ds/rejected.csv");
    CHECK(std::count(kept.begin(), kept.end(), '\n') == 2);  // the header and the missing image
}

TEST_CASE("newcomer's rough edges: mask,image headers and missing files and folders as input", "[labels][newcomer]") {
    temp_dir dir("newcomer");
    make_samples(dir / "src", {"--count", "4", "--width", "48", "--height", "32"});
    // a header naming the columns in the other order is read by name
    {
        std::ofstream swapped(dir / "src/swapped.csv");
        swapped << "mask,image\n";
        for (int i = 0; i < 4; ++i) swapped << "masks/img_000" << i << ".png,images/img_000" << i << ".png\n";
    }
    auto r = cli({"build", "--csv", dir / "src/swapped.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "a"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "b"});
    REQUIRE(r.code == 0);
    CHECK(detail::json::parse(read_file(dir / "a/manifest.json")).at("content_hash").as_string() ==
          detail::json::parse(read_file(dir / "b/manifest.json")).at("content_hash").as_string());
    // a missing file: the resolved path, and --root for relative paths
    write_file(dir / "src/missing.csv", "image,mask\nimages/nope.png,masks/img_0000.png\n");
    r = cli({"build", "--csv", dir / "src/missing.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "c"});
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains("missing.csv:2: ") && Catch::Contains("images/nope.png: cannot open: No such file") &&
                          Catch::Contains("relative path 'images/nope.png' was taken relative to " + dir / "src/") &&
                          Catch::Contains("--root DIR"));
    // --csv given a folder says what it wants
    r = cli({"build", "--csv", dir / "src", "--out", dir / "d"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("this is a folder; --csv takes a CSV file") && Catch::Contains("--images DIR"));
    r = cli({"build", "--out", dir / "d"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("no input: give --csv LIST"));
    // --images/--masks pairs by name: the same dataset as the CSV
    r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dir / "src/class_dict.csv",
             "--out", dir / "e"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    {  // the same records, keyed relative to the images folder
        auto e = dataset::open(dir / "e");
        auto b = dataset::open(dir / "b");
        REQUIRE(e.size() == 4);
        for (std::size_t i = 0; i < 4; ++i) {
            const auto se = e.at(i), sb = b.at(i);
            CHECK("images/" + std::string(se.key()) == std::string(sb.key()));
            const auto ie = se.image(), ib = sb.image();
            const auto le = se.label(), lb = sb.label();
            CHECK(std::equal(ie.begin(), ie.end(), ib.begin(), ib.end()));
            CHECK(std::equal(le.begin(), le.end(), lb.begin(), lb.end()));
        }
    }
    fs::remove(dir / "src/masks/img_0002.png");
    r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dir / "src/class_dict.csv",
             "--out", dir / "f"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("1 of 4 images in") && Catch::Contains("img_0002.png"));
    // --images with one subfolder per class: classification, names sorted
    for (const char* c : {"cat", "dog"}) fs::create_directories(dir / ("cls/" + std::string(c)));
    fs::copy_file(dir / "src/images/img_0000.png", dir / "cls/dog/1.png");
    fs::copy_file(dir / "src/images/img_0001.png", dir / "cls/cat/2.png");
    fs::copy_file(dir / "src/images/img_0003.png", dir / "cls/dog/3.png");
    r = cli({"build", "--images", dir / "cls", "--out", dir / "g", "-q"});  // -q after the subcommand
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(r.err.empty());
    auto ds = dataset::open(dir / "g");
    REQUIRE(ds.size() == 3);
    CHECK(ds.classes()[0].name == "cat");
    CHECK(ds.at(0).key() == "cat/2.png");
    CHECK(ds.at(0).class_id() == 0);
    CHECK(ds.at(2).class_id() == 1);
    // every --help names the program and shows examples
    for (const std::vector<std::string>& help : std::vector<std::vector<std::string>>{
             {"--help"}, {"build", "--help"}, {"colors", "--help"}, {"inspect", "--help"}, {"export", "--help"}}) {
        r = cli(help);
        CHECK(r.code == 0);
        CHECK_THAT(r.out, Catch::Contains("shardpack") && Catch::Contains("Examples:\n  shardpack "));
    }
}

TEST_CASE("classification ids: the id table and warnings for single samples and case twins and moved ids and inspect counts",
          "[labels][cls]") {
    temp_dir dir("clsids");
    make_samples(dir / "src", {"--count", "4", "--width", "32", "--height", "32"});
    for (const char* c : {"Cat", "cat", "dog", "bird"}) fs::create_directories(dir / ("cls/" + std::string(c)));
    fs::copy_file(dir / "src/images/img_0000.png", dir / "cls/Cat/1.png");
    fs::copy_file(dir / "src/images/img_0001.png", dir / "cls/cat/2.png");
    fs::copy_file(dir / "src/images/img_0002.png", dir / "cls/dog/3.png");
    fs::copy_file(dir / "src/images/img_0003.png", dir / "cls/dog/4.png");
    fs::copy_file(dir / "src/images/img_0003.png", dir / "cls/bird/5.png");
    auto r = cli({"build", "--images", dir / "cls", "--out", dir / "ds"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("class ids (id, name, samples):\ninfo:   0  Cat  1\ninfo:   1  bird  1\ninfo:   2  cat  1\n"
                                      "info:   3  dog  2") &&
                          Catch::Contains("warning: class 1 'bird' has a single sample") &&
                          Catch::Contains("differ only in case are separate classes: 0 'Cat' 2 'cat'"));
    CHECK_THAT(r.err, !Catch::Contains("class ids change"));
    fs::remove_all(dir / "cls/bird");
    r = cli({"build", "--images", dir / "cls", "--out", dir / "ds", "--json"});
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("had 4 classes, this list has 3 (fewer distinct names): class ids change; 'bird' (was 1) "
                                      "is gone; 'cat' was 2, now 1; 'dog' was 3, now 2; give --classes"));
    CHECK_THAT(detail::json::parse(r.out).at("warnings").dump(), Catch::Contains("class ids change"));
    r = cli({"inspect", dir / "ds"});
    REQUIRE(r.code == 0);
    CHECK_THAT(r.out, Catch::Contains("dog") && Catch::Contains("2 samples (50.0%)") && Catch::Contains("rejected     0 row(s)") &&
                          Catch::Contains("build        task=\"cls\""));
    r = cli({"inspect", dir / "ds", "--json"});
    const auto j = detail::json::parse(r.out);
    CHECK(j.at("class_frequencies").as_array().at(2).at("samples").as_u64() == 2);
    CHECK(j.at("rejected").as_u64() == 0);
}

TEST_CASE("export draws ignored pixels visibly and writes overlays for several records and keys", "[labels][export]") {
    temp_dir dir("export");
    make_samples(dir / "src", {"--count", "5", "--width", "40", "--height", "24", "--stray-colors"});
    auto r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds",
                  "--unknown-label", "ignore"});
    REQUIRE(r.code == 0);
    r = cli({"export", dir / "ds", "--index", "2,3", "--overlay", "--out", dir / "new/folder/x"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto all = detail::json::parse(r.out);
    REQUIRE(all.as_array().size() == 2);
    const auto& three = all.as_array()[1];
    CHECK(three.at("index").as_u64() == 3);
    CHECK(three.at("ignored_pixels").as_u64() == 24);
    CHECK(three.at("label").as_string() == dir / "new/folder/x-3.label.png");
    const image_u8 label = decode_file(dir / "new/folder/x-3.label.png");
    const image_u8 image = decode_file(dir / "new/folder/x-3.image.png");
    const image_u8 over = decode_file(three.at("overlay").as_string());
    const image_u8 mask = decode_file(dir / "src/masks/img_0003.png");
    REQUIRE(label.width == 40);
    for (std::uint32_t y = 0; y < 24; ++y)
        for (std::uint32_t x = 0; x < 40; ++x) {
            const std::size_t p = (std::size_t(y) * 40 + x) * 3;
            const bool stray = x >= 5 && x < 9 && y >= 5 && y < 12 && !(y >= 8 && y < 9);
            if (stray) {  // the documented checkerboard: magenta where (x/4 + y/4) is even, else black
                const bool magenta = (x / 4 + y / 4) % 2 == 0;
                CHECK(pack(&label.pixels[p]) == (magenta ? 0xFF00FFu : 0u));
            } else {
                CHECK(pack(&label.pixels[p]) == pack(&mask.pixels[p]));
            }
            for (int k = 0; k < 3; ++k)
                CHECK(int(over.pixels[p + std::size_t(k)]) == (int(image.pixels[p + std::size_t(k)]) + int(label.pixels[p + std::size_t(k)]) + 1) / 2);
        }
    r = cli({"export", dir / "ds", "--key", "images/img_0004.png", "--out", dir / "k"});
    REQUIRE(r.code == 0);
    CHECK(detail::json::parse(r.out).at("index").as_u64() == 4);
    r = cli({"export", dir / "ds", "--range", "0:5", "--out", dir / "r/all"});
    REQUIRE(r.code == 0);
    CHECK(detail::json::parse(r.out).as_array().size() == 5);
    CHECK(fs::exists(dir / "r/all-4.label.png"));
    CHECK(cli({"export", dir / "ds", "--range", "3:9", "--out", dir / "r/x"}).code == 1);  // beyond the 5 records
    CHECK(cli({"export", dir / "ds", "--range", "3-4", "--out", dir / "r/x"}).code == 2);
    CHECK(cli({"export", dir / "ds", "--key", "nope.png", "--out", dir / "r/x"}).code == 1);
    CHECK(cli({"export", dir / "ds", "--out", dir / "r/x"}).code == 2);
}

TEST_CASE("colors lists an unreadable mask and exits 1 and reads index masks without a table", "[labels][colors]") {
    temp_dir dir("colors2");
    make_samples(dir / "src", {"--count", "3", "--width", "32", "--height", "24", "--palette-masks"});
    write_file(dir / "src/masks/img_0001.png", "not a png");
    auto r = cli({"colors", "--csv", dir / "src/list.csv", "--json"});
    CHECK(r.code == 1);
    const auto j = detail::json::parse(r.out);
    CHECK(j.at("masks").as_u64() == 2);
    REQUIRE(j.at("unreadable").as_array().size() == 1);
    CHECK(j.at("unreadable").as_array()[0].at("line").as_u64() == 3);
    CHECK_THAT(j.at("unreadable").as_array()[0].at("reason").as_string(), Catch::Contains("unrecognised image data"));
    CHECK_THAT(r.err, Catch::Contains("1 mask(s) could not be read"));
    // palette masks read as index masks: the palette indices (make_sample_data reverses the order: 5 - id)
    fs::remove(dir / "src/masks/img_0001.png");
    write_file(dir / "src/list2.csv", "image,mask\nimages/img_0000.png,masks/img_0000.png\nimages/img_0002.png,masks/img_0002.png\n");
    r = cli({"colors", "--csv", dir / "src/list2.csv", "--mask-values", "index", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto v = detail::json::parse(r.out);
    std::uint64_t total = 0;
    for (const auto& e : v.at("values").as_array()) {
        CHECK(e.at("value").as_u64() <= 5);
        total += e.at("pixels").as_u64();
    }
    CHECK(total == 2u * 32 * 24);
}

TEST_CASE("folder input pairs masks by a suffix and says what it left out and why", "[labels][folders]") {
    // About a second: 6 small samples, a few builds and colors runs.
    temp_dir dir("folders");
    make_samples(dir / "src", {"--count", "6", "--width", "40", "--height", "30"});
    const std::string dict = dir / "src/class_dict.csv";
    // CamVid's names: images/img_0000.png, labels/img_0000_L.png
    fs::create_directories(dir / "cam/images/sub");
    fs::create_directories(dir / "cam/labels/sub");
    for (int i = 0; i < 6; ++i) {
        char stem[32];
        std::snprintf(stem, sizeof stem, "img_%04d", i);
        const std::string sub = i >= 4 ? "sub/" : "";
        fs::copy_file(dir / ("src/images/" + std::string(stem) + ".png"), dir / ("cam/images/" + sub + stem + ".png"));
        fs::copy_file(dir / ("src/masks/" + std::string(stem) + ".png"), dir / ("cam/labels/" + sub + stem + "_L.png"));
    }
    // without the suffix: refused, and the masks' names suggest it
    auto r = cli({"build", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--classes", dict, "--out", dir / "x"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("6 of 6 images in") && Catch::Contains("--mask-suffix _L") &&
                          Catch::Contains("img_0000.png and img_0000_L.png"));
    // with it: the same records as the CSV, keys relative to the images folder; nothing left out
    r = cli({"build", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--mask-suffix", "_L", "--classes", dict,
             "--out", dir / "a"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains(": 6 images paired with masks; no file left out"));
    r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dict, "--out", dir / "b"});
    REQUIRE(r.code == 0);
    {
        auto a = dataset::open(dir / "a");
        auto b = dataset::open(dir / "b");
        REQUIRE(a.size() == 6);
        for (std::size_t i = 0; i < 6; ++i) {
            const auto sa = a.at(i), sb = b.at(i);
            const auto la = sa.label(), lb = sb.label();
            CHECK(std::equal(la.begin(), la.end(), lb.begin(), lb.end()));
        }
        CHECK(std::string(a.at(4).key()) == "sub/img_0004.png");
    }
    // what is left out, by reason, with each file under -v: a GIF, a text file, a FIFO named .png,
    // a mask without an image, a mask without the suffix
    write_file(dir / "cam/images/anim.gif", "GIF89a");
    write_file(dir / "cam/images/notes.txt", "x");
    REQUIRE(::mkfifo((dir / "cam/images/pipe.png").c_str(), 0600) == 0);
    fs::copy_file(dir / "src/masks/img_0000.png", dir / "cam/labels/extra_L.png");
    fs::copy_file(dir / "src/masks/img_0000.png", dir / "cam/labels/img_0001.png");
    r = cli({"build", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--mask-suffix", "_L", "--classes", dict,
             "--out", dir / "c"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("6 images paired with masks; 5 files left out: 2 x not a .png, .jpg or .jpeg file, "
                                      "1 x a FIFO, not a regular file, 1 x a mask whose name does not end with the --mask-suffix _L, "
                                      "1 x a mask without an image (-v lists each)") &&
                          Catch::Contains("5 file(s) of the folders left out"));
    CHECK_THAT(r.err, !Catch::Contains("left out " + dir / "cam/images/anim.gif"));
    r = cli({"build", "-v", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--mask-suffix", "_L", "--classes",
             dict, "--out", dir / "c"});
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("left out " + dir / "cam/images/anim.gif: not a .png, .jpg or .jpeg file") &&
                          Catch::Contains("left out " + dir / "cam/images/pipe.png: a FIFO, not a regular file") &&
                          Catch::Contains("left out " + dir / "cam/labels/extra_L.png: a mask without an image") &&
                          Catch::Contains("left out " + dir / "cam/labels/img_0001.png: a mask whose name does not end"));
    // colors takes the same options and says the same
    r = cli({"colors", "--images", dir / "cam/images", "--masks", dir / "cam/labels", "--mask-suffix", "_L", "--classes", dict});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("6 images paired with masks; 5 files left out"));
    CHECK_THAT(r.out, Catch::Contains("example at pixel") && !Catch::Contains("(line"));
    // masks beside the images in one folder: the suffix tells them apart
    fs::create_directories(dir / "one");
    for (int i = 0; i < 3; ++i) {
        fs::copy_file(dir / ("src/images/img_000" + std::to_string(i) + ".png"), dir / ("one/img_000" + std::to_string(i) + ".png"));
        fs::copy_file(dir / ("src/masks/img_000" + std::to_string(i) + ".png"), dir / ("one/img_000" + std::to_string(i) + "_L.png"));
    }
    r = cli({"build", "--images", dir / "one", "--masks", dir / "one", "--mask-suffix", "_L", "--classes", dict, "--out", dir / "d"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(dataset::open(dir / "d").size() == 3);
    r = cli({"build", "--images", dir / "one", "--masks", dir / "one", "--classes", dict, "--out", dir / "d2"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("is the --images folder: give --mask-suffix"));
    // --image-suffix: Cityscapes' names (x_leftImg8bit.png with x_gtFine_color.png)
    fs::create_directories(dir / "city/left");
    fs::create_directories(dir / "city/fine");
    for (int i = 0; i < 2; ++i) {
        const std::string n = "aachen_00000" + std::to_string(i);
        fs::copy_file(dir / ("src/images/img_000" + std::to_string(i) + ".png"), dir / ("city/left/" + n + "_leftImg8bit.png"));
        fs::copy_file(dir / ("src/masks/img_000" + std::to_string(i) + ".png"), dir / ("city/fine/" + n + "_gtFine_color.png"));
    }
    r = cli({"build", "--images", dir / "city/left", "--masks", dir / "city/fine", "--image-suffix", "_leftImg8bit",
             "--mask-suffix", "_gtFine_color", "--classes", dict, "--out", dir / "e"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    CHECK(dataset::open(dir / "e").size() == 2);
    // the suffix options need folders
    CHECK(cli({"build", "--csv", dir / "src/list.csv", "--mask-suffix", "_L", "--classes", dict, "--out", dir / "f"}).code == 2);
    CHECK(cli({"colors", "--csv", dir / "src/list.csv", "--mask-suffix", "_L"}).code == 2);
}

TEST_CASE("folder input refuses two masks for one image: names that differ only in case, or only in extension", "[labels][folders]") {
    temp_dir dir("foldercase");
    make_samples(dir / "src", {"--count", "2", "--width", "24", "--height", "16"});
    fs::copy_file(dir / "src/masks/img_0000.png", dir / "src/masks/IMG_0000.png");
    auto r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dir / "src/class_dict.csv",
                  "--out", dir / "a"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("two masks for one image: " + dir / "src/masks/IMG_0000.png and " +
                                      dir / "src/masks/img_0000.png (names that differ only in case)"));
    r = cli({"colors", "--images", dir / "src/images", "--masks", dir / "src/masks"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("names that differ only in case"));
    fs::remove(dir / "src/masks/IMG_0000.png");
    fs::copy_file(dir / "src/masks/img_0001.png", dir / "src/masks/img_0001.jpg");
    r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dir / "src/class_dict.csv",
             "--out", dir / "a"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("img_0001.jpg and ") && Catch::Contains("(the same name, another extension)"));
}

TEST_CASE("colors and build count stray colors alike over whole masks, and say which pixels they counted", "[labels][colors]") {
    // About a second: 14 small masks, two of them with stray colors (make_sample_data --stray-colors).
    temp_dir dir("colcount");
    make_samples(dir / "src", {"--count", "14", "--width", "64", "--height", "48", "--stray-colors"});
    const std::string dict = dir / "src/class_dict.csv";
    for (const bool folders : {false, true}) {
        INFO("folders " << folders);
        std::vector<std::string> input = folders ? std::vector<std::string>{"--images", dir / "src/images", "--masks", dir / "src/masks"}
                                                 : std::vector<std::string>{"--csv", dir / "src/list.csv"};
        std::vector<std::string> args = {"colors", "--classes", dict, "--json"};
        args.insert(args.end(), input.begin(), input.end());
        auto r = cli(args);
        INFO(r.err);
        REQUIRE(r.code == 0);
        const auto census = detail::json::parse(r.out);
        CHECK(census.at("pixels_counted").as_string() == "whole masks");
        std::map<std::string, detail::json> strays;  // color -> entry
        for (const auto& e : census.at("colors").as_array())
            if (e.at("match").as_string() == "unknown") strays[e.at("color").dump()] = e;
        REQUIRE(strays.size() == 2);
        const std::string out = dir / (folders ? "ds-folders" : "ds-csv");
        args = {"build", "--classes", dict, "--out", out, "--unknown-label", "ignore", "--json", "--shuffle"};
        args.insert(args.end(), input.begin(), input.end());
        r = cli(args);
        INFO(r.err);
        REQUIRE(r.code == 0);
        const auto report = detail::json::parse(r.out);
        CHECK(report.at("unknown_pixels_counted").as_string() == "whole masks");
        const auto& unknown = report.at("unknown_colors").as_array();
        REQUIRE(unknown.size() == 2);
        for (const auto& u : unknown) {  // the same counts and the same example, pixel included (shuffled or not)
            const auto& c = strays.at(u.at("color").dump());
            CHECK(u.at("pixels").as_u64() == c.at("pixels").as_u64());
            CHECK(u.at("files").as_u64() == c.at("files").as_u64());
            CHECK(u.at("example").dump() == c.at("example").dump());
        }
        // folder rows are named by file, not by a line of a list nobody wrote
        const std::string example = unknown[0].at("example").at("mask").as_string();
        if (folders) CHECK_THAT(r.err, Catch::Contains("e.g. " + example + " at pixel (") && !Catch::Contains("(line "));
        else CHECK_THAT(r.err, Catch::Contains("e.g. " + example + " (line "));
        // with --size the build counts its records' pixels, and says so
        args = {"build", "--classes", dict, "--out", out + "-sized", "--unknown-label", "ignore", "--json", "--size", "32x32"};
        args.insert(args.end(), input.begin(), input.end());
        r = cli(args);
        REQUIRE(r.code == 0);
        const auto sized = detail::json::parse(r.out);
        CHECK(sized.at("unknown_pixels_counted").as_string() == "records (32x32, after resizing and cropping)");
        CHECK_THAT(r.err, Catch::Contains("pixels of the records (32x32, after resizing and cropping) had colors") &&
                              Catch::Contains("`shardpack colors` counts the whole masks") &&
                              Catch::Contains("at mask pixel (") && Catch::Contains("(the first the record shows)"));
    }
    // a folder entry that fails is named by its file, not "line N"
    write_file(dir / "src/masks/img_0005.png", "not a png");
    auto r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dict, "--out", dir / "bad",
                  "--unknown-label", "ignore"});
    CHECK(r.code == 1);
    CHECK_THAT(r.err, Catch::Contains(dir / "src/images/img_0005.png: ") && !Catch::Contains("images:7"));
    r = cli({"build", "--images", dir / "src/images", "--masks", dir / "src/masks", "--classes", dict, "--out", dir / "bad",
             "--unknown-label", "ignore", "--on-error", "skip"});
    CHECK(r.code == 0);
    CHECK_THAT(r.err, Catch::Contains("skipped " + dir / "src/images/img_0005.png: "));
    r = cli({"colors", "--images", dir / "src/images", "--masks", dir / "src/masks"});
    CHECK(r.code == 1);
    CHECK_THAT(r.out, Catch::Contains("unreadable: " + dir / "src/masks/img_0005.png: ") && !Catch::Contains("line "));
}
