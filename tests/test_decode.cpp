// Decoders and the PNG encoder, checked against PngSuite, libjpeg-turbo's test images, an
// independent raw-sample PNG reference, hand-computed pixels and corrupted inputs.
#include <png.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <jpeglib.h>
#include <zlib.h>

#include <catch2/catch.hpp>

#include "decode/color_convert.hpp"
#include "decode/decode_limits.hpp"
#include "decode/image_decoder.hpp"
#include "decode/jpeg_decoder.hpp"
#include "decode/png_decoder.hpp"
#include "decode/png_encoder.hpp"
#include "decode/png_decoder.hpp"
#include "decode/png_fast_decoder.hpp"
#include "decode/sniff.hpp"
#include "errors.hpp"

using namespace shardpack;

namespace {

using bytes = std::vector<std::uint8_t>;

const std::string pngsuite_dir = std::string(SHARDPACK_SHARED_DATA) + "/pngsuite";
const std::string jpeg_dir = std::string(SHARDPACK_SHARED_DATA) + "/jpeg";

bytes load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

bytes load_png(const std::string& name) { return load(pngsuite_dir + "/" + name); }
bytes load_jpeg(const std::string& name) { return load(jpeg_dir + "/" + name); }

decode_request request(pixel_layout layout, std::uint32_t max_rows = 0) {
    decode_request r;
    r.layout = layout;
    r.max_rows = max_rows;
    return r;
}

std::vector<std::string> pngsuite_files() {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(pngsuite_dir))
        if (e.path().extension() == ".png") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

bool is_corrupt_sample(const std::string& name) { return name[0] == 'x'; }

// Width and height straight from the IHDR bytes.
void ihdr_size(const bytes& file, std::uint32_t& w, std::uint32_t& h) {
    REQUIRE(file.size() >= 24);
    auto be32 = [&](std::size_t at) {
        return std::uint32_t(file[at]) << 24 | std::uint32_t(file[at + 1]) << 16 | std::uint32_t(file[at + 2]) << 8 | file[at + 3];
    };
    w = be32(16);
    h = be32(20);
}

const pixel_layout all_layouts[] = {pixel_layout::gray, pixel_layout::rgb, pixel_layout::rgba};

std::uint8_t pil_luma(std::uint32_t r, std::uint32_t g, std::uint32_t b) {
    return static_cast<std::uint8_t>((r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16);
}

// ---------------------------------------------------------------------------------------------
// Reference PNG decoding: libpng hands over raw samples (only de-interlaced, no transforms)
// and the expansion to 8-bit gray/rgb/rgba is done here by hand from the PNG spec.

struct raw_png {
    png_uint_32 width = 0, height = 0;
    int depth = 0, color_type = 0;
    std::vector<bytes> rows;
    std::vector<png_color> palette;
    bytes trans_alpha;  // palette tRNS
    bool has_trans_color = false;
    png_color_16 trans_color{};  // gray/RGB tRNS, raw sample values
};

struct mem_reader {
    const bytes* file;
    std::size_t pos;
};

raw_png read_raw_png(const bytes& file) {
    raw_png raw;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    mem_reader reader{&file, 0};
    png_set_read_fn(png, &reader, [](png_structp p, png_bytep out, std::size_t n) {
        auto* r = static_cast<mem_reader*>(png_get_io_ptr(p));
        if (n > r->file->size() - r->pos) png_error(p, "short");
        std::memcpy(out, r->file->data() + r->pos, n);
        r->pos += n;
    });
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, nullptr);
        FAIL("reference PNG reader failed");
    }
    png_read_info(png, info);
    int interlace = 0;
    png_get_IHDR(png, info, &raw.width, &raw.height, &raw.depth, &raw.color_type, &interlace, nullptr, nullptr);
    const int passes = png_set_interlace_handling(png);
    png_read_update_info(png, info);
    raw.rows.assign(raw.height, bytes(png_get_rowbytes(png, info)));
    for (int pass = 0; pass < passes; ++pass)
        for (auto& row : raw.rows) png_read_row(png, row.data(), nullptr);
    png_colorp palette = nullptr;
    int palette_size = 0;
    if (png_get_PLTE(png, info, &palette, &palette_size) != 0) raw.palette.assign(palette, palette + palette_size);
    png_bytep trans = nullptr;
    int num_trans = 0;
    png_color_16p trans_color = nullptr;
    if (png_get_tRNS(png, info, &trans, &num_trans, &trans_color) != 0) {
        if (raw.color_type == PNG_COLOR_TYPE_PALETTE)
            raw.trans_alpha.assign(trans, trans + num_trans);
        else
            raw.has_trans_color = true, raw.trans_color = *trans_color;
    }
    png_destroy_read_struct(&png, &info, nullptr);
    return raw;
}

// Sample c of pixel x of a raw row, at the file's bit depth.
std::uint32_t raw_sample(const bytes& row, std::uint32_t x, int c, int channels, int depth) {
    const std::size_t index = std::size_t(x) * channels + c;
    if (depth == 16) return std::uint32_t(row[2 * index]) << 8 | row[2 * index + 1];
    if (depth == 8) return row[index];
    const std::size_t bit = index * depth;
    return (row[bit / 8] >> (8 - depth - bit % 8)) & ((1u << depth) - 1);
}

// 16-bit keeps the high byte; 1/2/4-bit gray scales to 0..255 exactly.
std::uint8_t to8(std::uint32_t v, int depth) {
    if (depth == 16) return std::uint8_t(v >> 8);
    return std::uint8_t(v * 255 / ((1u << depth) - 1));
}

image_u8 reference_png(const bytes& file, pixel_layout layout) {
    const raw_png raw = read_raw_png(file);
    const int channels = raw.color_type == 0 || raw.color_type == 3 ? 1 : raw.color_type == 4 ? 2 : raw.color_type == 2 ? 3 : 4;
    image_u8 out;
    out.width = raw.width;
    out.height = raw.height;
    out.channels = channel_count(layout);
    for (std::uint32_t y = 0; y < raw.height; ++y) {
        for (std::uint32_t x = 0; x < raw.width; ++x) {
            std::uint32_t s[4];
            for (int c = 0; c < channels; ++c) s[c] = raw_sample(raw.rows[y], x, c, channels, raw.depth);
            std::uint8_t r = 0, g = 0, b = 0, a = 255;
            switch (raw.color_type) {
                case 0:
                    r = g = b = to8(s[0], raw.depth);
                    if (raw.has_trans_color && s[0] == raw.trans_color.gray) a = 0;
                    break;
                case 2:
                    r = to8(s[0], raw.depth), g = to8(s[1], raw.depth), b = to8(s[2], raw.depth);
                    if (raw.has_trans_color && s[0] == raw.trans_color.red && s[1] == raw.trans_color.green &&
                        s[2] == raw.trans_color.blue)
                        a = 0;
                    break;
                case 3:
                    REQUIRE(s[0] < raw.palette.size());
                    r = raw.palette[s[0]].red, g = raw.palette[s[0]].green, b = raw.palette[s[0]].blue;
                    if (s[0] < raw.trans_alpha.size()) a = raw.trans_alpha[s[0]];
                    break;
                case 4:
                    r = g = b = to8(s[0], raw.depth), a = to8(s[1], raw.depth);
                    break;
                default:
                    r = to8(s[0], raw.depth), g = to8(s[1], raw.depth), b = to8(s[2], raw.depth), a = to8(s[3], raw.depth);
            }
            const bool gray_source = raw.color_type == 0 || raw.color_type == 4;
            if (layout == pixel_layout::gray) {
                out.pixels.push_back(gray_source ? r : pil_luma(r, g, b));
            } else {
                out.pixels.insert(out.pixels.end(), {r, g, b});
                if (layout == pixel_layout::rgba) out.pixels.push_back(a);
            }
        }
    }
    return out;
}

