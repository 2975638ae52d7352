// High bit depth and many bands (issue 31, format 1.4): 16-bit PNG and TIFF sources packed as
// uint16 exactly, geometry on 16-bit samples, --depth 8 saying what it lost, TIFF strips and
// tiles, --color bands, and the reader's uint16 and float outputs.
#include <catch2/catch.hpp>

#include <tiffio.h>

#include <cstring>
#include <random>

#include "decode/color_convert.hpp"
#include "decode/image_decoder.hpp"
#include "decode/png_encoder.hpp"
#include "decode/tiff_decoder.hpp"
#include "errors.hpp"
#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"
#include "transform/geometry.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

// A 16-bit image of w x h x c with 12-bit values (a CT slice's range: 0..4095), from `seed`.
image_u8 ct_image(std::uint32_t w, std::uint32_t h, std::uint32_t c, std::uint32_t seed, std::uint32_t top = 4095) {
    image_u8 img{w, h, c, std::vector<std::uint8_t>(std::size_t(w) * h * c * 2), 2};
    std::mt19937 rng(seed);
    for (std::size_t i = 0; i < std::size_t(w) * h * c; ++i) img.samples16()[i] = static_cast<std::uint16_t>(rng() % (top + 1));
    return img;
}

void write_png16(const std::string& path, const image_u8& img) {
    const auto bytes = encode_png(img);
    write_file(path, std::string(bytes.begin(), bytes.end()));
}

// A TIFF of `img` (8 or 16 bits, any channel count) written by libtiff: strips of `rows` rows, or
// tiles of tile x tile pixels; contiguous or separate planes; `compression` a COMPRESSION_* value.
struct tiff_options {
    std::uint32_t rows = 0, tile = 0;
    bool separate = false;
    std::uint16_t compression = COMPRESSION_NONE;
};
void write_tiff(const std::string& path, const image_u8& img, const tiff_options& o) {
    TIFF* t = TIFFOpen(path.c_str(), "w");
    REQUIRE(t != nullptr);
    const std::uint32_t c = img.channels, b = img.sample_bytes;
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, img.width);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, img.height);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, std::uint16_t(c));
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, std::uint16_t(8 * b));
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_UINT);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, c >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK);
    if (c > 3) {
        std::vector<std::uint16_t> extra(c - 3, EXTRASAMPLE_UNSPECIFIED);
        TIFFSetField(t, TIFFTAG_EXTRASAMPLES, std::uint16_t(extra.size()), extra.data());
    } else if (c == 2) {
        std::uint16_t extra = EXTRASAMPLE_UNSPECIFIED;
        TIFFSetField(t, TIFFTAG_EXTRASAMPLES, std::uint16_t(1), &extra);
    }
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, o.separate ? PLANARCONFIG_SEPARATE : PLANARCONFIG_CONTIG);
    TIFFSetField(t, TIFFTAG_COMPRESSION, o.compression);
    const std::size_t px = std::size_t(c) * b;
    const auto sample = [&](std::uint32_t x, std::uint32_t y, std::uint32_t s) { return img.pixels.data() + (std::size_t(y) * img.width + x) * px + s * b; };
    const int planes = o.separate ? int(c) : 1;
    if (o.tile) {
        TIFFSetField(t, TIFFTAG_TILEWIDTH, o.tile);
        TIFFSetField(t, TIFFTAG_TILELENGTH, o.tile);
        std::vector<std::uint8_t> buf(std::size_t(TIFFTileSize(t)));
        for (int s = 0; s < planes; ++s)
            for (std::uint32_t y = 0; y < img.height; y += o.tile)
                for (std::uint32_t x = 0; x < img.width; x += o.tile) {
                    std::fill(buf.begin(), buf.end(), std::uint8_t(0));
                    const std::size_t tp = o.separate ? b : px;
                    for (std::uint32_t r = 0; r < o.tile && y + r < img.height; ++r)
                        for (std::uint32_t q = 0; q < o.tile && x + q < img.width; ++q)
                            std::memcpy(buf.data() + (std::size_t(r) * o.tile + q) * tp, sample(x + q, y + r, o.separate ? s : 0), tp);
                    REQUIRE(TIFFWriteTile(t, buf.data(), x, y, 0, std::uint16_t(s)) >= 0);
                }
    } else {
        const std::uint32_t rows = o.rows ? o.rows : img.height;
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, rows);
        for (int s = 0; s < planes; ++s)
            for (std::uint32_t y = 0; y < img.height; y += rows) {
                const std::uint32_t n = std::min(rows, img.height - y);
                const std::size_t tp = o.separate ? b : px;
                std::vector<std::uint8_t> buf(std::size_t(n) * img.width * tp);
                for (std::uint32_t r = 0; r < n; ++r)
                    for (std::uint32_t q = 0; q < img.width; ++q)
                        std::memcpy(buf.data() + (std::size_t(r) * img.width + q) * tp, sample(q, y + r, o.separate ? s : 0), tp);
                REQUIRE(TIFFWriteEncodedStrip(t, TIFFComputeStrip(t, y, std::uint16_t(s)), buf.data(), tmsize_t(buf.size())) >= 0);
            }
    }
    TIFFClose(t);
}

