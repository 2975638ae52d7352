// Geometry planning, resampling and color-mask → label mapping.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "errors.hpp"
#include "transform/geometry.hpp"
#include "transform/label_map.hpp"
#include "test_support.hpp"

using shardpack::test::random_image;

using namespace shardpack;

namespace {

image_u8 constant_image(std::uint32_t w, std::uint32_t h, std::uint32_t c, std::uint8_t v) {
    image_u8 img;
    img.width = w;
    img.height = h;
    img.channels = c;
    img.pixels.assign(std::size_t(w) * h * c, v);
    return img;
}

geometry_options opts(std::uint32_t w, std::uint32_t h, resize_mode r, crop_mode c,
                      resample_filter f = resample_filter::area) {
    geometry_options o;
    o.width = w;
    o.height = h;
    o.resize = r;
    o.crop = c;
    o.filter = f;
    return o;
}

void check_axis(const axis_plan& a, std::uint32_t src, std::uint32_t scaled, std::uint32_t crop, std::uint32_t pad,
                std::uint32_t content, std::uint32_t out) {
    INFO("src " << a.src_len << " scaled " << a.scaled_len << " crop " << a.crop_offset << " pad " << a.pad_before
                << " content " << a.content_len << " out " << a.out_len);
    CHECK(a.src_len == src);
    CHECK(a.scaled_len == scaled);
    CHECK(a.crop_offset == crop);
    CHECK(a.pad_before == pad);
    CHECK(a.content_len == content);
    CHECK(a.out_len == out);
}

image_u8 truncated(const image_u8& img, std::uint32_t rows) {
    image_u8 t = img;
    t.height = rows;
    t.pixels.resize(std::size_t(rows) * img.row_bytes());
    return t;
}

const resize_mode all_resize[] = {resize_mode::none, resize_mode::stretch, resize_mode::shorter, resize_mode::fit};
const crop_mode all_crop[] = {crop_mode::center, crop_mode::topleft, crop_mode::none};
const resample_filter all_filters[] = {resample_filter::area, resample_filter::bilinear, resample_filter::lanczos};

}  // namespace

// ---------------------------------------------------------------------------------------------
// Planning

TEST_CASE("plan: resize none crops or pads like tf.image.resize_with_crop_or_pad", "[transform][plan]") {
    // src 5 -> dst 2: crop offset (5-2)//2 = 1; src 2 -> dst 5: pad (5-2)//2 = 1.
    auto p = plan_geometry(5, 2, opts(2, 5, resize_mode::none, crop_mode::center));
    check_axis(p.x, 5, 5, 1, 0, 2, 2);
    check_axis(p.y, 2, 2, 0, 1, 2, 5);
    CHECK(p.identity());
    CHECK(p.out_width() == 2);
    CHECK(p.out_height() == 5);
    // odd/even combinations
    p = plan_geometry(6, 3, opts(3, 6, resize_mode::none, crop_mode::center));
    check_axis(p.x, 6, 6, 1, 0, 3, 3);  // (6-3)//2 = 1
    check_axis(p.y, 3, 3, 0, 1, 3, 6);  // (6-3)//2 = 1
    p = plan_geometry(7, 4, opts(4, 7, resize_mode::none, crop_mode::center));
    check_axis(p.x, 7, 7, 1, 0, 4, 4);  // (7-4)//2 = 1
    check_axis(p.y, 4, 4, 0, 1, 4, 7);  // (7-4)//2 = 1
    p = plan_geometry(8, 10, opts(3, 10, resize_mode::none, crop_mode::center));
    check_axis(p.x, 8, 8, 2, 0, 3, 3);  // (8-3)//2 = 2
    check_axis(p.y, 10, 10, 0, 0, 10, 10);
    p = plan_geometry(9, 1, opts(9, 8, resize_mode::none, crop_mode::center));
    check_axis(p.y, 1, 1, 0, 3, 1, 8);  // (8-1)//2 = 3
    // topleft: offset 0 both ways (crop from top-left, pad bottom-right)
    p = plan_geometry(5, 2, opts(2, 5, resize_mode::none, crop_mode::topleft));
    check_axis(p.x, 5, 5, 0, 0, 2, 2);
    check_axis(p.y, 2, 2, 0, 0, 2, 5);
    // crop none with resize none: the source unchanged, size unused
    p = plan_geometry(5, 2, opts(2, 5, resize_mode::none, crop_mode::none));
    check_axis(p.x, 5, 5, 0, 0, 5, 5);
    check_axis(p.y, 2, 2, 0, 0, 2, 2);
}

TEST_CASE("plan: no size gives the source", "[transform][plan]") {
    for (const auto c : all_crop) {
        const auto p = plan_geometry(13, 7, opts(0, 0, resize_mode::none, c));
        check_axis(p.x, 13, 13, 0, 0, 13, 13);
        check_axis(p.y, 7, 7, 0, 0, 7, 7);
        CHECK(p.identity());
    }
}

TEST_CASE("plan: stretch scales each axis to the target", "[transform][plan]") {
    for (const auto c : all_crop) {
        const auto p = plan_geometry(640, 480, opts(300, 201, resize_mode::stretch, c));
        check_axis(p.x, 640, 300, 0, 0, 300, 300);
        check_axis(p.y, 480, 201, 0, 0, 201, 201);
        CHECK_FALSE(p.identity());
    }
    // one axis unchanged
    const auto p = plan_geometry(64, 48, opts(64, 20, resize_mode::stretch, crop_mode::center));
    CHECK(p.x.copy());
    CHECK_FALSE(p.y.copy());
}