const std::uint8_t* pixel(const image_u8& img, std::uint32_t x, std::uint32_t y) {
    return img.pixels.data() + (std::size_t(y) * img.width + x) * img.channels;
}

// ---------------------------------------------------------------------------------------------
// JPEG helpers built on libjpeg directly (its default error handler exits on failure, which
// is fine for these known-good inputs).

struct jpeg_options {
    int quality = 95;
    bool progressive = false;
    bool arithmetic = false;
    J_COLOR_SPACE jpeg_space = JCS_UNKNOWN;  // JCS_UNKNOWN: libjpeg's default for the input
    bool adobe_marker = true;                // only meaningful for CMYK/YCCK
};

bytes encode_jpeg_test(const std::uint8_t* px, std::uint32_t w, std::uint32_t h, int components, J_COLOR_SPACE in_space,
                       const jpeg_options& o = {}) {
    jpeg_compress_struct c;
    jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char* buffer = nullptr;
    unsigned long size = 0;
    jpeg_mem_dest(&c, &buffer, &size);
    c.image_width = w;
    c.image_height = h;
    c.input_components = components;
    c.in_color_space = in_space;
    jpeg_set_defaults(&c);
    if (o.jpeg_space != JCS_UNKNOWN) jpeg_set_colorspace(&c, o.jpeg_space);
    if (!o.adobe_marker) c.write_Adobe_marker = FALSE;
    jpeg_set_quality(&c, o.quality, TRUE);
    if (o.progressive) jpeg_simple_progression(&c);
    c.arith_code = o.arithmetic ? TRUE : FALSE;
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < h) {
        JSAMPROW row = const_cast<JSAMPROW>(px + std::size_t(c.next_scanline) * w * components);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    bytes out(buffer, buffer + size);
    std::free(buffer);
    return out;
}

// libjpeg's plain RGB (or gray) output with default settings.
image_u8 reference_jpeg(const bytes& file, J_COLOR_SPACE out_space) {
    jpeg_decompress_struct d;
    jpeg_error_mgr err;
    d.err = jpeg_std_error(&err);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, file.data(), static_cast<unsigned long>(file.size()));
    jpeg_read_header(&d, TRUE);
    d.out_color_space = out_space;
    jpeg_start_decompress(&d);
    image_u8 img;
    img.width = d.output_width;
    img.height = d.output_height;
    img.channels = static_cast<std::uint32_t>(d.output_components);
    img.pixels.resize(img.row_bytes() * img.height);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = img.row(d.output_scanline);
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return img;
}

// A smooth test picture: gradients plus a few flat blocks.
image_u8 synthetic_image(std::uint32_t w, std::uint32_t h, std::uint32_t channels, std::uint32_t seed) {
    image_u8 img;
    img.width = w;
    img.height = h;
    img.channels = channels;
    img.pixels.resize(std::size_t(w) * h * channels);
    std::mt19937 rng(seed);
    for (std::uint32_t y = 0; y < h; ++y)
        for (std::uint32_t x = 0; x < w; ++x)
            for (std::uint32_t c = 0; c < channels; ++c)
                img.pixels[(std::size_t(y) * w + x) * channels + c] = std::uint8_t((x * (c + 1) + y * 2 + seed) & 255);
    (void)rng;
    return img;
}

image_u8 random_image(std::uint32_t w, std::uint32_t h, std::uint32_t channels, std::uint32_t seed) {
    image_u8 img;
    img.width = w;
    img.height = h;
    img.channels = channels;
    img.pixels.resize(std::size_t(w) * h * channels);
    std::mt19937 rng(seed);
    for (auto& p : img.pixels) p = std::uint8_t(rng());
    return img;
}

bool same_pixels(const image_u8& a, const image_u8& b) {
    return a.width == b.width && a.height == b.height && a.channels == b.channels && a.pixels == b.pixels;
}

int max_abs_diff(const image_u8& a, const image_u8& b) {
    REQUIRE(a.pixels.size() == b.pixels.size());
    int m = 0;
    for (std::size_t i = 0; i < a.pixels.size(); ++i) m = std::max(m, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
    return m;
}

}  // namespace

