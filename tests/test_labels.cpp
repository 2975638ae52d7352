// Real label data (issue #11): --color-tolerance, helpful unknown-color messages, index masks
// (gray 8/16-bit, palette indices, sparse name,id tables, --ignore-values), class ids, and failed
// skip builds that keep their reasons. Library units first, then the CLI end to end. The
// `colors` command is tested in test_colors.cpp, export in test_export.cpp, image folders in
// test_input.cpp, fingerprint lines in test_rebuild.cpp.
#include <catch2/catch.hpp>

#include <png.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "decode/image_decoder.hpp"
#include "decode/png_encoder.hpp"
#include "decode/png_value_decoder.hpp"
#include "input/class_table.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"
#include "transform/index_mask.hpp"
#include "transform/label_map.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

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

// ---------------------------------------------------------------------------------------------
// The command line

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
