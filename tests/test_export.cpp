// `shardpack export`: a record's image and its label drawn as PNGs (ignored pixels as a visible
// checkerboard), overlays, several records and keys, the JSON it prints. End to end through the CLI.
#include <catch2/catch.hpp>

#include <filesystem>

#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

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
                CHECK(pack_rgb(&label.pixels[p]) == (magenta ? 0xFF00FFu : 0u));
            } else {
                CHECK(pack_rgb(&label.pixels[p]) == pack_rgb(&mask.pixels[p]));
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
