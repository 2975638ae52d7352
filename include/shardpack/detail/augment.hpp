// Crops and flips at read time: plan_augmentation (the window and flips a record gets, a pure
// function of the augmentation, the index and the slot) and dataset::window (a whole decoded
// record's window, flipped, as a compact record).
// Part of reader.hpp, which includes it after the declarations it uses: include
// <shardpack/reader.hpp>, not this file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "format.hpp"

namespace shardpack {

namespace detail {

inline std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

inline bool draw_flip(std::uint64_t r, float p) {
    if (!(p > 0.0f)) return false;
    if (p >= 1.0f) return true;
    return double(r >> 40) < double(p) * double(1u << 24);
}

// copy_mirrored for pixels of N bytes, N known at compile time: each pixel's memcpy is a move or
// two, where a size known only at run time made it a call into the C library per pixel (a
// one-hot label's pixels, one byte a class: 8% of a flipped 256x256 crop's time, 6 classes).
template <std::size_t N>
inline void copy_mirrored_fixed(unsigned char* dst, const unsigned char* src, std::size_t count) {
    const unsigned char* s = src + (count - 1) * N;
    for (std::size_t i = 0; i < count; ++i, dst += N, s -= N) std::memcpy(dst, s, N);
}

// Copies `count` pixels of `bytes` bytes each from src to dst, in reverse order (a mirrored row).
inline void copy_mirrored(unsigned char* dst, const unsigned char* src, std::size_t count, std::size_t bytes) {
    switch (bytes) {
        case 1: for (std::size_t i = 0; i < count; ++i) dst[i] = src[count - 1 - i]; return;
        case 2: return copy_mirrored_fixed<2>(dst, src, count);
        case 3: return copy_mirrored_fixed<3>(dst, src, count);
        case 4: return copy_mirrored_fixed<4>(dst, src, count);
        case 5: return copy_mirrored_fixed<5>(dst, src, count);
        case 6: return copy_mirrored_fixed<6>(dst, src, count);
        case 7: return copy_mirrored_fixed<7>(dst, src, count);
        case 8: return copy_mirrored_fixed<8>(dst, src, count);
        case 9: return copy_mirrored_fixed<9>(dst, src, count);
        case 10: return copy_mirrored_fixed<10>(dst, src, count);
        case 11: return copy_mirrored_fixed<11>(dst, src, count);
        case 12: return copy_mirrored_fixed<12>(dst, src, count);
        case 13: return copy_mirrored_fixed<13>(dst, src, count);
        case 14: return copy_mirrored_fixed<14>(dst, src, count);
        case 15: return copy_mirrored_fixed<15>(dst, src, count);
        case 16: return copy_mirrored_fixed<16>(dst, src, count);
        default: {
            const unsigned char* s = src + (count - 1) * bytes;
            for (std::size_t i = 0; i < count; ++i, dst += bytes, s -= bytes) std::memcpy(dst, s, bytes);
        }
    }
}

// dst (rows of `width` pixels) = the window of `src` (rows of `src_width` pixels), flipped.
inline void copy_window(unsigned char* dst, const unsigned char* src, std::size_t src_width, std::size_t bytes,
                        const crop_box& b) {
    const std::size_t row = std::size_t(b.width) * bytes;
    for (std::size_t oy = 0; oy < b.height; ++oy) {
        const std::size_t sy = b.vflip ? b.y + b.height - 1 - oy : b.y + oy;
        const unsigned char* s = src + (sy * src_width + b.x) * bytes;
        if (b.hflip) copy_mirrored(dst + oy * row, s, b.width, bytes);
        else std::memcpy(dst + oy * row, s, row);
    }
}

}  // namespace detail

inline crop_box plan_augmentation(const augmentation& a, std::size_t index, std::size_t record_height,
                                  std::size_t record_width, std::size_t slot) {
    using detail::splitmix64;
    crop_box b;
    const std::size_t h = a.height ? a.height : record_height, w = a.width ? a.width : record_width;
    if ((a.height == 0) != (a.width == 0)) throw error("augmentation: set both height and width of the crop, or neither");
    if (h > record_height || w > record_width)
        throw error("crop " + std::to_string(w) + "x" + std::to_string(h) + " is larger than record " + std::to_string(index) +
                    " (" + std::to_string(record_width) + "x" + std::to_string(record_height) + ")");
    b.height = std::uint32_t(h);
    b.width = std::uint32_t(w);
    const std::uint64_t seed = splitmix64(a.seed ^ splitmix64(a.epoch ^ splitmix64(index)));
    if ((a.position == crop_position::given || a.hflip == flip_mode::given || a.vflip == flip_mode::given) && !a.given)
        throw error("augmentation: given boxes or flips need augmentation::given");
    switch (a.position) {
        case crop_position::center:
            b.y = std::uint32_t((record_height - h) / 2);
            b.x = std::uint32_t((record_width - w) / 2);
            break;
        case crop_position::random:
            b.y = std::uint32_t(splitmix64(seed + 1) % (record_height - h + 1));
            b.x = std::uint32_t(splitmix64(seed + 2) % (record_width - w + 1));
            break;
        case crop_position::given: {
            const crop_box& g = a.given[slot];
            if (g.y > record_height - h || g.x > record_width - w)
                throw error("given crop at (y " + std::to_string(g.y) + ", x " + std::to_string(g.x) + ") of " +
                            std::to_string(w) + "x" + std::to_string(h) + " runs past record " + std::to_string(index) + " (" +
                            std::to_string(record_width) + "x" + std::to_string(record_height) + ")");
            b.y = g.y;
            b.x = g.x;
            break;
        }
    }
    b.hflip = a.hflip == flip_mode::given ? a.given[slot].hflip
            : a.hflip == flip_mode::random && detail::draw_flip(splitmix64(seed + 3), a.hflip_probability);
    b.vflip = a.vflip == flip_mode::given ? a.given[slot].vflip
            : a.vflip == flip_mode::random && detail::draw_flip(splitmix64(seed + 4), a.vflip_probability);
    return b;
}

inline sample dataset::window(const sample& full, const crop_box& b, read_context& ctx) const {
    using namespace detail;
    const schema_record& s = s_->schema;
    const record_layout& r = full.layout_;
    const record_layout w = make_record_layout(s, b.height, b.width, r.class_id, 0);
    if (ctx.window_.size() < w.total_bytes) ctx.window_.resize(static_cast<std::size_t>(w.total_bytes));
    unsigned char* out = ctx.window_.data();
    copy_window(out + w.image_offset, full.rec_ + r.image_offset, r.width, std::size_t(s.channels) * s.image_dtype_bytes, b);
    if (r.label_bytes)
        copy_window(out + w.label_offset, full.rec_ + r.label_offset, r.width,
                    static_cast<std::size_t>(r.label_bytes / (std::uint64_t(r.height) * r.width)), b);
    sample win;
    win.state_ = s_;
    win.index_ = full.index_;
    win.rec_ = out;
    win.layout_ = w;
    return win;
}

}  // namespace shardpack
