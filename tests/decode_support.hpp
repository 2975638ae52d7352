// What the decoding tests share (test_decode.cpp, test_decode_png.cpp, test_decode_jpeg.cpp):
// the conformance images from ../shared/data (PngSuite, libjpeg-turbo's test images), and
// independent references to check the decoders against: a raw-sample PNG reader on libpng's
// lowest level and libjpeg's own RGB output, hand-made JPEGs, synthetic images.
#pragma once
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

#include <catch2/catch.hpp>

#include "decode/color_convert.hpp"
#include "decode/decode_limits.hpp"
#include "decode/image_decoder.hpp"
#include "decode/jpeg_decoder.hpp"
#include "decode/png_decoder.hpp"
#include "decode/png_encoder.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"  // random_image
#include "decode/png_fast_decoder.hpp"
#include "decode/sniff.hpp"
#include "errors.hpp"

namespace shardpack::test {

using bytes = std::vector<std::uint8_t>;

inline const std::string pngsuite_dir = std::string(SHARDPACK_SHARED_DATA) + "/pngsuite";
inline const std::string jpeg_dir = std::string(SHARDPACK_SHARED_DATA) + "/jpeg";

// Why a case that reads the conformance images cannot run: they live beside the repository in
// ../shared/data (SHARDPACK_SHARED_DATA), which a clone elsewhere lacks. Empty: they are there.
inline std::string shared_data_missing() {
    for (const std::string* dir : {&pngsuite_dir, &jpeg_dir})
        if (!std::filesystem::is_directory(*dir))
            return *dir + " is missing (PngSuite and libjpeg-turbo's test images; configure with "
                          "-DSHARDPACK_SHARED_DATA=<folder> to point at them)";
    return {};
}

inline bytes load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in.good());
    return bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline bytes load_png(const std::string& name) { return load(pngsuite_dir + "/" + name); }
inline bytes load_jpeg(const std::string& name) { return load(jpeg_dir + "/" + name); }

inline decode_request request(pixel_layout layout, std::uint32_t max_rows = 0) {
    decode_request r;
    r.layout = layout;
    r.max_rows = max_rows;
    return r;
}

inline std::vector<std::string> pngsuite_files() {
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(pngsuite_dir))
        if (e.path().extension() == ".png") names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
}

inline bool is_corrupt_sample(const std::string& name) { return name[0] == 'x'; }

// Width and height straight from the IHDR bytes.
inline void ihdr_size(const bytes& file, std::uint32_t& w, std::uint32_t& h) {
    REQUIRE(file.size() >= 24);
    auto be32 = [&](std::size_t at) {
        return std::uint32_t(file[at]) << 24 | std::uint32_t(file[at + 1]) << 16 | std::uint32_t(file[at + 2]) << 8 | file[at + 3];
    };
    w = be32(16);
    h = be32(20);
}

}  // namespace shardpack::test

// The first line of a case that reads ../shared/data: skipped, with the reason, without it.
#define SHARDPACK_NEED_SHARED_DATA()                                                           \
    do {                                                                                       \
        const std::string shardpack_missing_ = ::shardpack::test::shared_data_missing();      \
        if (!shardpack_missing_.empty()) SHARDPACK_SKIP(shardpack_missing_);                   \
    } while (0)

namespace shardpack::test {

inline const pixel_layout all_layouts[] = {pixel_layout::gray, pixel_layout::rgb, pixel_layout::rgba};

inline std::uint8_t pil_luma(std::uint32_t r, std::uint32_t g, std::uint32_t b) {
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

inline raw_png read_raw_png(const bytes& file) {
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
inline std::uint32_t raw_sample(const bytes& row, std::uint32_t x, int c, int channels, int depth) {
    const std::size_t index = std::size_t(x) * channels + c;
    if (depth == 16) return std::uint32_t(row[2 * index]) << 8 | row[2 * index + 1];
    if (depth == 8) return row[index];
    const std::size_t bit = index * depth;
    return (row[bit / 8] >> (8 - depth - bit % 8)) & ((1u << depth) - 1);
}

// 16-bit keeps the high byte; 1/2/4-bit gray scales to 0..255 exactly.
inline std::uint8_t to8(std::uint32_t v, int depth) {
    if (depth == 16) return std::uint8_t(v >> 8);
    return std::uint8_t(v * 255 / ((1u << depth) - 1));
}

inline image_u8 reference_png(const bytes& file, pixel_layout layout) {
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

inline const std::uint8_t* pixel(const image_u8& img, std::uint32_t x, std::uint32_t y) {
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

inline bytes encode_jpeg_test(const std::uint8_t* px, std::uint32_t w, std::uint32_t h, int components, J_COLOR_SPACE in_space,
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
inline image_u8 reference_jpeg(const bytes& file, J_COLOR_SPACE out_space) {
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
inline image_u8 synthetic_image(std::uint32_t w, std::uint32_t h, std::uint32_t channels, std::uint32_t seed) {
    image_u8 img;
    img.width = w;
    img.height = h;
    img.channels = channels;
    img.pixels.resize(std::size_t(w) * h * channels);
    for (std::uint32_t y = 0; y < h; ++y)
        for (std::uint32_t x = 0; x < w; ++x)
            for (std::uint32_t c = 0; c < channels; ++c)
                img.pixels[(std::size_t(y) * w + x) * channels + c] = std::uint8_t((x * (c + 1) + y * 2 + seed) & 255);
    return img;
}

inline bool same_pixels(const image_u8& a, const image_u8& b) {
    return a.width == b.width && a.height == b.height && a.channels == b.channels && a.pixels == b.pixels;
}

inline int max_abs_diff(const image_u8& a, const image_u8& b) {
    REQUIRE(a.pixels.size() == b.pixels.size());
    int m = 0;
    for (std::size_t i = 0; i < a.pixels.size(); ++i) m = std::max(m, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
    return m;
}

}  // namespace shardpack::test
