// The JPEG decoder (libjpeg-turbo): the library's test images against its own RGB output,
// progressive, arithmetic, grayscale, CMYK and YCCK files, 12-bit refused, DCT scaling,
// max_rows, header limits.
#include <catch2/catch.hpp>

#include "decode_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

TEST_CASE("JPEG test images decode like libjpeg's own RGB output", "[jpeg]") {
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
    const bytes file = load_jpeg("monkey12.jpg");
    CHECK_THROWS_AS(decode_image(file.data(), file.size(), request(pixel_layout::rgb)), decode_error);
    CHECK_THROWS_WITH(decode_jpeg(file.data(), file.size(), request(pixel_layout::rgb)),
                      Catch::Contains("12-bit JPEG is not supported (only 8-bit precision)"));
    std::uint32_t w = 0, h = 0;
    CHECK_THROWS_WITH(read_image_size(file.data(), file.size(), w, h), Catch::Contains("12-bit"));
}

TEST_CASE("JPEG DCT scaling picks the smallest scale that covers the minimum", "[jpeg]") {
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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
