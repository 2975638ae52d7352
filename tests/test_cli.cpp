// The shardpack command line, end to end: build, inspect, verify and export on generated data
// and on the shared conformance images; exit codes; the report; determinism.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "decode/image_decoder.hpp"
#include "decode/jpeg_encoder.hpp"
#include "decode/png_encoder.hpp"
#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> read_lines(const std::string& path) {
    std::vector<std::string> lines;
    std::istringstream in(read_file(path));
    std::string line;
    while (std::getline(in, line)) lines.push_back(line);
    return lines;
}

}  // namespace

TEST_CASE("segmentation without resizing round-trips images and masks bit-exactly", "[cli][seg]") {
    for (bool palette : {false, true}) {
        temp_dir dir("seg");
        make_samples(dir / "src", palette ? std::vector<std::string>{"--count", "6", "--palette-masks", "--spaces"}
                                          : std::vector<std::string>{"--count", "6", "--spaces"});
        const auto r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds"});
        INFO(r.err);
        REQUIRE(r.code == 0);
        auto ds = dataset::open(dir / "ds");
        REQUIRE(ds.size() == 6);
        REQUIRE(ds.schema().task == task::segmentation);
        REQUIRE(ds.classes().size() == 6);
        REQUIRE(ds.classes()[2].name == "road");
        const auto lines = read_lines(dir / "src/list.csv");
        for (std::size_t i = 0; i < 6; ++i) {
            const auto e = cli({"export", dir / "ds", "--index", std::to_string(i), "--out", dir / ("x" + std::to_string(i))});
            REQUIRE(e.code == 0);
            const auto info = detail::json::parse(e.out);
            const std::string key = info.at("key").as_string();
            REQUIRE(lines[i + 1].find(key) != std::string::npos);  // CSV order, key as written
            const image_u8 src = decode_file(dir / ("src/" + key));
            const image_u8 out = decode_file(info.at("image").as_string());
            REQUIRE(out.width == src.width);
            REQUIRE(out.pixels == src.pixels);
            std::string mask_key = key;
            mask_key.replace(0, 6, "masks");  // images/... -> masks/...
            mask_key.replace(mask_key.size() - 4, 4, ".png");
            const image_u8 src_mask = decode_file(dir / ("src/" + mask_key));
            const image_u8 out_mask = decode_file(info.at("label").as_string());
            REQUIRE(out_mask.pixels == src_mask.pixels);  // mapped by color, drawn back in the dictionary's colors
        }
        const auto v = cli({"verify", dir / "ds"});
        INFO(v.err);
        REQUIRE(v.code == 0);
    }
}

TEST_CASE("resized masks hold only dictionary colors and share the image's box", "[cli][seg]") {
    temp_dir dir("resize");
    make_samples(dir / "src", {"--count", "4", "--width", "200", "--height", "150"});
    for (const std::string mode : {"stretch", "shorter", "fit", "none"}) {
        for (const std::string filter : {"area", "bilinear", "lanczos"}) {
            const auto r = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out",
                                dir / "ds", "--size", "96x64", "--resize", mode, "--filter", filter, "--label-layout", "index"});
            INFO(mode << " " << filter << ": " << r.err);
            REQUIRE(r.code == 0);
            auto ds = dataset::open(dir / "ds");
            REQUIRE(ds.schema().fixed_width == 96);
            REQUIRE(ds.schema().fixed_height == 64);
            for (std::size_t i = 0; i < ds.size(); ++i) {
                const auto s = ds.at(i);
                REQUIRE(s.image().shape() == std::array<std::size_t, 3>{64, 96, 3});
                std::size_t ignored = 0;
                for (auto v : s.label()) {
                    REQUIRE((v < 6 || v == 255));
                    ignored += v == 255;
                }
                if (mode == "fit") REQUIRE(ignored > 0);  // 200x150 fit into 96x64 pads the sides
                if (mode == "fit") REQUIRE(s.image()[0] == 0);  // image padding is 0
                if (mode != "fit") REQUIRE(ignored == 0);
            }
        }
    }
}