image_u8 decode_path(const std::string& path, pixel_layout layout, bool keep_16) {
    const std::string bytes = read_file(path);
    decode_request req;
    req.layout = layout;
    req.keep_16 = keep_16;
    return decode_image(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), req);
}

// The record's image as uint16 values, through read_into.
std::vector<std::uint16_t> image16(const dataset& ds, std::size_t i) {
    const auto s = ds.at(i);
    std::vector<std::uint16_t> v(s.height() * s.width() * ds.schema().channels);
    sample_buffers out;
    out.image_u16 = v.data();
    out.image_capacity = v.size();
    read_context ctx;
    ds.read_into(i, out, ctx);
    return v;
}

std::vector<std::uint16_t> values_of(const image_u8& img) {
    return std::vector<std::uint16_t>(img.samples16(), img.samples16() + img.pixels.size() / 2);
}

}  // namespace

TEST_CASE("16-bit PNGs decode with every bit kept, grey, RGB and RGBA, and their high byte without keep_16", "[depth][decode]") {
    temp_dir dir("png16");
    for (std::uint32_t c : {1u, 2u, 3u, 4u}) {
        const image_u8 img = ct_image(7, 5, c, c, 65535);
        write_png16(dir / "a.png", img);
        const image_u8 kept = decode_path(dir / "a.png", pixel_layout::bands, true);
        REQUIRE(kept.sample_bytes == 2);
        REQUIRE(kept.channels == c);
        REQUIRE(values_of(kept) == values_of(img));
        const image_u8 high = decode_path(dir / "a.png", pixel_layout::bands, false);
        REQUIRE(high.sample_bytes == 1);
        for (std::size_t i = 0; i < high.pixels.size(); ++i) REQUIRE(high.pixels[i] == img.samples16()[i] >> 8);
    }
    // Layout conversions at 16 bits: grey replicated to RGB, opaque alpha 65535, PIL's luma.
    const image_u8 grey = ct_image(4, 3, 1, 7);
    write_png16(dir / "g.png", grey);
    const image_u8 rgba = decode_path(dir / "g.png", pixel_layout::rgba, true);
    for (std::size_t p = 0; p < 12; ++p) {
        REQUIRE(rgba.samples16()[4 * p] == grey.samples16()[p]);
        REQUIRE(rgba.samples16()[4 * p + 2] == grey.samples16()[p]);
        REQUIRE(rgba.samples16()[4 * p + 3] == 65535);
    }
    const image_u8 rgb = ct_image(4, 3, 3, 8, 65535);
    write_png16(dir / "c.png", rgb);
    const image_u8 luma = decode_path(dir / "c.png", pixel_layout::gray, true);
    for (std::size_t p = 0; p < 12; ++p) {
        const std::uint16_t* v = rgb.samples16() + 3 * p;
        REQUIRE(luma.samples16()[p] == ((std::uint64_t(v[0]) * 19595 + std::uint64_t(v[1]) * 38470 + std::uint64_t(v[2]) * 7471 + 0x8000) >> 16));
    }
}