TEST_CASE("plan: shorter covers the target, then crops", "[transform][plan]") {
    // 1920x1080 -> 512: s = 512/1080, width round(910.2) = 910, crop (910-512)//2 = 199
    auto p = plan_geometry(1920, 1080, opts(512, 512, resize_mode::shorter, crop_mode::center));
    check_axis(p.x, 1920, 910, 199, 0, 512, 512);
    check_axis(p.y, 1080, 512, 0, 0, 512, 512);
    p = plan_geometry(1920, 1080, opts(512, 512, resize_mode::shorter, crop_mode::topleft));
    check_axis(p.x, 1920, 910, 0, 0, 512, 512);
    check_axis(p.y, 1080, 512, 0, 0, 512, 512);
    p = plan_geometry(1920, 1080, opts(512, 512, resize_mode::shorter, crop_mode::none));
    check_axis(p.x, 1920, 910, 0, 0, 910, 910);
    check_axis(p.y, 1080, 512, 0, 0, 512, 512);
    // 500x375 -> 224: width round(298.67) = 299, crop (299-224)//2 = 37
    p = plan_geometry(500, 375, opts(224, 224, resize_mode::shorter, crop_mode::center));
    check_axis(p.x, 500, 299, 37, 0, 224, 224);
    check_axis(p.y, 375, 224, 0, 0, 224, 224);
    p = plan_geometry(375, 500, opts(224, 224, resize_mode::shorter, crop_mode::center));
    check_axis(p.x, 375, 224, 0, 0, 224, 224);
    check_axis(p.y, 500, 299, 37, 0, 224, 224);
    // 5x3 -> 4x4: s = 4/3, width round(6.67) = 7, crop (7-4)//2 = 1
    p = plan_geometry(5, 3, opts(4, 4, resize_mode::shorter, crop_mode::center));
    check_axis(p.x, 5, 7, 1, 0, 4, 4);
    check_axis(p.y, 3, 4, 0, 0, 4, 4);
    // 3x2 -> 3x3: s = 1.5, width round(4.5) = 5 (half up), crop 1
    p = plan_geometry(3, 2, opts(3, 3, resize_mode::shorter, crop_mode::center));
    check_axis(p.x, 3, 5, 1, 0, 3, 3);
    check_axis(p.y, 2, 3, 0, 0, 3, 3);
    // non-square target: 100x100 -> 40x10: s = max(0.4, 0.1) = 0.4 -> 40x40, crop y (40-10)//2 = 15
    p = plan_geometry(100, 100, opts(40, 10, resize_mode::shorter, crop_mode::center));
    check_axis(p.x, 100, 40, 0, 0, 40, 40);
    check_axis(p.y, 100, 40, 15, 0, 10, 10);
}

TEST_CASE("plan: fit fits inside the target, then pads", "[transform][plan]") {
    // 1920x1080 -> 512: s = 512/1920, height 288, pad (512-288)//2 = 112
    auto p = plan_geometry(1920, 1080, opts(512, 512, resize_mode::fit, crop_mode::center));
    check_axis(p.x, 1920, 512, 0, 0, 512, 512);
    check_axis(p.y, 1080, 288, 0, 112, 288, 512);
    for (const auto c : {crop_mode::topleft, crop_mode::none}) {
        p = plan_geometry(1920, 1080, opts(512, 512, resize_mode::fit, c));
        check_axis(p.y, 1080, 288, 0, 0, 288, 512);
    }
    // 5x3 -> 4x4: s = 0.8, height round(2.4) = 2, pad (4-2)//2 = 1
    p = plan_geometry(5, 3, opts(4, 4, resize_mode::fit, crop_mode::center));
    check_axis(p.x, 5, 4, 0, 0, 4, 4);
    check_axis(p.y, 3, 2, 0, 1, 2, 4);
    p = plan_geometry(3, 5, opts(4, 4, resize_mode::fit, crop_mode::center));
    check_axis(p.x, 3, 2, 0, 1, 2, 4);
    check_axis(p.y, 5, 4, 0, 0, 4, 4);
    // upscaling fit: 3x2 -> 7x7: s = 7/3, height round(4.67) = 5, pad (7-5)//2 = 1
    p = plan_geometry(3, 2, opts(7, 7, resize_mode::fit, crop_mode::center));
    check_axis(p.x, 3, 7, 0, 0, 7, 7);
    check_axis(p.y, 2, 5, 0, 1, 5, 7);
    // a sliver keeps at least one pixel
    p = plan_geometry(100, 1, opts(10, 10, resize_mode::fit, crop_mode::center));
    check_axis(p.y, 1, 1, 0, 4, 1, 10);
}

TEST_CASE("plan: option and size errors", "[transform][plan]") {
    CHECK_THROWS_AS(plan_geometry(0, 10, opts(4, 4, resize_mode::stretch, crop_mode::center)), input_error);
    CHECK_THROWS_AS(plan_geometry(10, 0, opts(0, 0, resize_mode::none, crop_mode::center)), input_error);
    CHECK_THROWS_AS(plan_geometry(10, 10, opts(4, 0, resize_mode::stretch, crop_mode::center)), usage_error);
    CHECK_THROWS_AS(plan_geometry(10, 10, opts(0, 4, resize_mode::none, crop_mode::center)), usage_error);
    CHECK_THROWS_AS(plan_geometry(10, 10, opts(0, 0, resize_mode::shorter, crop_mode::center)), usage_error);
    CHECK_THROWS_AS(plan_geometry(10, 10, opts(0, 0, resize_mode::fit, crop_mode::center)), usage_error);
    // the filter travels with the plan (for src_rows_needed)
    const auto p = plan_geometry(10, 10, opts(4, 4, resize_mode::stretch, crop_mode::center, resample_filter::bilinear));
    CHECK(p.y.filter == resample_filter::bilinear);
}