// =============================================================================================
TEST_CASE("sniff recognises formats from magic bytes", "[sniff]") {
    auto sniff = [](const std::string& s) {
        return sniff_format(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
    };
    CHECK(sniff(std::string("\x89PNG\r\n\x1a\n", 8)) == file_format::png);
    CHECK(sniff(std::string("\xFF\xD8\xFF\xE0", 4)) == file_format::jpeg);
    CHECK(sniff("GIF89a....") == file_format::gif);
    CHECK(sniff("GIF87a....") == file_format::gif);
    CHECK(sniff("BM\x36\x00\x00\x00") == file_format::bmp);
    CHECK(sniff(std::string("RIFF\x10\x00\x00\x00WEBPVP8 ", 16)) == file_format::webp);
    CHECK(sniff(std::string("RIFF\x10\x00\x00\x00WAVEfmt ", 16)) == file_format::unknown);
    CHECK(sniff(std::string("RIFF\x10\x00\x00\x00WEB", 11)) == file_format::unknown);
    CHECK(sniff(std::string("II*\0\x08\0\0\0", 8)) == file_format::tiff);
    CHECK(sniff(std::string("MM\0*\0\0\0\x08", 8)) == file_format::tiff);
    CHECK(sniff("<!DOCTYPE html>") == file_format::unknown);
    CHECK(sniff("") == file_format::unknown);
    CHECK(sniff_format(nullptr, 0) == file_format::unknown);
    CHECK(sniff(std::string("\xFF\xD8", 2)) == file_format::unknown);  // too short to tell

    CHECK(std::string(format_name(file_format::png)) == "PNG");
    CHECK(std::string(format_name(file_format::jpeg)) == "JPEG");
    CHECK(std::string(format_name(file_format::gif)) == "GIF");
    CHECK(std::string(format_name(file_format::bmp)) == "BMP");
    CHECK(std::string(format_name(file_format::webp)) == "WebP");
    CHECK(std::string(format_name(file_format::tiff)) == "TIFF");
    CHECK(std::string(format_name(file_format::unknown)) == "unknown");

    // The extension plays no part: real files are sniffed by content.
    CHECK(sniff_format(load_jpeg("testorig.jpg").data(), 5770) == file_format::jpeg);
    const bytes png = load_png("basn2c08.png");
    CHECK(sniff_format(png.data(), png.size()) == file_format::png);
}

TEST_CASE("decode_image refuses other formats, naming them", "[sniff]") {
    const std::pair<std::string, std::string> cases[] = {
        {"GIF89a\x01\x00\x01\x00\x00\x00\x00", "GIF"},
        {"BM\x3a\x00\x00\x00\x00\x00\x00\x00", "BMP"},
        {std::string("RIFF\x1a\x00\x00\x00WEBPVP8 ", 16), "WebP"},
        {std::string("II*\0\x08\0\0\0", 8), "TIFF"},
        {std::string("MM\0*\0\0\0\x08", 8), "TIFF"},
    };
    for (const auto& [data, name] : cases) {
        INFO(name);
        const auto* p = reinterpret_cast<const std::uint8_t*>(data.data());
        CHECK_THROWS_AS(decode_image(p, data.size(), request(pixel_layout::rgb)), decode_error);
        CHECK_THROWS_WITH(decode_image(p, data.size(), request(pixel_layout::rgb)),
                          "unsupported image format " + name + " (only PNG and JPEG are supported)");
        std::uint32_t w = 0, h = 0;
        CHECK_THROWS_WITH(read_image_size(p, data.size(), w, h), Catch::Contains(name));
    }
    const std::string html = "<html><body>404</body></html>";
    CHECK_THROWS_WITH(decode_image(reinterpret_cast<const std::uint8_t*>(html.data()), html.size(), request(pixel_layout::rgb)),
                      Catch::Contains("unrecognised image data (starts with 3C 68 74 6D 6C 3E 3C 62"));
    CHECK_THROWS_WITH(decode_image(nullptr, 0, request(pixel_layout::rgb)), Catch::Contains("empty file"));
    const std::uint8_t one = 0x89;
    CHECK_THROWS_AS(decode_image(&one, 1, request(pixel_layout::rgb)), decode_error);
}

// =============================================================================================
TEST_CASE("every corrupt PngSuite file (x*.png) is refused", "[png]") {
    int count = 0;
    for (const auto& name : pngsuite_files()) {
        if (!is_corrupt_sample(name)) continue;
        ++count;
        INFO(name);
        const bytes file = load_png(name);
        for (pixel_layout layout : all_layouts) {
            CHECK_THROWS_AS(decode_png(file.data(), file.size(), request(layout)), decode_error);
            CHECK_THROWS_AS(decode_image(file.data(), file.size(), request(layout)), decode_error);
        }
        // decode_png's messages carry libpng's reason.
        CHECK_THROWS_WITH(decode_png(file.data(), file.size(), request(pixel_layout::rgb)), Catch::StartsWith("PNG: "));
    }
    CHECK(count == 14);
    for (const char* name : {"xhdn0g08.png", "xc1n0g08.png", "xd3n2c08.png", "xs7n0g01.png", "xs1n0g01.png"}) {
        INFO(name);
        const bytes file = load_png(name);
        std::uint32_t w = 0, h = 0;
        CHECK_THROWS_AS(read_image_size(file.data(), file.size(), w, h), decode_error);
    }
    const bytes bad_color_type = load_png("xc1n0g08.png");
    CHECK_THROWS_WITH(decode_png(bad_color_type.data(), bad_color_type.size(), request(pixel_layout::rgb)),
                      "PNG: Invalid IHDR data (Invalid color type in IHDR)");
    const bytes bad_ihdr_crc = load_png("xhdn0g08.png");
    CHECK_THROWS_WITH(decode_png(bad_ihdr_crc.data(), bad_ihdr_crc.size(), request(pixel_layout::rgb)),
                      "PNG: IHDR: CRC error");
    const bytes bad_idat_crc = load_png("xcsn0g01.png");
    CHECK_THROWS_WITH(decode_png(bad_idat_crc.data(), bad_idat_crc.size(), request(pixel_layout::rgb)),
                      Catch::Contains("CRC"));
}

TEST_CASE("every valid PngSuite file decodes exactly, in every layout", "[png]") {
    int count = 0;
    for (const auto& name : pngsuite_files()) {
        if (is_corrupt_sample(name)) continue;
        ++count;
        INFO(name);
        const bytes file = load_png(name);
        std::uint32_t w = 0, h = 0;
        ihdr_size(file, w, h);
        std::uint32_t rw = 0, rh = 0;
        CHECK(read_image_size(file.data(), file.size(), rw, rh));
        CHECK(rw == w);
        CHECK(rh == h);
        for (pixel_layout layout : all_layouts) {
            INFO("layout " << channel_count(layout));
            decoded_info info{};
            image_u8 img;
            REQUIRE_NOTHROW(img = decode_png(file.data(), file.size(), request(layout), &info));
            CHECK(img.width == w);
            CHECK(img.height == h);
            CHECK(img.channels == channel_count(layout));
            CHECK(img.pixels.size() == std::size_t(w) * h * channel_count(layout));
            CHECK(info.full_width == w);
            CHECK(info.full_height == h);
            CHECK(same_pixels(img, reference_png(file, layout)));
            CHECK(same_pixels(img, decode_image(file.data(), file.size(), request(layout))));
        }
    }
    CHECK(count == 161);
}

TEST_CASE("PngSuite sizes come from the file", "[png]") {
    auto size_of = [](const std::string& name) {
        const bytes file = load_png(name);
        const image_u8 img = decode_png(file.data(), file.size(), request(pixel_layout::rgb));
        return std::make_pair(img.width, img.height);
    };
    CHECK(size_of("basn2c08.png") == std::make_pair(32u, 32u));
    CHECK(size_of("s01n3p01.png") == std::make_pair(1u, 1u));
    CHECK(size_of("s01i3p01.png") == std::make_pair(1u, 1u));
    CHECK(size_of("s39i3p04.png") == std::make_pair(39u, 39u));
    CHECK(size_of("s40n3p04.png") == std::make_pair(40u, 40u));
    CHECK(size_of("PngSuite.png") == std::make_pair(256u, 256u));
}

TEST_CASE("PNG pixels match values computed by hand", "[png]") {
    // Raw samples read with a standalone zlib-based parser (not libpng).
    SECTION("16-bit RGB keeps the high byte") {
        const bytes file = load_png("basn2c16.png");
        const image_u8 img = decode_png(file.data(), file.size(), request(pixel_layout::rgb));
        CHECK(std::vector<int>(pixel(img, 0, 0), pixel(img, 0, 0) + 3) == std::vector<int>{0xFF, 0xFF, 0x00});
        CHECK(std::vector<int>(pixel(img, 31, 0), pixel(img, 31, 0) + 3) == std::vector<int>{0x00, 0xFF, 0x00});
        // 0xd6b5 0xc631 0x0000: high bytes (scaling would round 0xc631 to 197).
        CHECK(std::vector<int>(pixel(img, 5, 7), pixel(img, 5, 7) + 3) == std::vector<int>{0xD6, 0xC6, 0x00});
        CHECK(std::vector<int>(pixel(img, 31, 31), pixel(img, 31, 31) + 3) == std::vector<int>{0x00, 0x00, 0xFF});
    }
    SECTION("16-bit RGBA keeps the high bytes, alpha included") {
        const bytes file = load_png("basn6a16.png");
        const image_u8 img = decode_png(file.data(), file.size(), request(pixel_layout::rgba));
        CHECK(std::vector<int>(pixel(img, 20, 10), pixel(img, 20, 10) + 4) == std::vector<int>{0x17, 0xFF, 0x00, 0xA5});
        const image_u8 rgb = decode_png(file.data(), file.size(), request(pixel_layout::rgb));
        CHECK(std::vector<int>(pixel(rgb, 20, 10), pixel(rgb, 20, 10) + 3) == std::vector<int>{0x17, 0xFF, 0x00});  // not composited
    }
    SECTION("palette is expanded to its colors") {
        const bytes file = load_png("basn3p08.png");
        const image_u8 img = decode_png(file.data(), file.size(), request(pixel_layout::rgb));
        CHECK(std::vector<int>(pixel(img, 0, 0), pixel(img, 0, 0) + 3) == std::vector<int>{1, 0, 0});
        CHECK(std::vector<int>(pixel(img, 10, 3), pixel(img, 10, 3) + 3) == std::vector<int>{51, 51, 0});
        CHECK(std::vector<int>(pixel(img, 31, 31), pixel(img, 31, 31) + 3) == std::vector<int>{255, 254, 255});
        const image_u8 rgba = decode_png(file.data(), file.size(), request(pixel_layout::rgba));
        CHECK(int(pixel(rgba, 10, 3)[3]) == 255);  // no tRNS: opaque filler
        const image_u8 gray = decode_png(file.data(), file.size(), request(pixel_layout::gray));
        CHECK(int(pixel(gray, 10, 3)[0]) == pil_luma(51, 51, 0));
    }
    SECTION("palette tRNS becomes alpha in rgba, and is dropped otherwise") {
        const bytes file = load_png("tbbn3p08.png");
        const image_u8 rgba = decode_png(file.data(), file.size(), request(pixel_layout::rgba));
        CHECK(std::vector<int>(pixel(rgba, 0, 0), pixel(rgba, 0, 0) + 4) == std::vector<int>{255, 255, 255, 0});
        CHECK(std::vector<int>(pixel(rgba, 16, 16), pixel(rgba, 16, 16) + 4) == std::vector<int>{158, 158, 158, 255});
        const image_u8 rgb = decode_png(file.data(), file.size(), request(pixel_layout::rgb));
        CHECK(std::vector<int>(pixel(rgb, 0, 0), pixel(rgb, 0, 0) + 3) == std::vector<int>{255, 255, 255});
    }
    SECTION("4-bit gray scales to 0..255 and replicates to RGB") {
        const bytes file = load_png("basn0g04.png");
        const image_u8 gray = decode_png(file.data(), file.size(), request(pixel_layout::gray));
        CHECK(int(pixel(gray, 0, 0)[0]) == 0);
        CHECK(int(pixel(gray, 9, 2)[0]) == 34);
        const image_u8 rgb = decode_png(file.data(), file.size(), request(pixel_layout::rgb));
        CHECK(std::vector<int>(pixel(rgb, 9, 2), pixel(rgb, 9, 2) + 3) == std::vector<int>{34, 34, 34});
    }
    SECTION("gray tRNS gives alpha 0 only in rgba") {
        const bytes file = load_png("tbbn0g04.png");
        const image_u8 rgba = decode_png(file.data(), file.size(), request(pixel_layout::rgba));
        std::size_t transparent = 0;
        for (std::size_t i = 3; i < rgba.pixels.size(); i += 4) transparent += rgba.pixels[i] == 0;
        CHECK(transparent > 0);
        CHECK(transparent < std::size_t(rgba.width) * rgba.height);
    }
    SECTION("interlaced and non-interlaced versions decode to the same pixels") {
        for (const char* kind : {"0g01", "0g02", "0g04", "0g08", "0g16", "2c08", "2c16", "3p01", "3p02", "3p04", "3p08",
                                 "4a08", "4a16", "6a08", "6a16"}) {
            INFO(kind);
            const bytes n = load_png(std::string("basn") + kind + ".png");
            const bytes i = load_png(std::string("basi") + kind + ".png");
            for (pixel_layout layout : all_layouts)
                CHECK(same_pixels(decode_png(n.data(), n.size(), request(layout)), decode_png(i.data(), i.size(), request(layout))));
        }
    }
}

TEST_CASE("16-bit PNG with an ICC profile decodes to 8 bits", "[png]") {
    const bytes file = load_jpeg("monkey16.png");
    decoded_info info{};
    const image_u8 img = decode_image(file.data(), file.size(), request(pixel_layout::rgb), &info);
    CHECK(img.width == 149);
    CHECK(img.height == 227);
    CHECK(img.channels == 3);
    CHECK(info.full_width == 149);
    CHECK(info.full_height == 227);
    CHECK(same_pixels(img, reference_png(file, pixel_layout::rgb)));
    const bytes gray = load_jpeg("testorig.png");
    const image_u8 g = decode_image(gray.data(), gray.size(), request(pixel_layout::gray));
    CHECK(g.width == 227);
    CHECK(g.height == 149);
    CHECK(g.channels == 1);
}

TEST_CASE("PNG max_rows stops early unless the file is interlaced", "[png]") {
    const bytes file = load_png("basn2c08.png");
    for (pixel_layout layout : all_layouts) {
        const image_u8 all = decode_png(file.data(), file.size(), request(layout));
        decoded_info info{};
        const image_u8 part = decode_png(file.data(), file.size(), request(layout, 5), &info);
        CHECK(part.height == 5);
        CHECK(part.width == 32);
        CHECK(info.full_height == 32);
        CHECK(std::equal(part.pixels.begin(), part.pixels.end(), all.pixels.begin()));
        CHECK(decode_png(file.data(), file.size(), request(layout, 32)).height == 32);
        CHECK(decode_png(file.data(), file.size(), request(layout, 1000)).height == 32);
    }
    // Rows after max_rows are not even read: a file cut short after them still gives them
    // (the image must span several IDAT reads for that, hence a large noisy one).
    const image_u8 big = random_image(200, 200, 3, 99);
    const bytes big_png = encode_png(big);
    const bytes cut(big_png.begin(), big_png.begin() + std::ptrdiff_t(big_png.size() / 2));
    CHECK_THROWS_AS(decode_png(cut.data(), cut.size(), request(pixel_layout::rgb)), decode_error);
    const image_u8 head = decode_png(cut.data(), cut.size(), request(pixel_layout::rgb, 2));
    CHECK(head.height == 2);
    CHECK(std::equal(head.pixels.begin(), head.pixels.end(), big.pixels.begin()));

    const bytes interlaced = load_png("basi2c08.png");
    for (pixel_layout layout : all_layouts) {
        decoded_info info{};
        const image_u8 img = decode_png(interlaced.data(), interlaced.size(), request(layout, 5), &info);
        CHECK(img.height == 32);  // Adam7: decoded whole, every row returned
        CHECK(info.full_height == 32);
        CHECK(same_pixels(img, decode_png(file.data(), file.size(), request(layout))));
    }
}

TEST_CASE("PNG refuses oversized and implausible images", "[png]") {
    // A valid header claiming 60000 x 60000 RGBA, with a correct CRC, and no image data.
    auto with_size = [](std::uint32_t w, std::uint32_t h, std::uint8_t color_type) {
        image_u8 tiny;
        tiny.width = 1, tiny.height = 1, tiny.channels = 4, tiny.pixels = {1, 2, 3, 4};
        bytes png = encode_png(tiny);
        for (int i = 0; i < 4; ++i) {
            png[16 + i] = std::uint8_t(w >> (24 - 8 * i));
            png[20 + i] = std::uint8_t(h >> (24 - 8 * i));
        }
        png[25] = color_type;
        // Recompute the IHDR CRC by hand (CRC-32 of type + data).
        std::uint32_t crc = 0xFFFFFFFFu;
        for (std::size_t i = 12; i < 29; ++i) {
            crc ^= png[i];
            for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
        }
        crc ^= 0xFFFFFFFFu;
        for (int i = 0; i < 4; ++i) png[29 + i] = std::uint8_t(crc >> (24 - 8 * i));
        return png;
    };
    const bytes huge = with_size(60000, 60000, 6);
    CHECK_THROWS_WITH(decode_png(huge.data(), huge.size(), request(pixel_layout::rgba)), Catch::Contains("PNG: "));
    const bytes too_wide = with_size(100000, 1, 6);
    CHECK_THROWS_WITH(decode_png(too_wide.data(), too_wide.size(), request(pixel_layout::rgba)), Catch::Contains("exceeds user limit"));
    const bytes big_gray = with_size(40000, 40000, 0);  // 1.6 GB gray: under the limit, but no data
    CHECK_THROWS_WITH(decode_png(big_gray.data(), big_gray.size(), request(pixel_layout::gray)),
                      Catch::Contains("far too small"));
    const bytes over = with_size(50000, 50000, 0);  // 2.5 GB of rgb output
    CHECK_THROWS_AS(decode_png(over.data(), over.size(), request(pixel_layout::rgb)), decode_error);
    // The IHDR itself is fine, so the size can still be read.
    std::uint32_t w = 0, h = 0;
    CHECK(read_image_size(huge.data(), huge.size(), w, h));
    CHECK(w == 60000);
    CHECK(h == 60000);
}

// =============================================================================================
TEST_CASE("JPEG test images decode like libjpeg's own RGB output", "[jpeg]") {
    for (const char* name : {"testorig.jpg", "testimgint.jpg", "testimgari.jpg"}) {
        INFO(name);
        const bytes file = load_jpeg(name);
        const image_u8 ref = reference_jpeg(file, JCS_RGB);
        decoded_info info{};
        const image_u8 rgb = decode_image(file.data(), file.size(), request(pixel_layout::rgb), &info);
        CHECK(rgb.width == 227);
        CHECK(rgb.height == 149);
        CHECK(info.full_width == 227);
        CHECK(info.full_height == 149);
        CHECK(same_pixels(rgb, ref));
        const image_u8 rgba = decode_jpeg(file.data(), file.size(), request(pixel_layout::rgba));
        const image_u8 gray = decode_jpeg(file.data(), file.size(), request(pixel_layout::gray));
        REQUIRE(rgba.channels == 4);
        REQUIRE(gray.channels == 1);
        bool rgba_ok = true, gray_ok = true;
        for (std::size_t i = 0; i < std::size_t(rgb.width) * rgb.height; ++i) {
            const std::uint8_t* p = rgb.pixels.data() + 3 * i;
            rgba_ok &= rgba.pixels[4 * i] == p[0] && rgba.pixels[4 * i + 1] == p[1] && rgba.pixels[4 * i + 2] == p[2] &&
                       rgba.pixels[4 * i + 3] == 255;
            gray_ok &= gray.pixels[i] == pil_luma(p[0], p[1], p[2]);
        }
        CHECK(rgba_ok);
        CHECK(gray_ok);
        std::uint32_t w = 0, h = 0;
        CHECK(read_image_size(file.data(), file.size(), w, h));
        CHECK(w == 227);
        CHECK(h == 149);
    }
    // The arithmetic-coded file is the same picture, coded differently.
    const bytes orig = load_jpeg("testorig.jpg"), ari = load_jpeg("testimgari.jpg");
    const int diff = max_abs_diff(decode_jpeg(orig.data(), orig.size(), request(pixel_layout::rgb)),
                                  decode_jpeg(ari.data(), ari.size(), request(pixel_layout::rgb)));
    CHECK(diff < 24);
}

TEST_CASE("progressive, arithmetic and grayscale JPEGs", "[jpeg]") {
    const bytes orig = load_jpeg("testorig.jpg");
    const image_u8 source = decode_jpeg(orig.data(), orig.size(), request(pixel_layout::rgb));
    const bytes baseline = encode_jpeg_test(source.pixels.data(), source.width, source.height, 3, JCS_RGB);
    jpeg_options progressive_options;
    progressive_options.progressive = true;
    const bytes progressive = encode_jpeg_test(source.pixels.data(), source.width, source.height, 3, JCS_RGB, progressive_options);
    jpeg_options arithmetic_options;
    arithmetic_options.arithmetic = true;
    arithmetic_options.progressive = true;
    const bytes arithmetic = encode_jpeg_test(source.pixels.data(), source.width, source.height, 3, JCS_RGB, arithmetic_options);
    const image_u8 base_img = decode_jpeg(baseline.data(), baseline.size(), request(pixel_layout::rgb));
    // Same quantised coefficients, only ordered differently in the file: identical pixels.
    CHECK(same_pixels(base_img, decode_jpeg(progressive.data(), progressive.size(), request(pixel_layout::rgb))));
    CHECK(same_pixels(base_img, decode_jpeg(arithmetic.data(), arithmetic.size(), request(pixel_layout::rgb))));
    CHECK(max_abs_diff(base_img, source) < 40);

    // Grayscale: gray directly, replicated for rgb/rgba.
    const bytes gray_png = load_jpeg("testorig.png");
    const image_u8 gray_src = decode_png(gray_png.data(), gray_png.size(), request(pixel_layout::gray));
    const bytes gray_jpeg = encode_jpeg_test(gray_src.pixels.data(), gray_src.width, gray_src.height, 1, JCS_GRAYSCALE);
    const image_u8 g = decode_jpeg(gray_jpeg.data(), gray_jpeg.size(), request(pixel_layout::gray));
    CHECK(same_pixels(g, reference_jpeg(gray_jpeg, JCS_GRAYSCALE)));
    const image_u8 rgb = decode_jpeg(gray_jpeg.data(), gray_jpeg.size(), request(pixel_layout::rgb));
    const image_u8 rgba = decode_jpeg(gray_jpeg.data(), gray_jpeg.size(), request(pixel_layout::rgba));
    bool ok = true;
    for (std::size_t i = 0; i < g.pixels.size(); ++i) {
        const std::uint8_t v = g.pixels[i];
        ok &= rgb.pixels[3 * i] == v && rgb.pixels[3 * i + 1] == v && rgb.pixels[3 * i + 2] == v;
        ok &= rgba.pixels[4 * i] == v && rgba.pixels[4 * i + 1] == v && rgba.pixels[4 * i + 2] == v && rgba.pixels[4 * i + 3] == 255;
    }
    CHECK(ok);
    CHECK(max_abs_diff(g, gray_src) < 40);
}

TEST_CASE("CMYK and YCCK JPEGs convert to RGB", "[jpeg]") {
    // Flat 16x16 blocks of known CMYK samples survive quality-100 coding nearly exactly.
    const std::uint8_t colors[4][4] = {{255, 255, 255, 255}, {200, 100, 50, 255}, {255, 128, 0, 128}, {10, 20, 30, 40}};
    const std::uint32_t w = 64, h = 16;
    bytes cmyk(std::size_t(w) * h * 4);
    for (std::uint32_t y = 0; y < h; ++y)
        for (std::uint32_t x = 0; x < w; ++x) std::memcpy(&cmyk[(std::size_t(y) * w + x) * 4], colors[x / 16], 4);

    struct variant {
        const char* name;
        J_COLOR_SPACE space;
        bool adobe;
    };
    for (const variant v : {variant{"CMYK+Adobe", JCS_CMYK, true}, variant{"YCCK", JCS_YCCK, true}, variant{"CMYK plain", JCS_CMYK, false}}) {
        INFO(v.name);
        jpeg_options o;
        o.quality = 100;
        o.jpeg_space = v.space;
        o.adobe_marker = v.adobe;
        const bytes file = encode_jpeg_test(cmyk.data(), w, h, 4, JCS_CMYK, o);
        const image_u8 rgb = decode_image(file.data(), file.size(), request(pixel_layout::rgb));
        const image_u8 rgba = decode_image(file.data(), file.size(), request(pixel_layout::rgba));
        const image_u8 gray = decode_image(file.data(), file.size(), request(pixel_layout::gray));
        REQUIRE(rgb.width == w);
        for (int block = 0; block < 4; ++block) {
            INFO("block " << block);
            const std::uint8_t* c = colors[block];
            int expect[3];
            for (int k = 0; k < 3; ++k) {
                // Adobe files store inverted ink: R = C*K/255; plain files: (255-C)(255-K)/255.
                const int ink = v.adobe ? c[k] : 255 - c[k], black = v.adobe ? c[3] : 255 - c[3];
                expect[k] = (ink * black + 127) / 255;
            }
            const std::uint32_t x = block * 16 + 8, y = 8;
            for (int k = 0; k < 3; ++k) {
                CHECK(std::abs(int(pixel(rgb, x, y)[k]) - expect[k]) <= 3);
                CHECK(pixel(rgba, x, y)[k] == pixel(rgb, x, y)[k]);
            }
            CHECK(int(pixel(rgba, x, y)[3]) == 255);
            CHECK(int(pixel(gray, x, y)[0]) == pil_luma(pixel(rgb, x, y)[0], pixel(rgb, x, y)[1], pixel(rgb, x, y)[2]));
        }
    }
}

TEST_CASE("12-bit JPEG is refused with a clear message", "[jpeg]") {
    const bytes file = load_jpeg("monkey12.jpg");
    CHECK_THROWS_AS(decode_image(file.data(), file.size(), request(pixel_layout::rgb)), decode_error);
    CHECK_THROWS_WITH(decode_jpeg(file.data(), file.size(), request(pixel_layout::rgb)),
                      Catch::Contains("12-bit JPEG is not supported (only 8-bit precision)"));
    std::uint32_t w = 0, h = 0;
    CHECK_THROWS_WITH(read_image_size(file.data(), file.size(), w, h), Catch::Contains("12-bit"));
}

TEST_CASE("JPEG DCT scaling picks the smallest scale that covers the minimum", "[jpeg]") {
    const bytes file = load_jpeg("testorig.jpg");  // 227 x 149
    auto scaled = [&](std::uint32_t min_w, std::uint32_t min_h, pixel_layout layout = pixel_layout::rgb,
                      std::uint32_t max_rows = 0) {
        decode_request r = request(layout, max_rows);
        r.min_width = min_w;
        r.min_height = min_h;
        decoded_info info{};
        image_u8 img = decode_jpeg(file.data(), file.size(), r, &info);
        CHECK(info.full_width == 227);
        CHECK(info.full_height == 149);
        return img;
    };
    auto size = [](const image_u8& img) { return std::make_pair(img.width, img.height); };
    CHECK(size(scaled(0, 0)) == std::make_pair(227u, 149u));
    CHECK(size(scaled(1, 1)) == std::make_pair(29u, 19u));      // 1/8, rounded up
    CHECK(size(scaled(100, 50)) == std::make_pair(114u, 75u));  // 4/8: 3/8 gives 86 wide
    CHECK(size(scaled(0, 60)) == std::make_pair(114u, 75u));    // 3/8 gives 56 high
    CHECK(size(scaled(86, 0)) == std::make_pair(86u, 56u));     // 3/8 exactly
    CHECK(size(scaled(227, 149)) == std::make_pair(227u, 149u));
    CHECK(size(scaled(5000, 5000)) == std::make_pair(227u, 149u));  // never upscales
    CHECK(jpeg_dct_scale_eighths(227, 149, 100, 50) == 4);
    CHECK(jpeg_dct_scale_eighths(227, 149, 0, 0) == 8);
    CHECK(jpeg_dct_scale_eighths(227, 149, 1, 0) == 1);
    CHECK(jpeg_dct_scale_eighths(227, 149, 228, 1) == 8);
    const image_u8 half = scaled(100, 50);
    for (pixel_layout layout : all_layouts) {
        const image_u8 top = scaled(100, 50, layout, 10);
        const image_u8 whole = scaled(100, 50, layout);
        CHECK(size(top) == std::make_pair(114u, 10u));
        CHECK(std::equal(top.pixels.begin(), top.pixels.end(), whole.pixels.begin()));
    }
    // Scaling also works for grayscale output of a color file and matches its RGB.
    const image_u8 gray = scaled(100, 50, pixel_layout::gray);
    bool ok = true;
    for (std::size_t i = 0; i < gray.pixels.size(); ++i)
        ok &= gray.pixels[i] == pil_luma(half.pixels[3 * i], half.pixels[3 * i + 1], half.pixels[3 * i + 2]);
    CHECK(ok);
}

TEST_CASE("JPEG max_rows stops early and ignores the rest of the file", "[jpeg]") {
    const bytes file = load_jpeg("testorig.jpg");
    for (pixel_layout layout : all_layouts) {
        const image_u8 all = decode_jpeg(file.data(), file.size(), request(layout));
        for (std::uint32_t rows : {1u, 10u, 16u, 17u, 148u}) {
            INFO(rows);
            decoded_info info{};
            const image_u8 part = decode_jpeg(file.data(), file.size(), request(layout, rows), &info);
            CHECK(part.height == rows);
            CHECK(info.full_height == 149);
            CHECK(std::equal(part.pixels.begin(), part.pixels.end(), all.pixels.begin()));
        }
        CHECK(decode_jpeg(file.data(), file.size(), request(layout, 149)).height == 149);
        CHECK(decode_jpeg(file.data(), file.size(), request(layout, 500)).height == 149);
    }
    // Stopping on purpose is not a premature end: a file cut after the needed rows is fine.
    const bytes cut(file.begin(), file.begin() + std::ptrdiff_t(file.size() * 3 / 4));
    CHECK_THROWS_AS(decode_jpeg(cut.data(), cut.size(), request(pixel_layout::rgb)), decode_error);
    CHECK(decode_jpeg(cut.data(), cut.size(), request(pixel_layout::rgb, 16)).height == 16);
}

TEST_CASE("JPEG refuses huge headers before allocating", "[jpeg]") {
    bytes file = load_jpeg("testorig.jpg");
    // Patch the SOF0 height/width (FFC0, length, precision, then height and width).
    std::size_t sof = 0;
    for (std::size_t i = 2; i + 9 < file.size(); ++i)
        if (file[i] == 0xFF && file[i + 1] == 0xC0) {
            sof = i;
            break;
        }
    REQUIRE(sof != 0);
    file[sof + 5] = 0xFD, file[sof + 6] = 0xE8;  // 65000 rows
    file[sof + 7] = 0xFD, file[sof + 8] = 0xE8;  // 65000 columns
    CHECK_THROWS_WITH(decode_jpeg(file.data(), file.size(), request(pixel_layout::rgb)), Catch::Contains("too large"));
    std::uint32_t w = 0, h = 0;
    CHECK(read_image_size(file.data(), file.size(), w, h));
    CHECK(w == 65000);

    // A progressive file that claims 40000 x 40000: the whole-image coefficient buffer is
    // refused (or the data runs out) before any output is allocated.
    const bytes orig = load_jpeg("testorig.jpg");
    const image_u8 source = decode_jpeg(orig.data(), orig.size(), request(pixel_layout::rgb));
    jpeg_options o;
    o.progressive = true;
    bytes prog = encode_jpeg_test(source.pixels.data(), source.width, source.height, 3, JCS_RGB, o);
    for (std::size_t i = 2; i + 9 < prog.size(); ++i)
        if (prog[i] == 0xFF && prog[i + 1] == 0xC2) {
            prog[i + 5] = 0x9C, prog[i + 6] = 0x40, prog[i + 7] = 0x9C, prog[i + 8] = 0x40;
            break;
        }
    CHECK_THROWS_WITH(decode_jpeg(prog.data(), prog.size(), request(pixel_layout::gray)),
                      Catch::Contains("MiB of decoder memory"));
}

// =============================================================================================
TEST_CASE("truncated files always throw decode_error", "[robust]") {
    SECTION("PNG, every length") {
        const bytes file = load_png("basn6a08.png");
        for (std::size_t n = 0; n < file.size(); ++n) {
            INFO("length " << n);
            for (pixel_layout layout : all_layouts) {
                CHECK_THROWS_AS(decode_png(file.data(), n, request(layout)), decode_error);
                CHECK_THROWS_AS(decode_image(file.data(), n, request(layout)), decode_error);
            }
        }
        CHECK_NOTHROW(decode_png(file.data(), file.size(), request(pixel_layout::rgb)));
    }
    SECTION("JPEG, lengths in steps of 17 and the last few") {
        const bytes file = load_jpeg("testorig.jpg");
        std::vector<std::size_t> lengths;
        for (std::size_t n = 0; n < file.size(); n += 17) lengths.push_back(n);
        for (std::size_t k = 1; k <= 4; ++k) lengths.push_back(file.size() - k);
        for (std::size_t n : lengths) {
            INFO("length " << n);
            CHECK_THROWS_AS(decode_jpeg(file.data(), n, request(pixel_layout::rgb)), decode_error);
            CHECK_THROWS_AS(decode_image(file.data(), n, request(pixel_layout::gray)), decode_error);
        }
        CHECK_THROWS_WITH(decode_jpeg(file.data(), file.size() - 2, request(pixel_layout::rgb)),
                          Catch::Contains("Premature end of JPEG file"));
        CHECK_NOTHROW(decode_jpeg(file.data(), file.size(), request(pixel_layout::rgb)));
        std::uint32_t w = 0, h = 0;
        for (std::size_t n : {std::size_t(0), std::size_t(3), std::size_t(100), std::size_t(400)})
            CHECK_THROWS_AS(read_image_size(file.data(), n, w, h), decode_error);
        // Progressive data is read whole at start: truncation anywhere is caught too.
        const image_u8 source = decode_jpeg(file.data(), file.size(), request(pixel_layout::rgb));
        jpeg_options o;
        o.progressive = true;
        const bytes prog = encode_jpeg_test(source.pixels.data(), source.width, source.height, 3, JCS_RGB, o);
        for (std::size_t n = 0; n < prog.size(); n += 23) {
            INFO("progressive length " << n);
            CHECK_THROWS_AS(decode_jpeg(prog.data(), n, request(pixel_layout::rgb, 8)), decode_error);
        }
    }
}

TEST_CASE("flipped bytes throw decode_error or decode, never crash", "[robust]") {
    SECTION("JPEG") {
        const bytes file = load_jpeg("testorig.jpg");
        int decoded = 0, refused = 0;
        for (std::size_t at = 0; at < file.size(); at += 7) {
            for (std::uint8_t mask : {std::uint8_t(0xFF), std::uint8_t(0x10)}) {
                bytes bad = file;
                bad[at] ^= mask;
                INFO("byte " << at << " ^ " << int(mask));
                try {
                    const image_u8 img = decode_image(bad.data(), bad.size(), request(pixel_layout::rgb));
                    CHECK(img.pixels.size() == img.row_bytes() * img.height);
                    ++decoded;
                } catch (const decode_error&) {
                    ++refused;
                }
            }
        }
        CHECK(refused > 0);
        CHECK(decoded > 0);  // most flips in entropy data just change pixels
    }
    SECTION("PNG: CRCs catch every flip") {
        const bytes file = load_png("basn6a08.png");
        for (std::size_t at = 0; at < file.size(); ++at) {
            bytes bad = file;
            bad[at] ^= 0x01;
            INFO("byte " << at);
            CHECK_THROWS_AS(decode_image(bad.data(), bad.size(), request(pixel_layout::rgba)), decode_error);
        }
    }
}

// =============================================================================================
TEST_CASE("encode_png round-trips exactly and deterministically", "[encode]") {
    const std::pair<std::uint32_t, std::uint32_t> sizes[] = {{1, 1}, {7, 3}, {33, 17}, {101, 1}, {1, 64}, {250, 129}};
    const pixel_layout layouts[] = {pixel_layout::gray, pixel_layout::rgb, pixel_layout::rgba};
    std::uint32_t seed = 1;
    for (const auto& [w, h] : sizes) {
        for (pixel_layout layout : layouts) {
            for (bool noisy : {true, false}) {
                const std::uint32_t c = channel_count(layout);
                INFO(w << "x" << h << "x" << c << (noisy ? " random" : " smooth"));
                const image_u8 img = noisy ? random_image(w, h, c, seed++) : synthetic_image(w, h, c, seed++);
                const bytes png = encode_png(img);
                REQUIRE(png.size() > 8);
                CHECK(sniff_format(png.data(), png.size()) == file_format::png);
                CHECK(encode_png(img) == png);
                CHECK(same_pixels(decode_png(png.data(), png.size(), request(layout)), img));
                CHECK(same_pixels(decode_image(png.data(), png.size(), request(layout)), img));
                CHECK(same_pixels(reference_png(png, layout), img));
                const std::string text(png.begin(), png.end());
                CHECK(text.find("tIME") == std::string::npos);
            }
        }
    }
    image_u8 bad;
    bad.width = 2, bad.height = 2, bad.channels = 2, bad.pixels.resize(8);
    CHECK_THROWS_AS(encode_png(bad), std::invalid_argument);
    bad.channels = 3;
    CHECK_THROWS_AS(encode_png(bad), std::invalid_argument);  // 8 bytes for 2x2x3
    image_u8 empty;
    empty.channels = 3;
    CHECK_THROWS_AS(encode_png(empty), std::invalid_argument);
}

// =============================================================================================
TEST_CASE("color conversions", "[convert]") {
    const std::uint8_t rgb[] = {255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 12, 34, 56};
    std::uint8_t gray[6];
    rgb_to_gray_pil(rgb, gray, 6);
    // PIL: Image.new("RGB", (1,1), c).convert("L") gives 76, 150, 29, 255, 0 and 29.
    CHECK(std::vector<int>(gray, gray + 6) == std::vector<int>{76, 150, 29, 255, 0, pil_luma(12, 34, 56)});
    CHECK(int(pil_luma(12, 34, 56)) == 30);
    std::uint8_t in_place[6] = {10, 20, 30, 200, 100, 50};
    rgb_to_gray_pil(in_place, in_place, 2);
    CHECK(int(in_place[0]) == pil_luma(10, 20, 30));
    CHECK(int(in_place[1]) == pil_luma(200, 100, 50));

    const std::uint8_t cmyk[] = {255, 255, 255, 255, 0, 0, 0, 0, 255, 128, 0, 128};
    std::uint8_t out[9];
    cmyk_to_rgb(cmyk, out, 3, true);  // Adobe: inverted ink
    CHECK(std::vector<int>(out, out + 9) == std::vector<int>{255, 255, 255, 0, 0, 0, 128, 64, 0});
    cmyk_to_rgb(cmyk, out, 3, false);
    CHECK(std::vector<int>(out, out + 9) == std::vector<int>{0, 0, 0, 255, 255, 255, 0, 63, 127});

    image_u8 img;
    img.width = 2, img.height = 1, img.channels = 3, img.pixels = {255, 0, 0, 1, 2, 3};
    const image_u8 g = convert_layout(img, pixel_layout::gray);
    CHECK(g.channels == 1);
    CHECK(g.pixels == std::vector<std::uint8_t>{76, pil_luma(1, 2, 3)});
    const image_u8 rgba = convert_layout(img, pixel_layout::rgba);
    CHECK(rgba.pixels == std::vector<std::uint8_t>{255, 0, 0, 255, 1, 2, 3, 255});
    CHECK(convert_layout(rgba, pixel_layout::rgb).pixels == img.pixels);
    CHECK(convert_layout(rgba, pixel_layout::gray).pixels == g.pixels);
    CHECK(convert_layout(g, pixel_layout::rgb).pixels == std::vector<std::uint8_t>{76, 76, 76, g.pixels[1], g.pixels[1], g.pixels[1]});
    CHECK(convert_layout(g, pixel_layout::rgba).pixels.size() == 8);
    CHECK(convert_layout(img, pixel_layout::rgb).pixels == img.pixels);
    image_u8 broken = img;
    broken.pixels.pop_back();
    CHECK_THROWS_AS(convert_layout(broken, pixel_layout::gray), std::invalid_argument);
}

// =============================================================================================
TEST_CASE("decoders keep no shared state between threads", "[robust]") {
    const bytes png = load_png("basi6a08.png"), jpg = load_jpeg("testorig.jpg");
    const bytes bad = load_png("xcsn0g01.png");
    const image_u8 png_ref = decode_png(png.data(), png.size(), request(pixel_layout::rgba));
    const image_u8 jpg_ref = decode_jpeg(jpg.data(), jpg.size(), request(pixel_layout::gray));
    std::atomic<int> mismatches{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&] {
            for (int i = 0; i < 40; ++i) {
                if (!same_pixels(decode_png(png.data(), png.size(), request(pixel_layout::rgba)), png_ref)) ++mismatches;
                if (!same_pixels(decode_jpeg(jpg.data(), jpg.size(), request(pixel_layout::gray)), jpg_ref)) ++mismatches;
                try {
                    decode_png(bad.data(), bad.size(), request(pixel_layout::rgb));
                    ++mismatches;
                } catch (const decode_error&) {
                }
            }
        });
    for (auto& th : threads) th.join();
    CHECK(mismatches == 0);
}