TEST_CASE("PngSuite's 16-bit files decode to their 16 bits, whose high byte is the 8-bit decode", "[depth][decode][pngsuite]") {
    const std::string suite = std::string(SHARDPACK_SHARED_DATA) + "/pngsuite";
    if (!fs::exists(suite + "/basn0g16.png")) SHARDPACK_SKIP("PngSuite not found at " + suite);
    std::size_t checked = 0;
    for (const std::string name : {"basn0g16.png", "basn2c16.png", "basn4a16.png", "basn6a16.png", "basi0g16.png", "basi2c16.png", "basi6a16.png"}) {
        const image_u8 wide = decode_path(suite + "/" + name, pixel_layout::rgba, true);
        const image_u8 narrow = decode_path(suite + "/" + name, pixel_layout::rgba, false);
        REQUIRE(wide.sample_bytes == 2);
        REQUIRE(wide.pixels.size() == 2 * narrow.pixels.size());
        bool low_bits = false;
        for (std::size_t i = 0; i < narrow.pixels.size(); ++i) {
            REQUIRE(wide.samples16()[i] >> 8 == narrow.pixels[i]);
            low_bits |= (wide.samples16()[i] & 0xff) != (wide.samples16()[i] >> 8);
        }
        REQUIRE(low_bits);  // the files do use their low bytes: 8 bits would lose them
        ++checked;
    }
    REQUIRE(checked == 7);
}

TEST_CASE("geometry on 16-bit samples: crops and pads are exact, resampling keeps constants and stays in range", "[depth][transform]") {
    const image_u8 src = ct_image(40, 30, 3, 1, 65535);
    geometry_options g;
    g.width = 24;
    g.height = 36;
    g.resize = resize_mode::none;  // crop the width, pad the height
    const geometry_plan copy = plan_geometry(40, 30, g);
    const image_u8 out = apply_geometry(src, copy, resample_filter::area);
    REQUIRE(out.sample_bytes == 2);
    for (std::uint32_t y = 0; y < 36; ++y)
        for (std::uint32_t x = 0; x < 24; ++x)
            for (std::uint32_t c = 0; c < 3; ++c) {
                const std::uint16_t got = out.samples16()[(std::size_t(y) * 24 + x) * 3 + c];
                const bool inside = y >= 3 && y < 33;
                REQUIRE(got == (inside ? src.samples16()[(std::size_t(y - 3) * 40 + x + 8) * 3 + c] : 0));
            }
    for (const auto filter : {resample_filter::area, resample_filter::bilinear, resample_filter::lanczos}) {
        image_u8 flat{50, 40, 1, std::vector<std::uint8_t>(50 * 40 * 2), 2};
        std::fill(flat.samples16(), flat.samples16() + 2000, std::uint16_t(40961));
        g.width = 17;
        g.height = 23;
        g.resize = resize_mode::stretch;
        g.filter = filter;
        const image_u8 r = apply_geometry(flat, plan_geometry(50, 40, g), filter);
        for (std::size_t i = 0; i < r.pixels.size() / 2; ++i) REQUIRE(r.samples16()[i] == 40961);
        // Values stay in 0..65535 whatever the filter overshoots (lanczos), and a 16-bit result
        // keeps detail an 8-bit one cannot: most values are not multiples of 257.
        const image_u8 noisy = apply_geometry(src, plan_geometry(40, 30, g), filter);
        std::size_t fine = 0;
        for (std::size_t i = 0; i < noisy.pixels.size() / 2; ++i) fine += noisy.samples16()[i] % 257 != 0;
        REQUIRE(fine > noisy.pixels.size() / 4);
        // Against the 8-bit path: images of v * 257 resample to within a level of 257 x theirs.
        image_u8 small{40, 30, 3, std::vector<std::uint8_t>(40 * 30 * 3)};
        for (std::size_t i = 0; i < small.pixels.size(); ++i) small.pixels[i] = std::uint8_t(src.samples16()[i] >> 8);
        image_u8 wide = small;
        convert_depth(wide, 2);
        const image_u8 a = apply_geometry(small, plan_geometry(40, 30, g), filter);
        const image_u8 b = apply_geometry(wide, plan_geometry(40, 30, g), filter);
        for (std::size_t i = 0; i < a.pixels.size(); ++i) REQUIRE(std::abs(int(b.samples16()[i]) - 257 * int(a.pixels[i])) <= 2 * 257);
    }
}

