// Crops and flips at read time: plan_augmentation (the window and flips a record gets, a pure
// function of the augmentation, the index, the slot and, for foreground crops, the record's
// label) and dataset::window (a whole decoded record's window, flipped, as a compact record).
// Part of reader.hpp, which includes it after the declarations it uses: include
// <shardpack/reader.hpp>, not this file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <bitset>
#include <cstring>
#include <vector>

#include "endian.hpp"
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

// crop_position::foreground: which pixels of a decoded label (as stored) are foreground, that is
// of no class in `background` and not ignored; counted per row, then one of them picked.
class foreground_map {
public:
    foreground_map(const schema_record& s, const std::vector<std::uint32_t>& background) : s_(s) {
        if (s.task != task_code::segmentation) throw error("crop_position::foreground needs a segmentation dataset");
        if (s.label_layout == layout_code::one_hot) {
            for (std::uint32_t c = 0; c < s.class_count; ++c)
                if (std::find(background.begin(), background.end(), c) == background.end()) channels_.push_back(c);
        } else if (s.label_dtype_bytes == 1) {
            std::memset(lut_, 1, sizeof lut_);
            for (std::uint32_t c : background)
                if (c < 256) lut_[c] = 0;
            if (s.ignore_value < 256) lut_[s.ignore_value] = 0;
            // One background class besides the ignore value (the common case): a comparison the
            // compiler vectorises instead of a table look-up per pixel.
            int zeros = 0;
            for (int v = 0; v < 256; ++v)
                if (!lut_[v] && std::uint32_t(v) != s.ignore_value) { ++zeros; single_ = std::uint8_t(v); }
            single_valid_ = zeros == 1 && s.ignore_value < 256;
        } else {
            background_ = background;
        }
    }
    // Foreground pixels of row `row` (width pixels, as stored).
    std::uint32_t count(const unsigned char* row, std::uint32_t width) const {
        std::uint32_t n = 0;
        if (s_.label_layout == layout_code::one_hot || s_.label_dtype_bytes != 1) {
            for (std::uint32_t x = 0; x < width; ++x) n += is_foreground(row, x);
        } else if (single_valid_) {
            // Eight pixels at a time: a word of background alone (most of a sparse label) costs
            // one comparison; others count their bytes equal to the background or the ignore
            // value exactly (a zero-byte test on the word xor the value) and take the rest.
            const std::uint64_t ones = 0x0101010101010101ull, low7 = 0x7F7F7F7F7F7F7F7Full;
            const std::uint64_t b = single_ * ones, ignore = (s_.ignore_value & 0xFF) * ones;
            const auto zero_bytes = [low7](std::uint64_t v) {  // 0x80 in each byte of v that is 0
                return ~(((v & low7) + low7) | v | low7);
            };
            std::uint32_t x = 0;
            for (; x + 8 <= width; x += 8) {
                std::uint64_t v;
                std::memcpy(&v, row + x, 8);
                if (v == b) continue;
                n += 8 - std::uint32_t(std::bitset<64>(zero_bytes(v ^ b)).count() + std::bitset<64>(zero_bytes(v ^ ignore)).count());
            }
            for (; x < width; ++x) n += std::uint32_t((row[x] != single_) & (row[x] != std::uint8_t(s_.ignore_value)));
        } else {
            for (std::uint32_t x = 0; x < width; ++x) n += lut_[row[x]];
        }
        return n;
    }
    bool is_foreground(const unsigned char* row, std::uint32_t x) const {
        if (s_.label_layout == layout_code::one_hot) {
            const unsigned char* p = row + std::size_t(x) * s_.class_count;
            for (std::uint32_t c : channels_)
                if (p[c]) return true;
            return false;
        }
        if (s_.label_dtype_bytes == 1) return lut_[row[x]] != 0;
        const std::uint32_t v = load_u16(row + 2 * std::size_t(x));
        return v != s_.ignore_value && std::find(background_.begin(), background_.end(), v) == background_.end();
    }
    std::size_t row_bytes(std::uint32_t width) const {
        return static_cast<std::size_t>(label_bytes_for(s_, width));
    }

    // rows[y] = the foreground pixels of row y of a decoded label.
    void count_rows(const unsigned char* label, std::uint32_t height, std::uint32_t width,
                    std::vector<std::uint32_t>& rows) const {
        rows.resize(height);
        const std::size_t stride = row_bytes(width);
        for (std::uint32_t y = 0; y < height; ++y) rows[y] = count(label + y * stride, width);
    }
    // The row of the (r mod F)-th of F foreground pixels (row-major), and its rank k in the row;
    // false when F = 0.
    static bool pick_row(const std::vector<std::uint32_t>& rows, std::uint64_t r, std::uint32_t& y, std::uint64_t& k) {
        std::uint64_t total = 0;
        for (std::uint32_t c : rows) total += c;
        if (total == 0) return false;
        k = r % total;
        for (y = 0; k >= rows[y]; ++y) k -= rows[y];
        return true;
    }
    // The column of the k-th foreground pixel of `row` (which has more than k).
    std::uint32_t nth_in_row(const unsigned char* row, std::uint64_t k) const {
        for (std::uint32_t x = 0;; ++x)
            if (is_foreground(row, x) && k-- == 0) return x;
    }

private:
    const schema_record& s_;
    unsigned char lut_[256] = {};
    std::uint8_t single_ = 0;
    bool single_valid_ = false;
    std::vector<std::uint32_t> channels_, background_;
};