TEST_CASE("classification from JPEGs with spaces in paths, a GIF is refused by name and line", "[cli][cls]") {
    temp_dir dir("cls");
    make_samples(dir / "src", {"--task", "cls", "--count", "9", "--jpeg", "--spaces", "--width", "120", "--height", "100"});
    // A GIF among them, named .jpg: the format is found from the bytes.
    write_file(dir / "src/images/fake.jpg", "GIF89a\x01\x00\x01\x00\x00\x00\x00;");
    {
        std::ofstream list(dir / "src/list.csv", std::ios::app);
        list << "images/fake.jpg,car\n";
    }
    auto r = cli({"build", "--csv", dir / "src/list.csv", "--out", dir / "ds", "--size", "64x64"});
    REQUIRE(r.code == 1);
    REQUIRE_THAT(r.err, Catch::Contains("list.csv:11") && Catch::Contains("fake.jpg") && Catch::Contains("GIF"));
    REQUIRE_FALSE(fs::exists(dir / "ds/manifest.json"));  // nothing published

    r = cli({"build", "--csv", dir / "src/list.csv", "--out", dir / "ds", "--size", "64x64", "--on-error", "skip", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto report = detail::json::parse(r.out);
    REQUIRE(report.at("records").as_u64() == 9);
    REQUIRE(report.at("skipped").as_u64() == 1);
    REQUIRE(report.at("rejected").as_array()[0].at("line").as_u64() == 11);
    const auto rejected = read_lines(dir / "ds/rejected.csv");
    REQUIRE(rejected.size() == 2);
    REQUIRE_THAT(rejected[1], Catch::StartsWith("11,") && Catch::Contains("GIF"));
    auto ds = dataset::open(dir / "ds");
    REQUIRE(ds.schema().task == task::classification);
    // Names collected from the list, sorted.
    std::vector<std::string> names;
    for (const auto& c : ds.classes()) names.push_back(c.name);
    REQUIRE(std::is_sorted(names.begin(), names.end()));
    std::uint64_t counted = 0;
    for (const auto& f : report.at("class_frequencies").as_array()) counted += f.at("samples").as_u64();
    REQUIRE(counted == 9);
    for (std::size_t i = 0; i < ds.size(); ++i) {
        const auto s = ds.at(i);
        REQUIRE(s.image().shape() == std::array<std::size_t, 3>{64, 64, 3});
        REQUIRE(s.one_hot()[std::size_t(s.class_id())] == 1);
    }
}

TEST_CASE("the output is byte-identical for any thread count, and shuffling is seeded", "[cli][determinism]") {
    temp_dir dir("det");
    make_samples(dir / "src", {"--count", "12", "--width", "96", "--height", "64"});
    auto build = [&](const std::string& out, std::vector<std::string> extra) {
        std::vector<std::string> args = {"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv",
                                         "--out", dir / out, "--shard-size", "64KiB"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = cli(args);
        INFO(r.err);
        REQUIRE(r.code == 0);
        return detail::json::parse(read_file(dir / (out + "/manifest.json")));
    };
    const auto one = build("t1", {"--threads", "1"});
    const auto two = build("t2", {"--threads", "2"});
    const auto eight = build("t8", {"--threads", "8"});
    REQUIRE(one.at("shards").as_array().size() > 1);
    REQUIRE(one.at("content_hash").as_string() == two.at("content_hash").as_string());
    REQUIRE(one.at("content_hash").as_string() == eight.at("content_hash").as_string());
    for (const auto& s : one.at("shards").as_array()) {
        const std::string name = s.at("file").as_string();
        REQUIRE(read_file(dir / ("t1/" + name)) == read_file(dir / ("t8/" + name)));
    }
    REQUIRE(read_file(dir / "t1/manifest.json") == read_file(dir / "t2/manifest.json"));

    const auto s1 = build("s1", {"--shuffle", "--seed", "7", "--threads", "1"});
    const auto s2 = build("s2", {"--shuffle", "--seed", "7", "--threads", "2"});
    const auto s3 = build("s3", {"--shuffle", "--seed", "8"});
    REQUIRE(s1.at("content_hash").as_string() == s2.at("content_hash").as_string());
    REQUIRE(s1.at("content_hash").as_string() != s3.at("content_hash").as_string());
    REQUIRE(s1.at("content_hash").as_string() != one.at("content_hash").as_string());
    auto a = dataset::open(dir / "s1");
    std::set<std::string> keys;
    for (std::size_t i = 0; i < a.size(); ++i) keys.insert(std::string(a.at(i).key()));
    REQUIRE(keys.size() == 12);  // a permutation: every row once
}

TEST_CASE("bad input names the file, the CSV line and the reason", "[cli][errors]") {
    temp_dir dir("bad");
    make_samples(dir / "src", {"--count", "3", "--width", "40", "--height", "30"});
    const std::string csv = dir / "src/list.csv", dict = dir / "src/class_dict.csv";

    SECTION("a color not in the dictionary") {
        image_u8 mask = decode_file(dir / "src/masks/img_0001.png");
        mask.pixels[(5 * 40 + 7) * 3] = 1;  // pixel (7,5) becomes (1, g, b)
        const auto png = encode_png(mask);
        write_file(dir / "src/masks/img_0001.png", std::string(png.begin(), png.end()));
        auto r = cli({"build", "--csv", csv, "--classes", dict, "--out", dir / "ds"});
        REQUIRE(r.code == 1);
        REQUIRE_THAT(r.err, Catch::Contains("list.csv:3") && Catch::Contains("img_0001.png") && Catch::Contains("(7,5)") &&
                                Catch::Contains("(1,"));
        r = cli({"build", "--csv", csv, "--classes", dict, "--out", dir / "ds", "--unknown-label", "ignore", "--json",
                 "--label-layout", "index"});
        REQUIRE(r.code == 0);
        REQUIRE(detail::json::parse(r.out).at("unknown_color_pixels").as_u64() == 1);
        auto ds = dataset::open(dir / "ds");
        const auto second = ds.at(1);
        REQUIRE(second.label()[5 * 40 + 7] == 255);
    }
    SECTION("an image whose mask has another size") {
        image_u8 small{20, 10, 3, std::vector<std::uint8_t>(20 * 10 * 3, 128)};
        const auto png = encode_png(small);
        write_file(dir / "src/masks/img_0002.png", std::string(png.begin(), png.end()));
        const auto r = cli({"build", "--csv", csv, "--classes", dict, "--out", dir / "ds"});
        REQUIRE(r.code == 1);
        REQUIRE_THAT(r.err, Catch::Contains("list.csv:4") && Catch::Contains("20x10") && Catch::Contains("40x30"));
    }
    SECTION("a missing file") {
        fs::remove(dir / "src/images/img_0000.png");
        const auto r = cli({"build", "--csv", csv, "--classes", dict, "--out", dir / "ds"});
        REQUIRE(r.code == 1);
        REQUIRE_THAT(r.err, Catch::Contains("list.csv:2") && Catch::Contains("img_0000.png") && Catch::Contains("cannot open"));
    }
    SECTION("a truncated JPEG is an error, not a warning") {
        const std::vector<std::uint8_t> jpg = encode_jpeg(random_image(96, 64, 3, 5));
        write_file(dir / "cut.jpg", std::string(jpg.begin(), jpg.begin() + long(jpg.size() / 2)));
        write_file(dir / "cls.csv", "cut.jpg,0\n");
        const auto r = cli({"build", "--csv", dir / "cls.csv", "--out", dir / "ds"});
        REQUIRE(r.code == 1);
        REQUIRE_THAT(r.err, Catch::Contains("cls.csv:1") && Catch::Contains("cut.jpg"));
    }
    SECTION("--max-errors stops a run gone bad and publishes nothing") {
        write_file(dir / "many.csv", "a.png,0\nb.png,0\nc.png,0\nd.png,0\n");
        const auto r = cli({"build", "--csv", dir / "many.csv", "--out", dir / "ds", "--task", "cls", "--on-error", "skip",
                            "--max-errors", "2"});
        REQUIRE(r.code == 1);
        REQUIRE_THAT(r.err, Catch::Contains("--max-errors"));
        REQUIRE_FALSE(fs::exists(dir / "ds/manifest.json"));
    }
}

TEST_CASE("exit codes: 2 for bad usage, 1 for bad data, 0 for success", "[cli][usage]") {
    temp_dir dir("usage");
    make_samples(dir / "src", {"--count", "2", "--width", "32", "--height", "32"});
    const std::string csv = dir / "src/list.csv", dict = dir / "src/class_dict.csv";
    REQUIRE(cli({}).code == 2);
    REQUIRE(cli({"build"}).code == 2);
    REQUIRE(cli({"build", "--csv", csv, "--out", dir / "ds", "--bogus"}).code == 2);
    REQUIRE(cli({"build", "--csv", csv, "--out", dir / "ds", "--size", "12by4"}).code == 2);
    REQUIRE(cli({"build", "--csv", csv, "--out", dir / "ds", "--resize", "fit"}).code == 2);
    REQUIRE(cli({"build", "--csv", csv, "--out", dir / "ds", "--filter", "cubic"}).code == 2);
    REQUIRE(cli({"build", "--csv", csv, "--out", dir / "ds", "--shard-size", "12parsecs"}).code == 2);
    REQUIRE(cli({"build", "--csv", csv, "--out", dir / "ds", "--max-errors", "3"}).code == 2);
    REQUIRE(cli({"build", "--csv", csv, "--out", dir / "ds", "--header", "--no-header"}).code == 2);
    REQUIRE(cli({"build", "--csv", dir / "nope.csv", "--out", dir / "ds"}).code == 1);
    REQUIRE(cli({"inspect", dir / "nothing-here"}).code == 1);
    const auto help = cli({"build", "--help"});
    REQUIRE(help.code == 0);
    REQUIRE_THAT(help.out, Catch::Contains("--label-layout") && Catch::Contains("--config"));
    REQUIRE(cli({"--version"}).code == 0);
    const auto quiet = cli({"-q", "build", "--csv", csv, "--classes", dict, "--out", dir / "ds"});
    REQUIRE(quiet.code == 0);
    REQUIRE(quiet.err.empty());  // -q: errors only; and no progress line when stderr is not a terminal
    const auto loud = cli({"-v", "build", "--csv", csv, "--classes", dict, "--out", dir / "ds"});
    REQUIRE_THAT(loud.err, Catch::Contains("debug"));
}

TEST_CASE("inspect, verify and export describe and check a dataset", "[cli][tools]") {
    temp_dir dir("tools");
    make_samples(dir / "src", {"--count", "8", "--width", "64", "--height", "48"});
    REQUIRE(cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds",
                 "--shard-size", "32KiB", "--report", dir / "report.json"})
                .code == 0);
    const auto report = detail::json::parse(read_file(dir / "report.json"));
    REQUIRE(report.at("records").as_u64() == 8);
    REQUIRE(report.at("compression_ratio").as_double() > 1.0);
    REQUIRE(report.at("bytes_in").as_u64() > 0);
    REQUIRE(fs::exists(dir / "ds/report.json"));
    double fractions = 0;
    for (const auto& f : report.at("class_frequencies").as_array()) fractions += f.at("fraction").as_double();
    REQUIRE(fractions == Approx(1.0));

    auto r = cli({"inspect", dir / "ds", "--json"});
    REQUIRE(r.code == 0);
    const auto info = detail::json::parse(r.out);
    REQUIRE(info.at("records").as_u64() == 8);
    REQUIRE(info.at("shards").as_array().size() > 1);
    r = cli({"inspect", dir / "ds"});
    REQUIRE(r.code == 0);
    REQUIRE_THAT(r.out, Catch::Contains("records      8") && Catch::Contains("pedestrian") && Catch::Contains("shard-00001-"));

    r = cli({"verify", dir / "ds", "--json"});
    REQUIRE(r.code == 0);
    REQUIRE(detail::json::parse(r.out).at("ok").as_bool());

    // Damage one record's bytes: verify names the shard and the record.
    const auto first = info.at("shards").as_array()[1].at("file").as_string();
    std::string bytes = read_file(dir / ("ds/" + first));
    detail::shard_file shard(dir / ("ds/" + first), first);
    bytes[shard.entry(0).offset + 20] ^= 1;
    write_file(dir / ("ds/" + first), bytes);
    r = cli({"verify", dir / "ds"});
    REQUIRE(r.code == 1);
    REQUIRE_THAT(r.err, Catch::Contains(first) && Catch::Contains("record 0"));

    // An extra shard in the folder is found too.
    write_file(dir / ("ds/" + first), read_file(dir / ("ds/" + first)));
    fs::copy_file(dir / ("ds/" + first), dir / "ds/shard-00099-0000000000000000.spk");
    r = cli({"verify", dir / "ds"});
    REQUIRE(r.code == 1);
    REQUIRE_THAT(r.err, Catch::Contains("extra shard shard-00099"));

    r = cli({"export", dir / "ds", "--index", "99", "--out", dir / "x"});
    REQUIRE(r.code == 1);
    REQUIRE_THAT(r.err, Catch::Contains("out of range"));
}

TEST_CASE("color conversion: gray is BT.601 luma as PIL's L, rgba keeps alpha", "[cli][color]") {
    temp_dir dir("gray");
    image_u8 rgba{3, 2, 4, {10, 200, 30, 5, 255, 0, 0, 255, 0, 255, 0, 128, 0, 0, 255, 0, 1, 2, 3, 4, 250, 251, 252, 253}};
    const auto png = encode_png(rgba);
    write_file(dir / "a.png", std::string(png.begin(), png.end()));
    write_file(dir / "list.csv", "a.png,0\n");
    for (const std::string color : {"gray", "rgb", "rgba"}) {
        REQUIRE(cli({"build", "--csv", dir / "list.csv", "--out", dir / color, "--color", color}).code == 0);
        auto ds = dataset::open(dir / color);
        const auto first = ds.at(0);
        const auto img = first.image();
        if (color == "gray") {
            REQUIRE(img.shape()[2] == 1);
            for (std::size_t p = 0; p < 6; ++p) {
                const unsigned r = rgba.pixels[p * 4], g = rgba.pixels[p * 4 + 1], b = rgba.pixels[p * 4 + 2];
                REQUIRE(img[p] == ((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16));
            }
        } else if (color == "rgb") {
            for (std::size_t p = 0; p < 6; ++p)
                for (std::size_t c = 0; c < 3; ++c) REQUIRE(img[p * 3 + c] == rgba.pixels[p * 4 + c]);  // alpha dropped
        } else {
            REQUIRE(std::equal(img.begin(), img.end(), rgba.pixels.begin()));
        }
    }
}

TEST_CASE("build --config reads options from a file, as cron jobs keep them", "[cli][config]") {
    temp_dir dir("cfg");
    make_samples(dir / "src", {"--count", "3", "--width", "64", "--height", "48"});
    write_file(dir / "job.toml", "csv = \"" + (dir / "src/list.csv") + "\"\nclasses = \"" + (dir / "src/class_dict.csv") +
                                     "\"\nout = \"" + (dir / "ds") + "\"\nsize = \"32x32\"\nlabel-layout = \"index\"\n");
    const auto r = cli({"build", "--config", dir / "job.toml"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto ds = dataset::open(dir / "ds");
    REQUIRE(ds.schema().fixed_width == 32);
    REQUIRE(ds.schema().layout == label_layout::index);
}

TEST_CASE("build --config with an unknown key names the file and the key", "[cli][config]") {
    temp_dir dir("cfgkey");
    make_samples(dir / "src", {"--count", "2", "--width", "16", "--height", "16"});
    write_file(dir / "job.toml", "csv = \"" + (dir / "src/list.csv") + "\"\nclasses = \"" + (dir / "src/class_dict.csv") +
                                     "\"\nout = \"" + (dir / "ds") + "\"\nbogus_key = 3\n");
    const auto r = cli({"build", "--config", dir / "job.toml"});
    REQUIRE(r.code == 2);
    REQUIRE_THAT(r.err, Catch::Contains(dir / "job.toml") && Catch::Contains("unknown key 'bogus_key'"));
    REQUIRE_FALSE(fs::exists(dir / "ds"));
}

TEST_CASE("input list options: header, columns by name, --root", "[cli][input]") {
    temp_dir dir("cols");
    make_samples(dir / "src", {"--count", "3", "--width", "32", "--height", "32"});
    // Columns swapped and named, paths relative to a root that is not the CSV's folder.
    std::string csv = "mask,id,image\n";
    for (int i = 0; i < 3; ++i) {
        char line[128];
        std::snprintf(line, sizeof line, "masks/img_%04d.png,%d,images/img_%04d.png\n", i, i, i);
        csv += line;
    }
    fs::create_directories(dir / "lists");
    write_file(dir / "lists/l.csv", csv);
    const auto r = cli({"build", "--csv", dir / "lists/l.csv", "--root", dir / "src", "--image-col", "image", "--label-col",
                        "mask", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds", "--header"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto ds = dataset::open(dir / "ds");
    REQUIRE(ds.size() == 3);
    REQUIRE(ds.at(2).key() == "images/img_0002.png");
    // Without --root the paths resolve against the CSV's folder, where they do not exist.
    const auto missing = cli({"build", "--csv", dir / "lists/l.csv", "--image-col", "image", "--label-col", "mask",
                              "--classes", dir / "src/class_dict.csv", "--out", dir / "ds2", "--task", "seg"});
    REQUIRE(missing.code == 1);
}

TEST_CASE("PngSuite: every corrupt x*.png is refused, every other file packs", "[cli][pngsuite]") {
    const std::string suite = std::string(SHARDPACK_SHARED_DATA) + "/pngsuite";
    if (!fs::is_directory(suite)) SHARDPACK_SKIP("PngSuite not found at " + suite);
    temp_dir dir("suite");
    std::string csv;
    std::size_t corrupt = 0, good = 0;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(suite))
        if (e.path().extension() == ".png") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    for (const auto& name : names) {
        csv += suite + "/" + name + ",0\n";
        (name[0] == 'x' ? corrupt : good)++;
    }
    REQUIRE(corrupt >= 14);
    write_file(dir / "suite.csv", csv);
    for (const std::string color : {"rgb", "gray", "rgba"}) {
        const auto r = cli({"build", "--csv", dir / "suite.csv", "--out", dir / ("ds-" + color), "--on-error", "skip",
                            "--color", color, "--json", "--task", "cls"});
        INFO(r.err);
        REQUIRE(r.code == 0);
        const auto report = detail::json::parse(r.out);
        REQUIRE(report.at("records").as_u64() == good);
        for (const auto& rej : report.at("rejected").as_array())
            REQUIRE(fs::path(rej.at("image").as_string()).filename().string()[0] == 'x');
        REQUIRE(report.at("skipped").as_u64() == corrupt);
    }
}

TEST_CASE("libjpeg-turbo's test images: baseline, progressive, arithmetic pack, 12-bit is refused", "[cli][jpeg]") {
    const std::string jpeg = std::string(SHARDPACK_SHARED_DATA) + "/jpeg/";
    if (!fs::is_directory(jpeg)) SHARDPACK_SKIP("libjpeg-turbo's test images not found at " + jpeg);
    temp_dir dir("jpeg");
    write_file(dir / "list.csv", jpeg + "testorig.jpg,0\n" + jpeg + "testimgint.jpg,0\n" + jpeg + "testimgari.jpg,0\n" + jpeg +
                                     "monkey16.png,0\n" + jpeg + "testorig.png,0\n" + jpeg + "monkey12.jpg,0\n");
    const auto r = cli({"build", "--csv", dir / "list.csv", "--out", dir / "ds", "--on-error", "skip", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto report = detail::json::parse(r.out);
    REQUIRE(report.at("records").as_u64() == 5);
    REQUIRE(report.at("rejected").as_array().size() == 1);
    REQUIRE_THAT(report.at("rejected").as_array()[0].at("reason").as_string(), Catch::Contains("12-bit"));
    // The stored baseline JPEG equals a direct decode of it.
    auto ds = dataset::open(dir / "ds");
    const image_u8 direct = decode_file(jpeg + "testorig.jpg");
    const auto first = ds.at(0);
    const auto img = first.image();
    REQUIRE(std::equal(img.begin(), img.end(), direct.pixels.begin(), direct.pixels.end()));
}

TEST_CASE("crop placement, --no-header, --task seg, --compression none and --level", "[cli][options]") {
    temp_dir dir("opts");
    make_samples(dir / "src", {"--count", "3", "--width", "40", "--height", "30"});
    // A list with no header row, so the first row is data.
    const auto lines = read_lines(dir / "src/list.csv");
    std::string body;
    for (std::size_t i = 1; i < lines.size(); ++i) body += lines[i] + "\n";
    write_file(dir / "src/nohead.csv", body);
    const std::string dict = dir / "src/class_dict.csv";
    auto build = [&](const std::string& out, std::vector<std::string> extra) {
        std::vector<std::string> args = {"build", "--csv", dir / "src/nohead.csv", "--classes", dict, "--out", dir / out,
                                         "--no-header", "--task", "seg"};
        args.insert(args.end(), extra.begin(), extra.end());
        const auto r = cli(args);
        INFO(r.err);
        REQUIRE(r.code == 0);
        return dataset::open(dir / out);
    };
    const image_u8 src = decode_file(dir / "src/images/img_0000.png");
    // Crop without resizing: a 20x10 window, centred ((40-20)/2, (30-10)/2) or at the top left.
    for (const std::string crop : {"center", "topleft"}) {
        auto ds = build("crop-" + crop, {"--size", "20x10", "--resize", "none", "--crop", crop});
        REQUIRE(ds.size() == 3);  // --no-header: the first row is a sample
        const auto first = ds.at(0);  // a view is valid while its sample lives
        const auto img = first.image();
        const std::size_t x0 = crop == "center" ? 10 : 0, y0 = crop == "center" ? 10 : 0;
        for (std::size_t y = 0; y < 10; ++y)
            for (std::size_t x = 0; x < 20; ++x)
                for (std::size_t c = 0; c < 3; ++c)
                    REQUIRE(img[(y * 20 + x) * 3 + c] == src.pixels[((y0 + y) * 40 + x0 + x) * 3 + c]);
    }
    // Padding without resizing (tf crop_or_pad): the 40x30 image centred in 50x40, zeros around,
    // ignored mask pixels around.
    {
        auto ds = build("pad", {"--size", "50x40", "--resize", "none", "--label-layout", "index"});
        const auto s = ds.at(0);
        REQUIRE(s.image()[0] == 0);
        REQUIRE(s.image()[((5 * 50) + 5) * 3] == src.pixels[0]);
        REQUIRE(s.label()[0] == 255);
        REQUIRE(s.label()[5 * 50 + 5] < 6);
    }
    // shorter with --crop none keeps the whole scaled image: 30 high -> 20 high, 40 wide -> 27.
    {
        auto ds = build("nocrop", {"--size", "20x20", "--resize", "shorter", "--crop", "none"});
        REQUIRE(ds.schema().fixed_width == 0);
        const auto first = ds.at(0);
        REQUIRE(first.image().shape() == std::array<std::size_t, 3>{20, 27, 3});
    }
    // Stored raw: every record raw, the same pixels as with zstd at any level.
    auto raw = build("raw", {"--compression", "none"});
    auto z1 = build("z1", {"--level", "1"});
    auto z19 = build("z19", {"--level", "19"});
    for (std::size_t i = 0; i < 3; ++i) {
        REQUIRE(raw.shard(0).entry(i).codec == detail::codec_raw);
        REQUIRE(z19.shard(0).entry(i).codec == detail::codec_zstd_region_bands);  // segmentation: a band height per region
        REQUIRE(z19.shard(0).entry(i).stored_size <= z1.shard(0).entry(i).stored_size);
        const auto sa = raw.at(i), sb = z19.at(i);
        const auto a = sa.image(), b = sb.image();
        REQUIRE(std::equal(a.begin(), a.end(), b.begin()));
    }
    REQUIRE(z1.manifest().at("build").at("level").as_i64() == 1);
    // The other codecs: band frames of a given height, 1.0 record frames, auto, and the usage error.
    auto bands = build("bands", {"--band-rows", "7"});
    auto record_frames = build("record", {"--compression", "zstd-record"});
    auto automatic = build("auto", {"--compression", "auto"});
    REQUIRE(bands.manifest().at("format_version").as_string() == "1.1");
    REQUIRE(bands.manifest().at("build").at("band_rows").as_i64() == 7);
    REQUIRE(record_frames.manifest().at("format_version").as_string() == "1.0");
    REQUIRE(automatic.manifest().at("build").at("compression").as_string() == "auto");
    for (std::size_t i = 0; i < 3; ++i) {
        const auto e = bands.shard(0).entry(i);
        REQUIRE(e.codec == detail::codec_zstd_bands);
        REQUIRE(detail::load_u32(bands.shard(0).bytes() + e.offset + 64) == 7);  // band_rows after the 64-byte prefix
        REQUIRE(record_frames.shard(0).entry(i).codec == detail::codec_zstd);
        const auto a = automatic.shard(0).entry(i);
        REQUIRE(a.codec ==
                (2 * z1.shard(0).entry(i).stored_size <= a.decoded_size ? detail::codec_zstd_region_bands : detail::codec_raw));
        const auto sa = raw.at(i), sb = bands.at(i), sc = record_frames.at(i), sd = automatic.at(i);
        REQUIRE(std::equal(sa.image().begin(), sa.image().end(), sb.image().begin()));
        REQUIRE(std::equal(sa.image().begin(), sa.image().end(), sc.image().begin()));
        REQUIRE(std::equal(sa.image().begin(), sa.image().end(), sd.image().begin()));
    }
    const auto bad = cli({"build", "--csv", dir / "src/nohead.csv", "--classes", dict, "--out", dir / "bad", "--no-header",
                          "--task", "seg", "--compression", "none", "--band-rows", "4"});
    REQUIRE(bad.code == 2);
    REQUIRE_THAT(bad.err, Catch::Contains("--band-rows needs --compression zstd or auto"));
}

TEST_CASE("a progress line with rate and ETA on a terminal, none otherwise", "[cli][progress]") {
    if (std::system("command -v script >/dev/null 2>&1") != 0) {
        SHARDPACK_SKIP("util-linux 'script' is missing; cannot give the CLI a terminal");
    }
    temp_dir dir("tty");
    make_samples(dir / "src", {"--count", "4", "--width", "32", "--height", "32"});
    const std::string build = shell_quote(SHARDPACK_CLI) + " build --csv " + shell_quote(dir / "src/list.csv") + " --classes " +
                              shell_quote(dir / "src/class_dict.csv") + " --out " + shell_quote(dir / "ds");
    // `script` runs the command on a pseudo-terminal and copies what it shows to the typescript.
    const std::string cmd = "script -qec " + shell_quote(build) + " " + shell_quote(dir / "typescript") + " >/dev/null 2>&1";
    REQUIRE(std::system(cmd.c_str()) == 0);
    const std::string shown = read_file(dir / "typescript");
    REQUIRE_THAT(shown, Catch::Contains("4/4 rows") && Catch::Contains("samples/s") && Catch::Contains("ETA"));
    const auto piped = cli({"build", "--csv", dir / "src/list.csv", "--classes", dir / "src/class_dict.csv", "--out", dir / "ds"});
    REQUIRE_THAT(piped.err, !Catch::Contains("ETA"));
}

namespace {
// The process's working folder for a scope: what a relative --out resolves against.
struct in_folder {
    fs::path was = fs::current_path();
    explicit in_folder(const fs::path& p) { fs::current_path(p); }
    ~in_folder() { fs::current_path(was); }
};
}  // namespace

TEST_CASE("an --out that is a URL is refused with exit 2, pointing to push, and writes no local folder", "[cli][usage][url]") {
    temp_dir dir("urlout");
    make_samples(dir / "src", {"--count", "2", "--width", "16", "--height", "16"});
    const std::string csv = dir / "src/list.csv", dict = dir / "src/class_dict.csv";
    REQUIRE(cli({"-q", "build", "--csv", csv, "--classes", dict, "--out", dir / "ds"}).code == 0);
    fs::create_directories(dir / "cwd");
    in_folder here(dir / "cwd");
    for (const std::string url : {"s3://bucket/x", "gs://bucket/x", "https://host/x", "file:///tmp/x", "s3+x://b/y"}) {
        const auto r = cli({"build", "--csv", csv, "--classes", dict, "--out", url});
        INFO(url << ": " << r.err);
        CHECK(r.code == 2);
        CHECK_THAT(r.err, Catch::Contains("--out " + url + ": is a URL") && Catch::Contains("shardpack push DIR " + url));
    }
    auto r = cli({"build", "--csv", csv, "--classes", dict, "--out", dir / "ok", "--report", "s3://bucket/report.json"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--report s3://bucket/report.json: is a URL"));
    // The other commands that write local files.
    r = cli({"merge", "--out", "s3://bucket/merged", dir / "ds"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--out s3://bucket/merged: is a URL") && Catch::Contains("shardpack push"));
    r = cli({"export", dir / "ds", "--index", "0", "--out", "s3://bucket/sample"});
    CHECK(r.code == 2);
    CHECK_THAT(r.err, Catch::Contains("--out s3://bucket/sample: is a URL"));
    CHECK(fs::is_empty(dir / "cwd"));  // no folder "s3:" (or "gs:", "https:") was made
    CHECK(!fs::exists(dir / "ok"));
    // A local folder whose name looks like a URL, said as a path.
    r = cli({"-q", "build", "--csv", csv, "--classes", dict, "--out", "./s3://bucket/x"});
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(fs::exists(dir / "cwd/s3:/bucket/x/manifest.json"));
}
