// Decoding in general: sniffing formats from magic bytes, truncated and flipped files never
// crash, the PNG encoder round-trips, color conversions, no shared state between threads. The
// PNG and JPEG decoders have files of their own (test_decode_png.cpp, test_decode_jpeg.cpp).
#include <catch2/catch.hpp>

#include "decode_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

TEST_CASE("sniff recognises formats from magic bytes", "[sniff]") {
    SHARDPACK_NEED_SHARED_DATA();
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
    };
    for (const auto& [data, name] : cases) {
        INFO(name);
        const auto* p = reinterpret_cast<const std::uint8_t*>(data.data());
        CHECK_THROWS_AS(decode_image(p, data.size(), request(pixel_layout::rgb)), decode_error);
        CHECK_THROWS_WITH(decode_image(p, data.size(), request(pixel_layout::rgb)),
                          "unsupported image format " + name + " (only PNG, JPEG and TIFF are supported)");
        std::uint32_t w = 0, h = 0;
        CHECK_THROWS_WITH(read_image_size(p, data.size(), w, h), Catch::Contains(name));
    }
    // TIFF is read (test_depth.cpp): a header with no directory is refused by libtiff, named.
    for (const std::string tiff : {std::string("II*\0\x08\0\0\0", 8), std::string("MM\0*\0\0\0\x08", 8)}) {
        const auto* p = reinterpret_cast<const std::uint8_t*>(tiff.data());
        CHECK_THROWS_AS(decode_image(p, tiff.size(), request(pixel_layout::rgb)), decode_error);
        CHECK_THROWS_WITH(decode_image(p, tiff.size(), request(pixel_layout::rgb)), Catch::StartsWith("TIFF: "));
    }
    const std::string html = "<html><body>404</body></html>";
    CHECK_THROWS_WITH(decode_image(reinterpret_cast<const std::uint8_t*>(html.data()), html.size(), request(pixel_layout::rgb)),
                      Catch::Contains("unrecognised image data (starts with 3C 68 74 6D 6C 3E 3C 62"));
    CHECK_THROWS_WITH(decode_image(nullptr, 0, request(pixel_layout::rgb)), Catch::Contains("empty file"));
    const std::uint8_t one = 0x89;
    CHECK_THROWS_AS(decode_image(&one, 1, request(pixel_layout::rgb)), decode_error);
}

// =============================================================================================

TEST_CASE("truncated files always throw decode_error", "[robust]") {
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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
    bad.width = 2, bad.height = 2, bad.channels = 5, bad.pixels.resize(20);  // PNG holds 1 to 4 channels
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
    SHARDPACK_NEED_SHARED_DATA();
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