// ---------------------------------------------------------------------------------------------
// Images

TEST_CASE("crop without resize is a bit-exact slice and padding is 0", "[transform][image]") {
    for (const std::uint32_t c : {1u, 3u, 4u}) {
        const image_u8 src = random_image(7, 5, c, 11 + c);
        // crop x (7 -> 4, offset 1), pad y (5 -> 8, pad 1)
        const auto plan = plan_geometry(7, 5, opts(4, 8, resize_mode::none, crop_mode::center));
        for (const auto f : all_filters) {
            const image_u8 out = apply_geometry(src, plan, f);
            REQUIRE(out.width == 4);
            REQUIRE(out.height == 8);
            REQUIRE(out.channels == c);
            for (std::uint32_t y = 0; y < 8; ++y)
                for (std::uint32_t x = 0; x < 4; ++x)
                    for (std::uint32_t k = 0; k < c; ++k) {
                        const std::uint8_t got = out.pixels[(std::size_t(y) * 4 + x) * c + k];
                        if (y < 1 || y >= 6)
                            REQUIRE(got == 0);
                        else
                            REQUIRE(got == src.pixels[(std::size_t(y - 1) * 7 + x + 1) * c + k]);
                    }
        }
    }
    // topleft: crop from the top-left, pad at the bottom-right
    const image_u8 src = random_image(6, 3, 3, 5);
    const image_u8 out = apply_geometry(src, plan_geometry(6, 3, opts(4, 5, resize_mode::none, crop_mode::topleft)),
                                        resample_filter::area);
    for (std::uint32_t y = 0; y < 5; ++y)
        for (std::uint32_t x = 0; x < 4; ++x)
            for (std::uint32_t k = 0; k < 3; ++k) {
                const std::uint8_t got = out.pixels[(std::size_t(y) * 4 + x) * 3 + k];
                REQUIRE(got == (y < 3 ? src.pixels[(std::size_t(y) * 6 + x) * 3 + k] : 0));
            }
}

TEST_CASE("identity plans return the source unchanged", "[transform][image]") {
    const image_u8 src = random_image(33, 17, 3, 3);
    for (const auto& o : {opts(0, 0, resize_mode::none, crop_mode::center), opts(8, 8, resize_mode::none, crop_mode::none),
                          opts(33, 17, resize_mode::stretch, crop_mode::center),
                          opts(33, 17, resize_mode::none, crop_mode::center)}) {
        const auto plan = plan_geometry(33, 17, o);
        REQUIRE(plan.identity());
        for (const auto f : all_filters) {
            const image_u8 out = apply_geometry(src, plan, f);
            CHECK(out.width == 33);
            CHECK(out.height == 17);
            CHECK(out.channels == 3);
            CHECK(out.pixels == src.pixels);
        }
    }
}

TEST_CASE("a constant image stays constant under every filter and scale", "[transform][image]") {
    for (const std::uint32_t c : {1u, 3u, 4u})
        for (const std::uint8_t v : {std::uint8_t(0), std::uint8_t(1), std::uint8_t(128), std::uint8_t(254), std::uint8_t(255)}) {
            const image_u8 src = constant_image(97, 61, c, v);
            for (const auto f : all_filters)
                for (const auto& o : {opts(31, 17, resize_mode::stretch, crop_mode::center),
                                      opts(300, 200, resize_mode::stretch, crop_mode::center),
                                      opts(300, 20, resize_mode::stretch, crop_mode::center),
                                      opts(97, 20, resize_mode::stretch, crop_mode::center),
                                      opts(20, 61, resize_mode::stretch, crop_mode::center),
                                      opts(64, 64, resize_mode::shorter, crop_mode::center),
                                      opts(3, 2, resize_mode::shorter, crop_mode::topleft)}) {
                    INFO("channels " << c << " value " << int(v) << " filter " << int(f) << " size " << o.width << "x"
                                     << o.height);
                    const image_u8 out = apply_geometry(src, plan_geometry(97, 61, o), f);
                    REQUIRE(out.pixels.size() == std::size_t(out.width) * out.height * c);
                    for (const auto p : out.pixels) REQUIRE(int(p) == int(v));
                }
        }
}

TEST_CASE("area downscale by exactly 2 is the rounded 2x2 box mean", "[transform][image]") {
    for (const std::uint32_t c : {1u, 3u, 4u}) {
        const image_u8 src = random_image(64, 38, c, 7 * c);
        const image_u8 out =
            apply_geometry(src, plan_geometry(64, 38, opts(32, 19, resize_mode::stretch, crop_mode::center)),
                           resample_filter::area);
        REQUIRE(out.width == 32);
        REQUIRE(out.height == 19);
        for (std::uint32_t y = 0; y < 19; ++y)
            for (std::uint32_t x = 0; x < 32; ++x)
                for (std::uint32_t k = 0; k < c; ++k) {
                    auto at = [&](std::uint32_t sx, std::uint32_t sy) {
                        return int(src.pixels[(std::size_t(sy) * 64 + sx) * c + k]);
                    };
                    const int sum = at(2 * x, 2 * y) + at(2 * x + 1, 2 * y) + at(2 * x, 2 * y + 1) + at(2 * x + 1, 2 * y + 1);
                    REQUIRE(int(out.pixels[(std::size_t(y) * 32 + x) * c + k]) == (sum + 2) / 4);
                }
    }
}

