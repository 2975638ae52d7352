// `shardpack colors`: exact counts of every mask color, the nearest class and its distance,
// unused classes, a dictionary that builds; an unreadable mask and index masks; the same counts
// as build's over whole masks. End to end through the CLI on make_sample_data's images.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

// The masks' color histogram, counted here the plain way.
std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> histogram(const std::string& src, int count) {
    std::map<std::uint32_t, std::pair<std::uint64_t, std::uint64_t>> h;  // color -> pixels, files
    for (int i = 0; i < count; ++i) {
        char stem[32];
        std::snprintf(stem, sizeof stem, "img_%04d", i);
        const image_u8 m = decode_file(src + "/masks/" + stem + ".png");
        std::map<std::uint32_t, std::uint64_t> one;
        for (std::size_t p = 0; p < std::size_t(m.width) * m.height; ++p) ++one[pack_rgb(&m.pixels[p * 3])];
        for (const auto& [c, n] : one) {
            h[c].first += n;
            h[c].second += 1;
        }
    }
    return h;
}

}  // namespace

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
