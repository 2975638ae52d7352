// Each input file is probed once on its way through a build (issue #20): its format sniffed
// once, as it is read, and its header parsed once before decoding plus once by the decoder
// that decodes it. The counters are decode/probe_counts.hpp's; the builds run in this process
// (run_build), with one thread so that nothing else counts meanwhile. About 1 s.
// Every build's files stay until the process ends: a build remembers its inputs by device and
// inode (io/input_file.hpp) for the process's life, and a later build's output file must not
// get the inode of a removed input of an earlier one.
#include <catch2/catch.hpp>
#include <png.h>

#include <cstdio>
#include <string>
#include <vector>

#include "decode/jpeg_encoder.hpp"
#include "decode/png_encoder.hpp"
#include "decode/probe_counts.hpp"
#include "pipeline/build_pipeline.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

image_u8 make_image(std::uint32_t w, std::uint32_t h, std::uint32_t channels, std::uint32_t seed) {
    image_u8 img;
    img.width = w;
    img.height = h;
    img.channels = channels;
    img.pixels.resize(std::size_t(w) * h * channels);
    for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<std::uint8_t>(i * 7 + seed * 31);
    return img;
}

// A 16-bit grayscale PNG: not for the fast path, so libpng decodes it.
std::vector<std::uint8_t> encode_png_gray16(std::uint32_t w, std::uint32_t h, std::uint32_t seed) {
    std::vector<std::uint16_t> pixels(std::size_t(w) * h);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint16_t>(i * 977 + seed * 4099);
    png_image img{};
    img.version = PNG_IMAGE_VERSION;
    img.width = w;
    img.height = h;
    img.format = PNG_FORMAT_LINEAR_Y;
    png_alloc_size_t size = 0;
    REQUIRE(png_image_write_to_memory(&img, nullptr, &size, 0, pixels.data(), 0, nullptr));
    std::vector<std::uint8_t> out(size);
    REQUIRE(png_image_write_to_memory(&img, out.data(), &size, 0, pixels.data(), 0, nullptr));
    out.resize(size);
    return out;
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
    write_file(path, std::string(bytes.begin(), bytes.end()));
}

// What a build spent per input file.
struct per_file {
    double sniffs, header_parses, png_sessions, jpeg_sessions;
};

per_file build_and_count(const build_options& o, std::size_t files, std::size_t rows) {
    const probe_counts before = read_probe_counts();
    const build_result r = run_build(o);
    const probe_counts after = read_probe_counts();
    REQUIRE(r.totals.records == rows);
    REQUIRE(r.totals.reused == 0);
    const auto per = [&](std::uint64_t a, std::uint64_t b) { return double(a - b) / double(files); };
    per_file p{per(after.sniffs, before.sniffs), per(after.header_parses, before.header_parses),
               per(after.png_sessions, before.png_sessions), per(after.jpeg_sessions, before.jpeg_sessions)};
    std::printf("probe counts per file (%zu files, %s): sniffs %.2f, header parses %.2f, libpng sessions %.2f, "
                "libjpeg sessions %.2f\n",
                files, o.out_dir.c_str(), p.sniffs, p.header_parses, p.png_sessions, p.jpeg_sessions);
    return p;
}

const temp_dir& files_dir() {
    static const temp_dir dir("probe");
    return dir;
}

build_options options_for(const temp_dir& dir, const std::string& name) {
    build_options o;
    o.input.csv_path = dir / (name + ".csv");
    o.out_dir = dir / (name + "_ds");
    o.threads = 1;
    o.full = true;
    // --depth given: no look at the first row before the build (the case below counts that look).
    o.depth = 8;
    return o;
}

}  // namespace