TEST_CASE("area 3 -> 2 uses pixel-area weights (2/3, 1/3)", "[transform][image]") {
    // OpenCV INTER_AREA: out0 = (2 p0 + p1) / 3, out1 = (p1 + 2 p2) / 3.
    image_u8 row;
    row.width = 3;
    row.height = 1;
    row.channels = 1;
    row.pixels = {30, 60, 240};
    image_u8 out = apply_geometry(row, plan_geometry(3, 1, opts(2, 1, resize_mode::stretch, crop_mode::center)),
                                  resample_filter::area);
    CHECK(out.pixels == std::vector<std::uint8_t>{40, 180});
    // the same vertically
    image_u8 col = row;
    col.width = 1;
    col.height = 3;
    out = apply_geometry(col, plan_geometry(1, 3, opts(1, 2, resize_mode::stretch, crop_mode::center)),
                         resample_filter::area);
    CHECK(out.pixels == std::vector<std::uint8_t>{40, 180});
    // both axes: weights are the outer product
    image_u8 sq;
    sq.width = 3;
    sq.height = 3;
    sq.channels = 1;
    sq.pixels = {0, 30, 60, 90, 120, 150, 180, 210, 240};
    out = apply_geometry(sq, plan_geometry(3, 3, opts(2, 2, resize_mode::stretch, crop_mode::center)),
                         resample_filter::area);
    CHECK(out.pixels == std::vector<std::uint8_t>{40, 80, 160, 200});
    // non-integer ratio 5 -> 3 (scale 5/3): out1 covers [5/3, 10/3): p1 * 1/3 + p2 * 1 + p3 * 1/3, / (5/3)
    row.width = 5;
    row.pixels = {0, 50, 100, 150, 200};
    out = apply_geometry(row, plan_geometry(5, 1, opts(3, 1, resize_mode::stretch, crop_mode::center)),
                         resample_filter::area);
    // out0 = (0 + 50 * 2/3) * 3/5 = 20, out1 = (50/3 + 100 + 150/3) * 3/5 = 100, out2 = (150 * 2/3 + 200) * 3/5 = 180
    CHECK(out.pixels == std::vector<std::uint8_t>{20, 100, 180});
}

TEST_CASE("bilinear 2 -> 4 upscale matches the triangle filter", "[transform][image]") {
    // Pillow-style centres (j + 0.5) / 2 - 0.5: weights (1), (3/4, 1/4), (1/4, 3/4), (1) at the clamped edges.
    image_u8 row;
    row.width = 2;
    row.height = 1;
    row.channels = 1;
    row.pixels = {40, 200};
    for (const auto f : {resample_filter::bilinear, resample_filter::area}) {  // area upscales bilinearly
        const image_u8 out = apply_geometry(row, plan_geometry(2, 1, opts(4, 1, resize_mode::stretch, crop_mode::center)), f);
        CHECK(out.pixels == std::vector<std::uint8_t>{40, 80, 160, 200});
    }
}

TEST_CASE("resampling computes only the cropped window, matching resize-then-crop", "[transform][image]") {
    // shorter + center crop must equal stretching to the scaled size and slicing the window.
    const image_u8 src = random_image(211, 97, 3, 21);
    for (const auto f : all_filters) {
        const auto plan = plan_geometry(211, 97, opts(40, 40, resize_mode::shorter, crop_mode::center, f));
        REQUIRE(plan.x.crop_offset > 0);
        const image_u8 cropped = apply_geometry(src, plan, f);
        const image_u8 full = apply_geometry(
            src, plan_geometry(211, 97, opts(plan.x.scaled_len, plan.y.scaled_len, resize_mode::stretch, crop_mode::center)),
            f);
        for (std::uint32_t y = 0; y < 40; ++y)
            REQUIRE(std::memcmp(cropped.row(y), full.row(y + plan.y.crop_offset) + plan.x.crop_offset * 3, 40 * 3) == 0);
    }
    // and fit + pad equals the stretched image placed in zeros
    const auto plan = plan_geometry(211, 97, opts(50, 50, resize_mode::fit, crop_mode::center));
    const image_u8 padded = apply_geometry(src, plan, resample_filter::lanczos);
    const image_u8 body = apply_geometry(
        src, plan_geometry(211, 97, opts(plan.x.scaled_len, plan.y.scaled_len, resize_mode::stretch, crop_mode::center)),
        resample_filter::lanczos);
    for (std::uint32_t y = 0; y < 50; ++y) {
        const bool inside = y >= plan.y.pad_before && y < plan.y.pad_before + plan.y.content_len;
        if (inside)
            REQUIRE(std::memcmp(padded.row(y), body.row(y - plan.y.pad_before), 50 * 3) == 0);
        else
            for (std::uint32_t i = 0; i < 150; ++i) REQUIRE(padded.row(y)[i] == 0);
    }
}

TEST_CASE("3- and 4-channel resampling equals each channel resampled alone, to the last pixel of every row", "[transform][image]") {
    // Images of 3 and 4 channels take the SIMD horizontal pass (4-byte stores but for a row's
    // last pixel); one channel takes the scalar one. Same integer sums, so the same bytes, at
    // every output width (odd and even, 1 pixel, down- and upscales) and filter. 0.1 s.
    for (const std::uint32_t channels : {3u, 4u}) {
        const image_u8 src = random_image(97, 53, channels, 40 + channels);
        std::vector<image_u8> planes(channels);
        for (std::uint32_t c = 0; c < channels; ++c) {
            planes[c] = constant_image(97, 53, 1, 0);
            for (std::size_t i = 0; i < std::size_t(97) * 53; ++i) planes[c].pixels[i] = src.pixels[i * channels + c];
        }
        for (const auto f : all_filters)
            for (const std::uint32_t width : {1u, 2u, 3u, 30u, 31u, 64u, 150u}) {
                INFO("channels " << channels << " filter " << int(f) << " width " << width);
                const auto plan = plan_geometry(97, 53, opts(width, 29, resize_mode::stretch, crop_mode::center, f));
                const image_u8 all = apply_geometry(src, plan, f);
                REQUIRE(all.pixels.size() == std::size_t(width) * 29 * channels);
                for (std::uint32_t c = 0; c < channels; ++c) {
                    const image_u8 one = apply_geometry(planes[c], plan, f);
                    for (std::size_t i = 0; i < one.pixels.size(); ++i)
                        if (all.pixels[i * channels + c] != one.pixels[i]) FAIL("pixel " << i << " channel " << c);
                }
            }
    }
}