// crop_position::foreground's choice: the labelled pixel the window is centred on, if any.
struct foreground_pick {
    bool found = false;
    std::uint32_t y = 0, x = 0;
};

// The random draws' base for a record: h = splitmix64(seed ^ splitmix64(epoch ^ splitmix64(index))).
inline std::uint64_t augmentation_seed(const augmentation& a, std::size_t index) {
    return splitmix64(a.seed ^ splitmix64(a.epoch ^ splitmix64(index)));
}
// The window's top row (or left column) for a pixel at `p` of a side of `record` pixels.
inline std::uint32_t centred(std::uint32_t p, std::size_t side, std::size_t record) {
    return std::uint32_t(std::min<std::size_t>(record - side, p > side / 2 ? p - side / 2 : 0));
}

// crop_position::foreground's pixel from a decoded label and (if counted before) its rows.
inline foreground_pick pick_foreground(const augmentation& a, std::size_t index, const schema_record& s,
                                       const unsigned char* label, std::uint32_t height, std::uint32_t width,
                                       const std::vector<std::uint32_t>* counted = nullptr) {
    const foreground_map fm(s, a.background);
    thread_local std::vector<std::uint32_t> rows;
    if (!counted) {
        fm.count_rows(label, height, width, rows);
        counted = &rows;
    }
    foreground_pick p;
    std::uint64_t k = 0;
    p.found = foreground_map::pick_row(*counted, splitmix64(augmentation_seed(a, index) + 5), p.y, k);
    if (p.found) p.x = fm.nth_in_row(label + p.y * fm.row_bytes(width), k);
    return p;
}

// plan_augmentation's body; `fg` is needed only for crop_position::foreground.
inline crop_box plan_augmentation(const augmentation& a, std::size_t index, std::size_t record_height,
                                  std::size_t record_width, std::size_t slot, const foreground_pick* fg);

}  // namespace detail

inline crop_box plan_augmentation(const augmentation& a, std::size_t index, std::size_t record_height,
                                  std::size_t record_width, std::size_t slot) {
    return detail::plan_augmentation(a, index, record_height, record_width, slot, nullptr);
}

inline crop_box plan_augmentation(const augmentation& a, const sample& record, std::size_t slot) {
    if (a.position != crop_position::foreground)
        return detail::plan_augmentation(a, record.index_, record.layout_.height, record.layout_.width, slot, nullptr);
    const detail::schema_record& s = record.state_->schema;
    if (s.task != detail::task_code::segmentation) throw error("crop_position::foreground needs a segmentation dataset");
    const detail::foreground_pick fg = detail::pick_foreground(a, record.index_, s, record.rec_ + record.layout_.label_offset,
                                                               record.layout_.height, record.layout_.width);
    return detail::plan_augmentation(a, record.index_, record.layout_.height, record.layout_.width, slot, &fg);
}

inline crop_box detail::plan_augmentation(const augmentation& a, std::size_t index, std::size_t record_height,
                                  std::size_t record_width, std::size_t slot, const foreground_pick* fg) {
    crop_box b;
    const std::size_t h = a.height ? a.height : record_height, w = a.width ? a.width : record_width;
    if ((a.height == 0) != (a.width == 0)) throw error("augmentation: set both height and width of the crop, or neither");
    if (h > record_height || w > record_width)
        throw error("crop " + std::to_string(w) + "x" + std::to_string(h) + " is larger than record " + std::to_string(index) +
                    " (" + std::to_string(record_width) + "x" + std::to_string(record_height) + ")");
    b.height = std::uint32_t(h);
    b.width = std::uint32_t(w);
    const std::uint64_t seed = augmentation_seed(a, index);
    if ((a.position == crop_position::given || a.hflip == flip_mode::given || a.vflip == flip_mode::given) && !a.given)
        throw error("augmentation: given boxes or flips need augmentation::given");
    switch (a.position) {
        case crop_position::center:
            b.y = std::uint32_t((record_height - h) / 2);
            b.x = std::uint32_t((record_width - w) / 2);
            break;
        case crop_position::foreground: {
            if (!fg)
                throw error("crop_position::foreground needs the record's label: plan_augmentation(augmentation, sample)");
            if (fg->found) {
                b.y = centred(fg->y, h, record_height);
                b.x = centred(fg->x, w, record_width);
                break;
            }
            b.fallback = true;  // no foreground: a uniform window, as crop_position::random
            b.y = std::uint32_t(splitmix64(seed + 1) % (record_height - h + 1));
            b.x = std::uint32_t(splitmix64(seed + 2) % (record_width - w + 1));
            break;
        }
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