TEST_CASE("probe counts: a segmentation build sniffs each PNG once and parses its header twice (probe, decoder)") {
    const temp_dir& dir = files_dir();
    const std::uint32_t rows = 4;
    std::string csv = "image,mask\n";
    for (std::uint32_t i = 0; i < rows; ++i) {
        const std::string n = std::to_string(i);
        write_bytes(dir / ("s_img" + n + ".png"), encode_png(make_image(20, 12, 3, i)));
        image_u8 mask = make_image(20, 12, 3, 0);
        for (std::size_t p = 0; p < mask.pixels.size(); p += 3) {
            const std::uint8_t c = (p / 3 + i) % 2 ? 200 : 10;
            mask.pixels[p] = mask.pixels[p + 1] = mask.pixels[p + 2] = c;
        }
        write_bytes(dir / ("s_mask" + n + ".png"), encode_png(mask));
        csv += "s_img" + n + ".png,s_mask" + n + ".png\n";
    }
    write_file(dir / "seg.csv", csv);
    write_file(dir / "dict.csv", "name,r,g,b\ndark,10,10,10\nlight,200,200,200\n");
    build_options o = options_for(dir, "seg");
    o.input.classes_path = dir / "dict.csv";
    const per_file p = build_and_count(o, 2 * rows, rows);
    // Before #20: 4 sniffs (the loader, the size read, the memory estimate, the decoder) and 3
    // header parses (a libpng session for the size, IHDR by hand for the estimate, the decoder).
    CHECK(p.sniffs == 1.0);
    CHECK(p.header_parses == 2.0);
    CHECK(p.png_sessions == 1.0);   // the probe's; the 8-bit files decode on the fast path
    CHECK(p.jpeg_sessions == 0.0);
}

TEST_CASE("probe counts: index masks are probed once, the value decoder reading its own header on the one libpng session") {
    const temp_dir& dir = files_dir();
    const std::uint32_t rows = 3;
    {
        std::string csv = "image,mask\n";
        for (std::uint32_t i = 0; i < rows; ++i) {
            const std::string n = std::to_string(i);
            write_bytes(dir / ("i_img" + n + ".png"), encode_png(make_image(16, 8, 3, i)));
            image_u8 mask = make_image(16, 8, 1, 0);
            for (std::size_t p = 0; p < mask.pixels.size(); ++p) mask.pixels[p] = (p + i) % 3;
            write_bytes(dir / ("i_mask" + n + ".png"), encode_png(mask));
            csv += "i_img" + n + ".png,i_mask" + n + ".png\n";
        }
        write_file(dir / "idx.csv", csv);
        write_file(dir / "ids.csv", "name,id\nzero,0\none,1\ntwo,2\n");
        build_options o = options_for(dir, "idx");
        o.input.classes_path = dir / "ids.csv";
        o.mask.values = mask_value_kind::index;
        const per_file p = build_and_count(o, 2 * rows, rows);
        CHECK(p.sniffs == 1.0);
        // image: the probe and the fast decoder's IHDR; mask: the probe only, whose libpng
        // session the value decoder takes up (before: 2 sessions and 3 header reads a mask)
        CHECK(p.header_parses == 1.5);
        CHECK(p.png_sessions == 1.0);
    }
}

TEST_CASE("probe counts: classification JPEGs decoded at a DCT scale are probed once") {
    const temp_dir& dir = files_dir();
    const std::uint32_t rows = 3;
    {
        std::string csv = "image,label\n";
        for (std::uint32_t i = 0; i < rows; ++i) {
            const std::string n = std::to_string(i);
            write_bytes(dir / ("c_img" + n + ".jpg"), encode_jpeg(make_image(64, 48, 3, i)));
            csv += "c_img" + n + ".jpg," + (i % 2 ? "cat" : "dog") + "\n";
        }
        write_file(dir / "cls.csv", csv);
        build_options o = options_for(dir, "cls");
        o.input.task = task_kind::classification;
        o.geometry.width = o.geometry.height = 16;
        o.geometry.resize = resize_mode::shorter;
        const per_file p = build_and_count(o, rows, rows);
        CHECK(p.sniffs == 1.0);  // was 5: the DCT-scaling choice sniffed too
        // One libjpeg session: the decoder takes up the probe's after its header (before: 2
        // sessions, each reading the header)
        CHECK(p.header_parses == 1.0);
        CHECK(p.jpeg_sessions == 1.0);
        CHECK(p.png_sessions == 0.0);
    }
}