TEST_CASE("lanczos keeps values in range and is close to area on smooth images", "[transform][image]") {
    image_u8 src;
    src.width = 120;
    src.height = 80;
    src.channels = 3;
    src.pixels.resize(120 * 80 * 3);
    for (std::uint32_t y = 0; y < 80; ++y)
        for (std::uint32_t x = 0; x < 120; ++x)
            for (std::uint32_t k = 0; k < 3; ++k)
                src.pixels[(std::size_t(y) * 120 + x) * 3 + k] =
                    static_cast<std::uint8_t>(127.5 + 127.5 * std::sin(0.05 * x + 0.07 * y + k));
    const auto plan = plan_geometry(120, 80, opts(50, 33, resize_mode::stretch, crop_mode::center));
    const image_u8 a = apply_geometry(src, plan, resample_filter::area);
    const image_u8 l = apply_geometry(src, plan, resample_filter::lanczos);
    const image_u8 b = apply_geometry(src, plan, resample_filter::bilinear);
    double mse_l = 0, mse_b = 0;
    for (std::size_t i = 0; i < a.pixels.size(); ++i) {
        mse_l += std::pow(double(a.pixels[i]) - l.pixels[i], 2);
        mse_b += std::pow(double(a.pixels[i]) - b.pixels[i], 2);
    }
    mse_l /= double(a.pixels.size());
    mse_b /= double(a.pixels.size());
    CHECK(mse_l < 4.0);
    CHECK(mse_b < 4.0);
    // a hard edge: lanczos rings but is clamped to 0..255, never wraps
    image_u8 edge = constant_image(40, 4, 1, 0);
    for (std::uint32_t y = 0; y < 4; ++y)
        for (std::uint32_t x = 20; x < 40; ++x) edge.pixels[y * 40 + x] = 255;
    const image_u8 up = apply_geometry(edge, plan_geometry(40, 4, opts(97, 9, resize_mode::stretch, crop_mode::center)),
                                       resample_filter::lanczos);
    for (std::uint32_t x = 0; x < 30; ++x) CHECK(up.pixels[x] == 0);    // far left stays black
    for (std::uint32_t x = 68; x < 97; ++x) CHECK(up.pixels[x] == 255);  // far right stays white
}

TEST_CASE("src_rows_needed: a truncated source gives identical output", "[transform][image][rows]") {
    const image_u8 src = random_image(157, 233, 3, 99);
    int early = 0;
    for (const auto r : all_resize)
        for (const auto c : all_crop)
            for (const auto f : all_filters)
                for (const auto& size : {std::pair<std::uint32_t, std::uint32_t>{64, 48}, {48, 64}, {200, 90},
                                         {157, 100}, {300, 500}, {20, 20}}) {
                    const auto o = opts(size.first, size.second, r, c, f);
                    const auto plan = plan_geometry(157, 233, o);
                    const std::uint32_t need = plan.y.src_rows_needed();
                    INFO("resize " << int(r) << " crop " << int(c) << " filter " << int(f) << " size " << size.first
                                   << "x" << size.second << " need " << need);
                    REQUIRE(need >= 1);
                    REQUIRE(need <= 233);
                    if (need < 233) ++early;
                    const image_u8 full = apply_geometry(src, plan, f);
                    const image_u8 part = apply_geometry(truncated(src, need), plan, f);
                    REQUIRE(part.width == full.width);
                    REQUIRE(part.height == full.height);
                    REQUIRE(part.pixels == full.pixels);
                    // the bound is tight: one row fewer is refused
                    if (need > 1) {
                        CHECK_THROWS_AS(apply_geometry(truncated(src, need - 1), plan, f), input_error);
                    }
                }
    CHECK(early > 10);  // cropping from the top saves rows in many modes
    // a concrete case: a tall image, shorter + topleft crop reads only the top
    const auto plan = plan_geometry(100, 1000, opts(50, 50, resize_mode::shorter, crop_mode::topleft, resample_filter::area));
    CHECK(plan.y.src_rows_needed() == 100);  // scale 2: 50 output rows cover source rows 0..99
    const auto center = plan_geometry(100, 1000, opts(50, 50, resize_mode::shorter, crop_mode::center, resample_filter::area));
    CHECK(center.y.src_rows_needed() == 550);  // scaled 500, crop 225..274 -> source rows up to 549
}

TEST_CASE("scratch reuse across plans gives the same bytes", "[transform][image]") {
    const image_u8 a = random_image(320, 240, 3, 1), b = random_image(100, 150, 4, 2);
    const auto pa = plan_geometry(320, 240, opts(128, 128, resize_mode::shorter, crop_mode::center));
    const auto pb = plan_geometry(100, 150, opts(64, 64, resize_mode::fit, crop_mode::center));
    resample_scratch scratch;
    image_u8 out;
    apply_geometry(a, pa, resample_filter::area, out, scratch);
    const auto* data = out.pixels.data();
    const std::vector<std::uint8_t> first = out.pixels;
    apply_geometry(a, pa, resample_filter::area, out, scratch);
    CHECK(out.pixels == first);
    CHECK(out.pixels.data() == data);  // the buffer is reused
    apply_geometry(b, pb, resample_filter::bilinear, out, scratch);
    CHECK(out.pixels == apply_geometry(b, pb, resample_filter::bilinear).pixels);
    apply_geometry(a, pa, resample_filter::lanczos, out, scratch);
    CHECK(out.pixels == apply_geometry(a, pa, resample_filter::lanczos).pixels);
    apply_geometry(a, pa, resample_filter::area, out, scratch);
    CHECK(out.pixels == first);
}

