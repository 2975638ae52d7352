// The PNG decoder (libpng) and its libdeflate fast path: every PngSuite file, corrupt ones
// refused, pixels against an independent raw-sample reference and values computed by hand,
// 16-bit and ICC files, max_rows, size limits; the fast path against libpng.
#include <catch2/catch.hpp>

#include <zlib.h>

#include "decode_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

TEST_CASE("every corrupt PngSuite file (x*.png) is refused", "[png]") {
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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
    SHARDPACK_NEED_SHARED_DATA();
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

TEST_CASE("the libdeflate fast path gives libpng's pixels, and takes the common PNGs", "[png][fast]") {
    SHARDPACK_NEED_SHARED_DATA();
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
