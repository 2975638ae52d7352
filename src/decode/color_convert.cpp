#include "decode/color_convert.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace shardpack {

namespace {

// x / 255 rounded to nearest for x in [0, 255*255]; exact, no division.
inline std::uint8_t div255(std::uint32_t x) {
    x += 128;
    return static_cast<std::uint8_t>((x + (x >> 8)) >> 8);
}

inline std::uint8_t luma(std::uint32_t r, std::uint32_t g, std::uint32_t b) {
    return static_cast<std::uint8_t>((r * 19595u + g * 38470u + b * 7471u + 0x8000u) >> 16);
}

}  // namespace

void rgb_to_gray_pil(const std::uint8_t* rgb, std::uint8_t* gray, std::size_t pixels) {
    for (std::size_t i = 0; i < pixels; ++i, rgb += 3) gray[i] = luma(rgb[0], rgb[1], rgb[2]);
}

void rgb16_to_gray_pil(const std::uint16_t* rgb, std::uint16_t* gray, std::size_t pixels) {
    for (std::size_t i = 0; i < pixels; ++i, rgb += 3)
        gray[i] = static_cast<std::uint16_t>((std::uint64_t(rgb[0]) * 19595u + std::uint64_t(rgb[1]) * 38470u +
                                              std::uint64_t(rgb[2]) * 7471u + 0x8000u) >> 16);
}

void convert_depth(image_u8& img, std::uint32_t sample_bytes) {
    if (img.sample_bytes == sample_bytes) return;
    const std::size_t n = std::size_t(img.width) * img.height * img.channels;
    if (sample_bytes == 2) {
        img.pixels.resize(2 * n);
        std::uint16_t* v = img.samples16();
        for (std::size_t i = n; i-- > 0;) v[i] = static_cast<std::uint16_t>(img.pixels[i] * 257u);  // back to front: in place
    } else {
        const std::uint16_t* v = img.samples16();
        for (std::size_t i = 0; i < n; ++i) img.pixels[i] = static_cast<std::uint8_t>(v[i] >> 8);
        img.pixels.resize(n);
    }
    img.sample_bytes = sample_bytes;
}

void cmyk_to_rgb(const std::uint8_t* cmyk, std::uint8_t* rgb, std::size_t pixels, bool adobe_inverted) {
    for (std::size_t i = 0; i < pixels; ++i, cmyk += 4, rgb += 3) {
        std::uint32_t c = cmyk[0], m = cmyk[1], y = cmyk[2], k = cmyk[3];
        if (!adobe_inverted) c = 255 - c, m = 255 - m, y = 255 - y, k = 255 - k;
        // Read all four samples before writing: rgb may alias cmyk.
        rgb[0] = div255(c * k);
        rgb[1] = div255(m * k);
        rgb[2] = div255(y * k);
    }
}

image_u8 convert_layout(image_u8 img, pixel_layout layout) {
    const std::uint32_t from = img.channels, to = channel_count(layout);
    if (from != 1 && from != 3 && from != 4)
        throw std::invalid_argument("convert_layout: unsupported channel count " + std::to_string(from));
    const std::size_t pixels = std::size_t(img.width) * img.height;
    if (img.pixels.size() != pixels * from) throw std::invalid_argument("convert_layout: pixel buffer has the wrong size");
    if (from == to) return img;

    image_u8 out;
    out.width = img.width;
    out.height = img.height;
    out.channels = to;
    out.pixels.resize(pixels * to);
    const std::uint8_t* s = img.pixels.data();
    std::uint8_t* d = out.pixels.data();
    if (to == 1) {
        for (std::size_t i = 0; i < pixels; ++i, s += from) d[i] = luma(s[0], s[1], s[2]);
    } else if (from == 1) {
        for (std::size_t i = 0; i < pixels; ++i, d += to) {
            d[0] = d[1] = d[2] = s[i];
            if (to == 4) d[3] = 0xFF;
        }
    } else {  // rgb <-> rgba
        for (std::size_t i = 0; i < pixels; ++i, s += from, d += to) {
            d[0] = s[0], d[1] = s[1], d[2] = s[2];
            if (to == 4) d[3] = 0xFF;
        }
    }
    return out;
}

void convert_samples(const image_u8& src, pixel_layout layout, image_u8& out) {
    const std::uint32_t n = src.channels;
    const std::uint32_t want = layout == pixel_layout::bands ? n : channel_count(layout);
    const std::size_t pixels = std::size_t(src.width) * src.height;
    out.width = src.width;
    out.height = src.height;
    out.channels = want;
    out.sample_bytes = src.sample_bytes;
    out.pixels.resize(pixels * want * src.sample_bytes);
    const bool wide = src.sample_bytes == 2;
    const std::uint32_t top = wide ? 65535 : 255;
    const auto get = [&](std::size_t p, std::uint32_t c) -> std::uint32_t {
        return wide ? src.samples16()[p * n + c] : src.pixels[p * n + c];
    };
    const auto set = [&](std::size_t p, std::uint32_t c, std::uint32_t v) {
        if (wide) out.samples16()[p * want + c] = static_cast<std::uint16_t>(v);
        else out.pixels[p * want + c] = static_cast<std::uint8_t>(v);
    };
    for (std::size_t p = 0; p < pixels; ++p) {
        if (layout == pixel_layout::gray) {
            if (n < 3) {
                set(p, 0, get(p, 0));
            } else {  // PIL's luma, at either depth
                const std::uint64_t l = (std::uint64_t(get(p, 0)) * 19595u + std::uint64_t(get(p, 1)) * 38470u +
                                         std::uint64_t(get(p, 2)) * 7471u + 0x8000u) >> 16;
                set(p, 0, static_cast<std::uint32_t>(l));
            }
        } else if (layout == pixel_layout::bands) {
            for (std::uint32_t c = 0; c < n; ++c) set(p, c, get(p, c));
        } else {
            const bool gray = n < 3;
            for (std::uint32_t c = 0; c < 3; ++c) set(p, c, get(p, gray ? 0 : c));
            if (want == 4) set(p, 3, n == 2 ? get(p, 1) : n >= 4 ? get(p, 3) : top);
        }
    }
}

}  // namespace shardpack