TEST_CASE("resampling coefficients sum to exactly one in fixed point", "[transform][image]") {
    const image_u8 src = random_image(1000, 700, 3, 4);
    for (const auto f : all_filters)
        for (const auto& o : {opts(97, 31, resize_mode::stretch, crop_mode::center), opts(13, 7, resize_mode::stretch, crop_mode::center),
                              opts(2000, 1500, resize_mode::fit, crop_mode::center),
                              opts(333, 333, resize_mode::shorter, crop_mode::center)}) {
            resample_scratch scratch;
            image_u8 out;
            apply_geometry(src, plan_geometry(1000, 700, o), f, out, scratch);
            for (const resample_axis_table* t : {&scratch.x, &scratch.y}) {
                REQUIRE(t->valid);
                for (std::uint32_t j = 0; j < t->plan.content_len; ++j) {
                    int sum = 0;
                    for (std::uint32_t k = 0; k < t->taps; ++k) sum += t->coeffs[std::size_t(j) * t->taps + k];
                    REQUIRE(sum == 1 << 14);
                }
            }
        }
}

TEST_CASE("apply_geometry refuses a source that does not fit the plan", "[transform][image]") {
    const image_u8 src = random_image(50, 40, 3, 1);
    const auto plan = plan_geometry(60, 40, opts(20, 20, resize_mode::stretch, crop_mode::center));
    CHECK_THROWS_AS(apply_geometry(src, plan, resample_filter::area), input_error);
}

// ---------------------------------------------------------------------------------------------
// Masks

namespace {

const std::vector<label_color> palette = {{0, 0, 0}, {128, 0, 0}, {0, 128, 0}, {128, 128, 0}, {0, 0, 128}, {255, 255, 255}};

image_u8 palette_mask(std::uint32_t w, std::uint32_t h, std::uint32_t block, std::uint32_t seed,
                      std::vector<std::uint16_t>* ids = nullptr) {
    image_u8 m;
    m.width = w;
    m.height = h;
    m.channels = 3;
    m.pixels.resize(std::size_t(w) * h * 3);
    std::mt19937 rng(seed);
    const std::uint32_t bw = (w + block - 1) / block, bh = (h + block - 1) / block;
    std::vector<std::uint16_t> blocks(std::size_t(bw) * bh);
    for (auto& b : blocks) b = static_cast<std::uint16_t>(rng() % palette.size());
    if (ids) ids->resize(std::size_t(w) * h);
    for (std::uint32_t y = 0; y < h; ++y)
        for (std::uint32_t x = 0; x < w; ++x) {
            const std::uint16_t id = blocks[(y / block) * bw + x / block];
            std::uint8_t* p = m.pixels.data() + (std::size_t(y) * w + x) * 3;
            p[0] = palette[id].r;
            p[1] = palette[id].g;
            p[2] = palette[id].b;
            if (ids) (*ids)[std::size_t(y) * w + x] = id;
        }
    return m;
}

}  // namespace

TEST_CASE("color_lookup: exact colors to ids", "[transform][mask]") {
    const color_lookup lookup(palette);
    CHECK(lookup.size() == palette.size());
    for (std::size_t i = 0; i < palette.size(); ++i) CHECK(lookup.find(palette[i].r, palette[i].g, palette[i].b) == int(i));
    CHECK(lookup.find(1, 0, 0) == -1);
    CHECK(lookup.find(128, 0, 1) == -1);
    CHECK(lookup.find(255, 255, 254) == -1);
    // many classes
    std::vector<label_color> many;
    for (int i = 0; i < 3000; ++i)
        many.push_back({static_cast<std::uint8_t>(i * 7), static_cast<std::uint8_t>(i >> 3), static_cast<std::uint8_t>(i % 13)});
    const color_lookup big(many);
    for (int i = 0; i < 3000; ++i) REQUIRE(big.find(many[std::size_t(i)].r, many[std::size_t(i)].g, many[std::size_t(i)].b) == i);
    CHECK(big.find(1, 2, 200) == -1);
    // a color listed twice is ambiguous
    CHECK_THROWS_AS(color_lookup(std::vector<label_color>{{1, 2, 3}, {4, 5, 6}, {1, 2, 3}}), input_error);
    const color_lookup empty(std::vector<label_color>{});
    CHECK(empty.size() == 0);
    CHECK(empty.find(0, 0, 0) == -1);
}