TEST_CASE("the libdeflate fast path gives libpng's pixels, and takes the common PNGs", "[png][fast]") {
    int taken = 0;
    auto compare = [&](const bytes& file, const std::string& what) {
        for (pixel_layout layout : all_layouts) {
            for (std::uint32_t rows : {0u, 1u, 7u}) {
                INFO(what << " layout " << channel_count(layout) << " rows " << rows);
                image_u8 fast, slow;
                const bool took = decode_png_fast(file.data(), file.size(), request(layout, rows), fast, nullptr);
                if (!took) continue;
                ++taken;
                decode_png_libpng(file.data(), file.size(), request(layout, rows), slow);
                REQUIRE(fast.width == slow.width);
                REQUIRE(fast.height == slow.height);
                REQUIRE(fast.channels == slow.channels);
                REQUIRE(fast.pixels == slow.pixels);
            }
        }
    };
    for (const auto& name : pngsuite_files())
        if (!is_corrupt_sample(name)) compare(load_png(name), name);
    // Generated noisy images exercise every filter type libpng's encoder picks.
    std::mt19937 rng(7);
    for (std::uint32_t channels : {1u, 3u, 4u}) {
        image_u8 img{67, 41, channels, {}};
        img.pixels.resize(67 * 41 * channels);
        for (std::size_t i = 0; i < img.pixels.size(); ++i)
            img.pixels[i] = static_cast<std::uint8_t>((i % 7 == 0) ? rng() : (i / channels) % 251);
        compare(encode_png(img), "generated " + std::to_string(channels));
    }
#if SHARDPACK_HAVE_LIBDEFLATE
    REQUIRE(taken > 100);
    // Damage is never accepted by the fast path: a flipped byte anywhere sends the file to
    // libpng, which refuses it.
    const bytes good = load_png("basn2c08.png");
    for (std::size_t i = 8; i < good.size(); ++i) {
        bytes bad = good;
        bad[i] ^= 0x40;
        image_u8 out;
        INFO("byte " << i);
        REQUIRE_FALSE(decode_png_fast(bad.data(), bad.size(), request(pixel_layout::rgb), out, nullptr));
    }
#endif
}