TEST_CASE("a 12-bit CT set in 16-bit PNGs packs and reads back exactly as uint16, grey and RGB, seg and cls", "[depth][cli]") {
    temp_dir dir("ct");
    const std::uint32_t w = 37, h = 29;
    std::string seg_csv, cls_csv;
    std::vector<image_u8> images;
    for (int i = 0; i < 6; ++i) {
        const std::uint32_t c = i % 2 ? 3 : 1;
        images.push_back(ct_image(w, h, c, std::uint32_t(100 + i)));
        const std::string name = "ct" + std::to_string(i) + ".png";
        write_png16(dir / name, images.back());
        image_u8 mask{w, h, 1, std::vector<std::uint8_t>(std::size_t(w) * h)};
        for (std::size_t p = 0; p < mask.pixels.size(); ++p) mask.pixels[p] = std::uint8_t((p + i) % 3);
        const auto m = encode_png(mask);
        write_file(dir / ("m" + std::to_string(i) + ".png"), std::string(m.begin(), m.end()));
        seg_csv += name + ",m" + std::to_string(i) + ".png\n";
        cls_csv += name + "," + (i % 3 ? "lesion" : "clear") + "\n";
    }
    write_file(dir / "seg.csv", seg_csv);
    write_file(dir / "cls.csv", cls_csv);
    write_file(dir / "classes.csv", "name,id\nair,0\nsoft,1\nbone,2\n");
    for (const std::string color : {"gray", "rgb"}) {
        const std::uint32_t c = color == "gray" ? 1 : 3;
        for (const std::string task : {"seg", "cls"}) {
            const std::string out = dir / (task + "-" + color);
            std::vector<std::string> args = {"build", "--csv", dir / (task + ".csv"), "--out", out, "--color", color, "--task", task};
            if (task == "seg") args.insert(args.end(), {"--classes", dir / "classes.csv", "--label-layout", "index"});
            const auto r = cli(args);
            INFO(r.err);
            REQUIRE(r.code == 0);
            REQUIRE(read_file(fs::path(out) / "manifest.json").find("\"format_version\": \"1.4\"") != std::string::npos);
            const auto ds = dataset::open(out);
            REQUIRE(ds.schema().image_value_bytes == 2);
            REQUIRE(ds.schema().channels == c);
            for (std::size_t i = 0; i < 6; ++i) {
                // The source as the reader should see it: grey kept or replicated, RGB kept or luma.
                const image_u8 want = decode_path(dir / ("ct" + std::to_string(i) + ".png"),
                                                  c == 1 ? pixel_layout::gray : pixel_layout::rgb, true);
                REQUIRE(image16(ds, i) == values_of(want));
                const auto s = ds.at(i);
                REQUIRE(std::equal(s.image16().begin(), s.image16().end(), values_of(want).begin()));
                if (i % 2 == 0 && c == 1) REQUIRE(values_of(want) == values_of(images[i]));  // grey sources: exactly theirs
            }
            // float32 without normalisation is x / 65535; uint8 is refused.
            const auto s0 = ds.at(0);
            std::vector<float> f(s0.height() * s0.width() * c);
            sample_buffers fo;
            fo.image_f32 = f.data();
            fo.image_capacity = f.size();
            read_context ctx;
            ds.read_into(0, fo, ctx);
            const auto v = image16(ds, 0);
            for (std::size_t k = 0; k < f.size(); ++k) REQUIRE(f[k] == float(v[k]) / 65535.0f);
            std::vector<std::uint8_t> u8(f.size());
            sample_buffers bo;
            bo.image_u8 = u8.data();
            bo.image_capacity = u8.size();
            REQUIRE_THROWS_WITH(ds.read_into(0, bo, ctx), Catch::Contains("stores uint16 images"));
        }
    }
}