TEST_CASE("probe counts: classification PNGs are probed once") {
    const temp_dir& dir = files_dir();
    const std::uint32_t rows = 3;
    std::string csv = "image,label\n";
    for (std::uint32_t i = 0; i < rows; ++i) {
        const std::string n = std::to_string(i);
        write_bytes(dir / ("p_img" + n + ".png"), encode_png(make_image(24, 16, 3, i)));
        csv += "p_img" + n + ".png," + (i % 2 ? "cat" : "dog") + "\n";
    }
    write_file(dir / "pcls.csv", csv);
    build_options o = options_for(dir, "pcls");
    o.input.task = task_kind::classification;
    const per_file p = build_and_count(o, rows, rows);
    CHECK(p.sniffs == 1.0);
    CHECK(p.header_parses == 2.0);  // the probe (libpng) and the fast decoder's IHDR
    CHECK(p.png_sessions == 1.0);
    CHECK(p.jpeg_sessions == 0.0);
}

TEST_CASE("probe counts: a 16-bit PNG is opened by libpng once, its decode taking up the probe's session") {
    const temp_dir& dir = files_dir();
    const std::uint32_t rows = 3;
    std::string csv = "image,label\n";
    for (std::uint32_t i = 0; i < rows; ++i) {
        const std::string n = std::to_string(i);
        write_bytes(dir / ("g_img" + n + ".png"), encode_png_gray16(24, 16, i));
        csv += "g_img" + n + ".png," + (i % 2 ? "cat" : "dog") + "\n";
    }
    write_file(dir / "g16.csv", csv);
    build_options o = options_for(dir, "g16");
    o.input.task = task_kind::classification;
    o.depth = 16;
    const per_file p = build_and_count(o, rows, rows);
    CHECK(p.sniffs == 1.0);
    // The probe's (libpng) and the fast path's look at IHDR before it declines a 16-bit file;
    // libpng's decode then takes up the probe's session instead of opening a second one.
    CHECK(p.header_parses == 2.0);
    CHECK(p.png_sessions == 1.0);
    CHECK(p.jpeg_sessions == 0.0);
}

TEST_CASE("probe counts: --depth auto reads the first row's header once before the build, not its pixels") {
    const temp_dir& dir = files_dir();
    const std::uint32_t rows = 3;
    std::string csv = "image,label\n";
    for (std::uint32_t i = 0; i < rows; ++i) {
        const std::string n = std::to_string(i);
        write_bytes(dir / ("a_img" + n + ".png"), encode_png_gray16(24, 16, i));
        csv += "a_img" + n + ".png," + (i % 2 ? "cat" : "dog") + "\n";
    }
    write_file(dir / "auto.csv", csv);
    build_options given = options_for(dir, "auto");
    given.input.task = task_kind::classification;
    given.depth = 16;
    given.out_dir = dir / "auto_given_ds";
    build_options automatic = given;
    automatic.depth = 0;
    automatic.out_dir = dir / "auto_ds";
    const per_file g = build_and_count(given, rows, rows);
    const per_file a = build_and_count(automatic, rows, rows);
    // Per build, the difference is one sniff, one header parse and its libpng session: the
    // first row's header, whose 16 bits decide (the build then stores uint16).
    CHECK((a.sniffs - g.sniffs) * rows == Approx(1.0));
    CHECK((a.header_parses - g.header_parses) * rows == Approx(1.0));
    CHECK((a.png_sessions - g.png_sessions) * rows == Approx(1.0));
    CHECK(a.jpeg_sessions == 0.0);
    CHECK(read_file(automatic.out_dir + "/manifest.json").find("\"uint16\"") != std::string::npos);
}