// The fast path allocated the output without the decode limit: a gray PNG read as RGBA is four
// times its raw size, so a valid 512 MiB gray image gave a 2 GiB + 128 KiB buffer.
TEST_CASE("the fast path keeps the decode limit when the output has more channels than the file", "[png][fast]") {
    const std::uint32_t w = 32768, h = 16385;  // 8-bit gray: 512 MiB raw, over 2 GiB as RGBA
    bytes png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
    auto chunk = [&](const char* type, const bytes& body) {
        for (int i = 0; i < 4; ++i) png.push_back(std::uint8_t(body.size() >> (24 - 8 * i)));
        const std::size_t start = png.size();
        png.insert(png.end(), type, type + 4);
        png.insert(png.end(), body.begin(), body.end());
        const uLong crc = crc32(0, png.data() + start, static_cast<uInt>(png.size() - start));
        for (int i = 0; i < 4; ++i) png.push_back(std::uint8_t(crc >> (24 - 8 * i)));
    };
    bytes ihdr(13, 0);
    for (int i = 0; i < 4; ++i) {
        ihdr[i] = std::uint8_t(w >> (24 - 8 * i));
        ihdr[4 + i] = std::uint8_t(h >> (24 - 8 * i));
    }
    ihdr[8] = 8;  // bit depth; color type 0 (gray), not interlaced
    chunk("IHDR", ihdr);
    // Every row: filter byte 0 and zeros, as one zlib stream (run-length deflate: fast, small).
    z_stream z{};
    REQUIRE(deflateInit2(&z, 9, Z_DEFLATED, 15, 9, Z_RLE) == Z_OK);
    const bytes zeros(std::size_t(1) << 20, 0);
    bytes idat, buf(std::size_t(1) << 16);
    std::uint64_t left = std::uint64_t(h) * (w + 1);
    int flush = Z_NO_FLUSH;
    do {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, zeros.size()));
        z.next_in = const_cast<Bytef*>(zeros.data());
        z.avail_in = static_cast<uInt>(n);
        left -= n;
        flush = left == 0 ? Z_FINISH : Z_NO_FLUSH;
        do {
            z.next_out = buf.data();
            z.avail_out = static_cast<uInt>(buf.size());
            REQUIRE(deflate(&z, flush) != Z_STREAM_ERROR);
            idat.insert(idat.end(), buf.data(), buf.data() + (buf.size() - z.avail_out));
        } while (z.avail_out == 0);
    } while (flush != Z_FINISH);
    deflateEnd(&z);
    chunk("IDAT", idat);
    chunk("IEND", {});

    image_u8 out;
    REQUIRE_FALSE(decode_png_fast(png.data(), png.size(), request(pixel_layout::rgba), out, nullptr));
    REQUIRE(out.pixels.empty());
    REQUIRE_THROWS_WITH(decode_png(png.data(), png.size(), request(pixel_layout::rgba)),
                        Catch::Contains("image too large") && Catch::Contains("decode limit"));
}