TEST_CASE("map_mask: nearest resize yields only dictionary ids at the nearest source pixel", "[transform][mask]") {
    std::vector<std::uint16_t> src_ids;
    const image_u8 mask = palette_mask(97, 61, 5, 3, &src_ids);
    const color_lookup lookup(palette);
    for (const auto r : all_resize)
        for (const auto c : all_crop) {
            const auto plan = plan_geometry(97, 61, opts(32, 45, r, c));
            label_plane labels;
            std::uint64_t unknown = 99;
            map_mask(mask, plan, lookup, unknown_color_policy::error, 255, labels, nullptr, &unknown);
            CHECK(unknown == 0);
            REQUIRE(labels.width == plan.out_width());
            REQUIRE(labels.height == plan.out_height());
            for (std::uint32_t y = 0; y < labels.height; ++y)
                for (std::uint32_t x = 0; x < labels.width; ++x) {
                    const std::uint16_t id = labels.ids[std::size_t(y) * labels.width + x];
                    const bool in_x = x >= plan.x.pad_before && x < plan.x.pad_before + plan.x.content_len;
                    const bool in_y = y >= plan.y.pad_before && y < plan.y.pad_before + plan.y.content_len;
                    if (!in_x || !in_y) {
                        REQUIRE(id == 255);
                        continue;
                    }
                    REQUIRE(id < palette.size());
                    // floor((c + 0.5) * src / scaled)
                    const double cx = x - plan.x.pad_before + plan.x.crop_offset;
                    const double cy = y - plan.y.pad_before + plan.y.crop_offset;
                    const auto sx = std::min<std::uint32_t>(96, static_cast<std::uint32_t>((cx + 0.5) * 97 / plan.x.scaled_len));
                    const auto sy = std::min<std::uint32_t>(60, static_cast<std::uint32_t>((cy + 0.5) * 61 / plan.y.scaled_len));
                    REQUIRE(id == src_ids[std::size_t(sy) * 97 + sx]);
                }
        }
}

TEST_CASE("map_mask: a mask of the image's own colors lands on the same box", "[transform][mask]") {
    // Large constant blocks: inside a block the resampled image keeps the block's color, so the
    // image pixel and the label must agree wherever the pixel is away from block edges.
    const std::uint32_t block = 16;
    const image_u8 img = palette_mask(160, 112, block, 8);
    const color_lookup lookup(palette);
    for (const auto& o : {opts(40, 40, resize_mode::shorter, crop_mode::center), opts(40, 40, resize_mode::shorter, crop_mode::topleft),
                          opts(64, 64, resize_mode::fit, crop_mode::center), opts(100, 50, resize_mode::none, crop_mode::center),
                          opts(300, 300, resize_mode::shorter, crop_mode::center), opts(70, 30, resize_mode::stretch, crop_mode::none)}) {
        const auto plan = plan_geometry(160, 112, o);
        const image_u8 out = apply_geometry(img, plan, resample_filter::area);
        label_plane labels;
        map_mask(img, plan, lookup, unknown_color_policy::error, 255, labels, nullptr, nullptr);
        REQUIRE(labels.width == out.width);
        REQUIRE(labels.height == out.height);
        int compared = 0;
        for (std::uint32_t y = 0; y < out.height; ++y)
            for (std::uint32_t x = 0; x < out.width; ++x) {
                const std::uint16_t id = labels.ids[std::size_t(y) * out.width + x];
                const std::uint8_t* p = out.row(y) + x * 3;
                const bool in_x = x >= plan.x.pad_before && x < plan.x.pad_before + plan.x.content_len;
                const bool in_y = y >= plan.y.pad_before && y < plan.y.pad_before + plan.y.content_len;
                if (!in_x || !in_y) {
                    REQUIRE(id == 255);
                    REQUIRE((p[0] | p[1] | p[2]) == 0);
                    continue;
                }
                // the source position of this pixel's centre, and its distance to a block edge
                const double sx = (x - plan.x.pad_before + plan.x.crop_offset + 0.5) * 160.0 / plan.x.scaled_len;
                const double sy = (y - plan.y.pad_before + plan.y.crop_offset + 0.5) * 112.0 / plan.y.scaled_len;
                const double margin = 2.0 + std::max(160.0 / plan.x.scaled_len, 112.0 / plan.y.scaled_len);
                auto far = [&](double s) {
                    const double m = std::fmod(s, double(block));
                    return m > margin && block - m > margin;
                };
                if (!far(sx) || !far(sy)) continue;
                ++compared;
                REQUIRE(id < palette.size());
                REQUIRE(p[0] == palette[id].r);
                REQUIRE(p[1] == palette[id].g);
                REQUIRE(p[2] == palette[id].b);
            }
        CHECK(compared > 50);
    }
}

TEST_CASE("map_mask: unknown colors", "[transform][mask]") {
    image_u8 mask = palette_mask(8, 6, 8, 1);
    std::uint8_t* p = mask.row(3) + 5 * 3;  // pixel (5,3)
    p[0] = 1;
    p[1] = 2;
    p[2] = 3;
    const color_lookup lookup(palette);
    label_plane labels;
    const auto crop = plan_geometry(8, 6, opts(0, 0, resize_mode::none, crop_mode::center));
    try {
        map_mask(mask, crop, lookup, unknown_color_policy::error, 255, labels, nullptr, nullptr);
        FAIL("no error");
    } catch (const input_error& e) {
        const std::string what = e.what();
        CHECK(what.find("unknown color (1,2,3) at pixel (5,3)") != std::string::npos);
        CHECK(what.find("not in the class dictionary") != std::string::npos);
    }
    // with a resize the position is still in source coordinates
    const auto up = plan_geometry(8, 6, opts(16, 12, resize_mode::stretch, crop_mode::center));
    CHECK_THROWS_WITH(map_mask(mask, up, lookup, unknown_color_policy::error, 255, labels, nullptr, nullptr),
                      Catch::Contains("unknown color (1,2,3) at pixel (5,3)"));
    // ignore: counted (per output pixel), first hit reported, ignore value written
    unknown_color_hit hit;
    std::uint64_t count = 0;
    map_mask(mask, up, lookup, unknown_color_policy::ignore, 255, labels, &hit, &count);
    CHECK(count == 4);  // 2x upscale: 2x2 output pixels show it
    CHECK(hit.count == 4);
    CHECK(int(hit.r) == 1);
    CHECK(int(hit.g) == 2);
    CHECK(int(hit.b) == 3);
    CHECK(hit.x == 5);
    CHECK(hit.y == 3);
    int ignored = 0;
    for (std::uint32_t y = 0; y < 12; ++y)
        for (std::uint32_t x = 0; x < 16; ++x) {
            const std::uint16_t id = labels.ids[std::size_t(y) * 16 + x];
            if (x / 2 == 5 && y / 2 == 3) {
                CHECK(id == 255);
                ++ignored;
            } else {
                CHECK(id < palette.size());
            }
        }
    CHECK(ignored == 4);
    // a second unknown color elsewhere: the first hit stays the first in output order
    mask.row(5)[0] = 9;
    map_mask(mask, up, lookup, unknown_color_policy::ignore, 65535, labels, &hit, &count);
    CHECK(count == 8);
    CHECK(hit.x == 5);
    CHECK(hit.y == 3);
    // cropped away: not seen, not counted
    const auto topleft = plan_geometry(8, 6, opts(4, 3, resize_mode::none, crop_mode::topleft));
    map_mask(mask, topleft, lookup, unknown_color_policy::error, 255, labels, &hit, &count);
    CHECK(count == 0);
    CHECK(hit.count == 0);
}