TEST_CASE("a build with --depth 8 keeps the high byte, and the log and report.json say how many images lost bits", "[depth][cli]") {
    temp_dir dir("depth8");
    std::string csv;
    for (int i = 0; i < 3; ++i) {
        write_png16(dir / ("a" + std::to_string(i) + ".png"), ct_image(9, 7, 1, std::uint32_t(i)));
        csv += "a" + std::to_string(i) + ".png,x\n";
    }
    write_file(dir / "list.csv", csv);
    const auto r = cli({"build", "--csv", dir / "list.csv", "--out", dir / "ds", "--depth", "8", "--task", "cls", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(r.err.find("3 of the 3 images decoded in this build had 16 bits a sample and were stored with 8") != std::string::npos);
    const auto report = detail::json::parse(read_file(dir / "ds/report.json"));
    REQUIRE(report.at("images_reduced_to_8_bits").as_u64() == 3);
    const auto ds = dataset::open(dir / "ds");
    REQUIRE(ds.schema().image_value_bytes == 1);
    const image_u8 src = decode_path(dir / "a1.png", pixel_layout::rgb, false);
    const auto s = ds.at(1);
    REQUIRE(std::equal(s.image().begin(), s.image().end(), src.pixels.begin()));
    // auto after an 8-bit first row: the same reduction, counted the same way, with the advice.
    image_u8 eight{9, 7, 1, std::vector<std::uint8_t>(63, 9)};
    const auto e = encode_png(eight);
    write_file(dir / "first.png", std::string(e.begin(), e.end()));
    write_file(dir / "mixed.csv", "first.png,x\n" + csv);
    const auto m = cli({"build", "--csv", dir / "mixed.csv", "--out", dir / "mixed", "--task", "cls"});
    INFO(m.err);
    REQUIRE(m.code == 0);
    REQUIRE(m.err.find("--depth auto: the first row's image has 8 bits") != std::string::npos);
    REQUIRE(m.err.find("give --depth 16 to keep every bit") != std::string::npos);
    // --depth 16: every bit of the 16-bit rows, the 8-bit row widened (9 * 257).
    const auto w16 = cli({"build", "--csv", dir / "mixed.csv", "--out", dir / "wide", "--task", "cls", "--depth", "16", "--color", "gray"});
    INFO(w16.err);
    REQUIRE(w16.code == 0);
    const auto wide = dataset::open(dir / "wide");
    REQUIRE(image16(wide, 0) == std::vector<std::uint16_t>(63, 9 * 257));
    REQUIRE(image16(wide, 2) == values_of(decode_path(dir / "a1.png", pixel_layout::gray, true)));
    // 8-bit builds of 8-bit images are what they were: format 1.0 to 1.3, no uint16.
    const auto plain = cli({"build", "--csv", dir / "mixed.csv", "--out", dir / "plain", "--task", "cls", "--depth", "8"});
    REQUIRE(plain.code == 0);
    REQUIRE(read_file(dir / "plain/manifest.json").find("\"format_version\": \"1.4\"") == std::string::npos);
}

TEST_CASE("TIFF: 8- and 16-bit, 1 to 6 samples, strips and tiles, contiguous and separate planes, compressed, decode exactly", "[depth][tiff]") {
    temp_dir dir("tiff");
    struct variant {
        std::uint32_t channels, bytes;
        tiff_options o;
    };
    const variant variants[] = {
        {1, 2, {5, 0, false, COMPRESSION_NONE}},     {1, 2, {0, 16, false, COMPRESSION_ADOBE_DEFLATE}},
        {3, 1, {7, 0, false, COMPRESSION_LZW}},      {4, 2, {0, 16, false, COMPRESSION_ADOBE_DEFLATE}},
        {4, 2, {0, 16, true, COMPRESSION_PACKBITS}}, {6, 2, {3, 0, true, COMPRESSION_ADOBE_DEFLATE}},
        {2, 1, {0, 0, false, COMPRESSION_NONE}},
    };
    int k = 0;
    for (const auto& v : variants) {
        image_u8 img = ct_image(33, 21, v.channels, std::uint32_t(k), 65535);
        if (v.bytes == 1) convert_depth(img, 1);
        const std::string path = dir / ("t" + std::to_string(k++) + ".tif");
        write_tiff(path, img, v.o);
        INFO(path);
        const image_u8 got = decode_path(path, pixel_layout::bands, true);
        REQUIRE(got.channels == v.channels);
        REQUIRE(got.sample_bytes == v.bytes);
        REQUIRE(got.pixels == img.pixels);
        const tiff_header hd = read_tiff_header(reinterpret_cast<const std::uint8_t*>(read_file(path).data()), read_file(path).size());
        REQUIRE(hd.samples == v.channels);
    }
}

TEST_CASE("TIFF sets pack and read exactly: 16-bit grey, 4-band uint16 tiled, with --color bands", "[depth][tiff][cli]") {
    temp_dir dir("tiffset");
    std::string grey_csv, bands_csv;
    std::vector<image_u8> grey, bands;
    for (int i = 0; i < 4; ++i) {
        grey.push_back(ct_image(26, 19, 1, std::uint32_t(i)));
        write_tiff(dir / ("g" + std::to_string(i) + ".tif"), grey.back(), {4, 0, false, COMPRESSION_LZW});
        grey_csv += "g" + std::to_string(i) + ".tif," + (i % 2 ? "a" : "b") + "\n";
        bands.push_back(ct_image(26, 19, 4, std::uint32_t(50 + i), 65535));
        write_tiff(dir / ("s" + std::to_string(i) + ".tif"), bands.back(), {0, 16, false, COMPRESSION_ADOBE_DEFLATE});
        bands_csv += "s" + std::to_string(i) + ".tif," + (i % 2 ? "water" : "land") + "\n";
    }
    write_file(dir / "grey.csv", grey_csv);
    write_file(dir / "bands.csv", bands_csv);
    auto r = cli({"build", "--csv", dir / "grey.csv", "--out", dir / "grey", "--color", "gray", "--task", "cls"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto g = dataset::open(dir / "grey");
    for (std::size_t i = 0; i < 4; ++i) REQUIRE(image16(g, i) == values_of(grey[i]));
    r = cli({"build", "--csv", dir / "bands.csv", "--out", dir / "bands", "--color", "bands", "--task", "cls"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto b = dataset::open(dir / "bands");
    REQUIRE(b.schema().order == channel_order::bands);
    REQUIRE(b.schema().channels == 4);
    for (std::size_t i = 0; i < 4; ++i) REQUIRE(image16(b, i) == values_of(bands[i]));
    // Crops at read time move whole 8-byte pixels.
    augmentation a;
    a.height = 7;
    a.width = 5;
    a.position = crop_position::random;
    a.hflip = flip_mode::random;
    a.hflip_probability = 1.0f;
    std::vector<std::uint16_t> crop(7 * 5 * 4);
    sample_buffers out;
    out.image_u16 = crop.data();
    out.image_capacity = crop.size();
    out.augment = &a;
    crop_box applied;
    out.applied = &applied;
    read_context ctx;
    b.read_into(2, out, ctx);
    for (std::uint32_t y = 0; y < 7; ++y)
        for (std::uint32_t x = 0; x < 5; ++x)
            for (std::uint32_t c = 0; c < 4; ++c)
                REQUIRE(crop[(y * 5 + x) * 4 + c] == bands[2].samples16()[((applied.y + y) * 26 + applied.x + (4 - x)) * 4 + c]);
    // A TIFF of another band count in a bands build: refused, naming the file.
    write_tiff(dir / "three.tif", ct_image(26, 19, 3, 9), {});
    write_file(dir / "odd.csv", bands_csv + "three.tif,land\n");
    r = cli({"build", "--csv", dir / "odd.csv", "--out", dir / "odd", "--color", "bands", "--task", "cls"});
    REQUIRE(r.code == 1);
    REQUIRE(r.err.find("three.tif: the image has 3 bands, the dataset 4") != std::string::npos);
}

TEST_CASE("hostile and unsupported TIFFs are refused with a reason naming the file", "[depth][tiff][hostile]") {
    temp_dir dir("badtiff");
    write_tiff(dir / "ok.tif", ct_image(40, 30, 1, 3), {10, 0, false, COMPRESSION_ADOBE_DEFLATE});
    const std::string ok = read_file(dir / "ok.tif");
    // Every truncation: an error, never a crash or a wrong image.
    for (std::size_t n : {std::size_t(0), std::size_t(4), std::size_t(8), ok.size() / 3, ok.size() / 2, ok.size() - 1}) {
        decode_request req;
        req.keep_16 = true;
        image_u8 out;
        try {
            decode_image(reinterpret_cast<const std::uint8_t*>(ok.data()), n, req, out);
            REQUIRE(out.pixels.size() == 40 * 30 * 3 * 2);  // the cut fell after the image data
        } catch (const input_error& e) {
            REQUIRE(std::string(e.what()).size() > 0);
        }
    }
    // Float samples: refused with what they are.
    TIFF* t = TIFFOpen((dir / "float.tif").c_str(), "w");
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, 4u);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, 4u);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, std::uint16_t(1));
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, std::uint16_t(32));
    TIFFSetField(t, TIFFTAG_SAMPLEFORMAT, SAMPLEFORMAT_IEEEFP);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    float row[4] = {0.5f, 1, 2, 3};
    for (std::uint32_t y = 0; y < 4; ++y) TIFFWriteScanline(t, row, y, 0);
    TIFFClose(t);
    // A header claiming a huge image over a few bytes of data: refused before allocating it.
    write_file(dir / "list.csv", "float.tif,a\nok.tif,b\n");
    const auto r = cli({"build", "--csv", dir / "list.csv", "--out", dir / "ds", "--task", "cls", "--on-error", "skip", "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(r.err.find("float.tif: TIFF: 32-bit samples are not supported") != std::string::npos);
    image_u8 big = ct_image(60000, 2, 1, 1, 0);  // zeros: a strip of a few hundred bytes
    write_tiff(dir / "wide.tif", big, {2, 0, false, COMPRESSION_ADOBE_DEFLATE});
    std::string bytes = read_file(dir / "wide.tif");
    // Rewrite ImageLength (tag 257) to 10000 rows (1.2 GB, under the decode limit): the one strip
    // cannot hold them at any plausible ratio, so the image is refused before it is allocated.
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    const std::uint32_t ifd = detail::load_u32(p + 4);
    const std::uint16_t entries = detail::load_u16(p + ifd);
    bool patched = false;
    for (std::uint16_t e = 0; e < entries; ++e) {
        unsigned char* entry = reinterpret_cast<unsigned char*>(bytes.data()) + ifd + 2 + 12 * e;
        if (detail::load_u16(entry) == 257) {
            if (detail::load_u16(entry + 2) == 3) detail::store_u16(entry + 8, 10000);
            else detail::store_u32(entry + 8, 10000);
            patched = true;
        }
    }
    REQUIRE(patched);
    decode_request req;
    image_u8 out;
    REQUIRE_THROWS_WITH(decode_image(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), req, out),
                        Catch::Contains("TIFF: file is far too small for a 60000x10000 image"));
}