// Found by fuzz_decode (300 s): a 32x32 gray+alpha PNG whose deflate stream uses a Huffman code
// zlib refuses; libdeflate decodes it, by design, and its Adler-32 and chunk CRCs match. The fast
// path takes it; change one byte of the Adler-32 and it leaves the file to libpng's error.
TEST_CASE("a deflate stream zlib refuses but libdeflate decodes is taken only with matching checksums", "[png][fast]") {
    const std::string hex =
        "89504e470d0a1a0a0000000d4948445200000020000000200804000000d973b27f0000000467414d41000186a031e896"
        "5f00000002624b47440000aa8d23320000003549444154789c63fccfc0c001859c683431229c2cdf1928032c3f86be01"
        "e361301a06543160341047c3802a068c06e2681850c30000df2a207da994c2880000000049454e44ae426082";
    bytes png;
    for (std::size_t i = 0; i < hex.size(); i += 2) png.push_back(std::uint8_t(std::stoi(hex.substr(i, 2), nullptr, 16)));
    REQUIRE(png.size() == 140);
    image_u8 by_libpng;
    REQUIRE_THROWS_WITH(decode_png_libpng(png.data(), png.size(), request(pixel_layout::rgba), by_libpng, nullptr),
                        Catch::Contains("invalid literal/length code"));
#if SHARDPACK_HAVE_LIBDEFLATE
    image_u8 fast;
    REQUIRE(decode_png_fast(png.data(), png.size(), request(pixel_layout::rgba), fast, nullptr));
    REQUIRE(fast.width == 32);
    REQUIRE(fast.height == 32);
    // The Adler-32 is the 4 bytes before the IDAT chunk's CRC; a changed one must not pass. The
    // chunk CRC is fixed up so that only the Adler-32 is wrong.
    const std::size_t idat = 8 + 25 + 16 + 14;  // signature, IHDR, gAMA, bKGD
    REQUIRE(std::string(png.begin() + idat + 4, png.begin() + idat + 8) == "IDAT");
    const std::size_t length = 0x35, crc_at = idat + 8 + length;
    png[crc_at - 1] ^= 1;
    const uLong crc = crc32(0, png.data() + idat + 4, static_cast<uInt>(4 + length));
    for (int i = 0; i < 4; ++i) png[crc_at + i] = std::uint8_t(crc >> (24 - 8 * i));
    image_u8 refused;
    REQUIRE_FALSE(decode_png_fast(png.data(), png.size(), request(pixel_layout::rgba), refused, nullptr));
    REQUIRE_THROWS_AS(decode_png(png.data(), png.size(), request(pixel_layout::rgba)), decode_error);
#endif
}