TEST_CASE("map_mask: gray and RGBA masks", "[transform][mask]") {
    const std::vector<label_color> grays = {{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {200, 200, 200}};
    const color_lookup lookup(grays);
    image_u8 gray;
    gray.width = 4;
    gray.height = 2;
    gray.channels = 1;
    gray.pixels = {0, 1, 2, 200, 200, 2, 1, 0};
    label_plane labels;
    const auto plan = plan_geometry(4, 2, opts(0, 0, resize_mode::none, crop_mode::center));
    map_mask(gray, plan, lookup, unknown_color_policy::error, 255, labels, nullptr, nullptr);
    CHECK(labels.ids == std::vector<std::uint16_t>{0, 1, 2, 3, 3, 2, 1, 0});
    gray.pixels[1] = 7;
    CHECK_THROWS_WITH(map_mask(gray, plan, lookup, unknown_color_policy::error, 255, labels, nullptr, nullptr),
                      Catch::Contains("unknown color (7,7,7) at pixel (1,0)"));

    const color_lookup rgb(palette);
    image_u8 rgba;
    rgba.width = 3;
    rgba.height = 1;
    rgba.channels = 4;
    rgba.pixels = {128, 0, 0, 255, 0, 0, 128, 0, 255, 255, 255, 17};  // alpha ignored
    map_mask(rgba, plan_geometry(3, 1, opts(0, 0, resize_mode::none, crop_mode::center)), rgb,
             unknown_color_policy::error, 255, labels, nullptr, nullptr);
    CHECK(labels.ids == std::vector<std::uint16_t>{1, 4, 5});
    image_u8 two;
    two.width = 2;
    two.height = 1;
    two.channels = 2;
    two.pixels = {0, 0, 0, 0};
    CHECK_THROWS_AS(map_mask(two, plan_geometry(2, 1, opts(0, 0, resize_mode::none, crop_mode::center)), rgb,
                             unknown_color_policy::error, 255, labels, nullptr, nullptr),
                    input_error);
}

TEST_CASE("map_mask: rows beyond src_rows_needed are not read", "[transform][mask][rows]") {
    const image_u8 mask = palette_mask(80, 300, 7, 4);
    const color_lookup lookup(palette);
    for (const auto c : {crop_mode::topleft, crop_mode::center})
        for (const auto f : all_filters) {
            const auto plan = plan_geometry(80, 300, opts(40, 40, resize_mode::shorter, c, f));
            const std::uint32_t need = plan.y.src_rows_needed();
            REQUIRE(need < 300);
            label_plane full, part;
            map_mask(mask, plan, lookup, unknown_color_policy::error, 255, full, nullptr, nullptr);
            map_mask(truncated(mask, need), plan, lookup, unknown_color_policy::error, 255, part, nullptr, nullptr);
            CHECK(part.ids == full.ids);
        }
}

TEST_CASE("expand_one_hot and count_classes", "[transform][mask]") {
    const std::vector<std::uint16_t> ids = {0, 2, 255, 1, 2};
    std::vector<std::uint8_t> hot(ids.size() * 3, 0xAA);
    expand_one_hot(ids.data(), ids.size(), 3, hot.data());
    CHECK(hot == std::vector<std::uint8_t>{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1});
    // any id >= classes is "no class": all zeros, nothing written outside the pixel
    const std::vector<std::uint16_t> odd = {3, 2, 4, 0};
    std::vector<std::uint8_t> hot3(odd.size() * 3, 0xAA);
    expand_one_hot(odd.data(), odd.size(), 3, hot3.data());
    CHECK(hot3 == std::vector<std::uint8_t>{0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0});
    // 16-bit ids and the 65535 ignore value
    const std::vector<std::uint16_t> wide = {299, 65535, 0};
    std::vector<std::uint8_t> hot2(3 * 300, 0xAA);
    expand_one_hot(wide.data(), wide.size(), 300, hot2.data());
    for (std::size_t i = 0; i < hot2.size(); ++i) CHECK(hot2[i] == ((i == 299 || i == 600) ? 1 : 0));

    label_plane plane;
    plane.width = 5;
    plane.height = 1;
    plane.ids = ids;
    std::vector<std::uint64_t> counts(3, 0);
    count_classes(plane, counts);
    CHECK(counts == std::vector<std::uint64_t>{1, 1, 2});
    count_classes(plane, counts);  // accumulates
    CHECK(counts == std::vector<std::uint64_t>{2, 2, 4});
}
