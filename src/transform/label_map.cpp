#include "transform/label_map.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "errors.hpp"

namespace shardpack {

namespace {

std::string color_text(std::uint8_t r, std::uint8_t g, std::uint8_t b) {
    return "(" + std::to_string(r) + "," + std::to_string(g) + "," + std::to_string(b) + ")";
}

// Reads the color of pixel p of a 1-, 3- or 4-channel row as packed 0xRRGGBB.
template <int C>
inline std::uint32_t packed_at(const std::uint8_t* row, std::uint32_t x) {
    const std::uint8_t* p = row + std::size_t(x) * C;
    if constexpr (C == 1)
        return color_lookup::pack(p[0], p[0], p[0]);
    else
        return color_lookup::pack(p[0], p[1], p[2]);
}

template <int C>
void map_rows(const image_u8& mask, const geometry_plan& plan, const color_lookup& lookup, unknown_color_policy policy,
              std::uint16_t ignore_value, label_plane& out, const std::vector<std::uint32_t>& xs,
              unknown_color_hit& first, std::uint64_t& unknown, mask_mapping_stats* stats) {
    const axis_plan &ax = plan.x, &ay = plan.y;
    std::uint32_t last_key = 0xFFFFFFFFu;  // never a 24-bit color
    std::uint16_t last_id = 0;
    bool last_tolerant = false;
    std::uint64_t* tolerant_counts = stats ? stats->by_tolerance.data() : nullptr;
    std::uint32_t prev_sy = 0xFFFFFFFFu;
    std::uint64_t prev_row_unknown = 0;
    bool prev_row_tolerant = false;
    for (std::uint32_t t = 0; t < ay.content_len; ++t) {
        const std::uint32_t sy = nearest_source(ay, ay.crop_offset + t);
        std::uint16_t* dst = out.ids.data() + std::size_t(ay.pad_before + t) * out.width + ax.pad_before;
        if (sy == prev_sy) {  // upscaling: the same source row again
            std::memcpy(dst, dst - out.width, std::size_t(ax.content_len) * sizeof(std::uint16_t));
            unknown += prev_row_unknown;
            if (stats && (prev_row_unknown || prev_row_tolerant)) {  // its special pixels count again
                const std::uint8_t* row = mask.row(sy);
                for (std::uint32_t i = 0; i < ax.content_len; ++i) {
                    const std::uint32_t key = packed_at<C>(row, xs[i]);
                    const int v = lookup.find_packed(key);
                    if (v < 0) ++stats->unknown[stats->unknown_index.at(key)].pixels;
                    else if (v & color_lookup::by_tolerance) ++tolerant_counts[v & color_lookup::id_mask];
                }
            }
            continue;
        }
        prev_sy = sy;
        prev_row_unknown = 0;
        prev_row_tolerant = false;
        const std::uint8_t* row = mask.row(sy);
        for (std::uint32_t i = 0; i < ax.content_len; ++i) {
            const std::uint32_t key = packed_at<C>(row, xs[i]);
            if (key != last_key) {
                const int v = lookup.find_packed(key);
                if (v < 0) {
                    const auto r = static_cast<std::uint8_t>(key >> 16), g = static_cast<std::uint8_t>(key >> 8),
                               b = static_cast<std::uint8_t>(key);
                    if (policy == unknown_color_policy::error)
                        throw unknown_color_error("unknown color " + color_text(r, g, b) + " at pixel (" +
                                                       std::to_string(xs[i]) + "," + std::to_string(sy) +
                                                       ") \xE2\x80\x94 not in the class dictionary",
                                                   key, xs[i], sy);
                    if (unknown == 0 && prev_row_unknown == 0) {
                        first.r = r;
                        first.g = g;
                        first.b = b;
                        first.x = xs[i];
                        first.y = sy;
                    }
                    if (stats) {
                        const auto [it, fresh] = stats->unknown_index.emplace(key, stats->unknown.size());
                        if (fresh) stats->unknown.push_back({key, 0, xs[i], sy});
                        ++stats->unknown[it->second].pixels;
                    }
                    ++prev_row_unknown;
                    dst[i] = ignore_value;
                    continue;  // keep last_key: unknown colors are not cached
                }
                last_key = key;
                last_id = static_cast<std::uint16_t>(v & color_lookup::id_mask);
                last_tolerant = (v & color_lookup::by_tolerance) != 0;
            }
            dst[i] = last_id;
            if (last_tolerant && tolerant_counts) {
                ++tolerant_counts[last_id];
                prev_row_tolerant = true;
            }
        }
        unknown += prev_row_unknown;
    }
}

}  // namespace

color_lookup::color_lookup(const std::vector<label_color>& colors, unsigned tolerance) : tolerance_(tolerance) {
    if (colors.size() > 65535)
        throw input_error("the class dictionary has " + std::to_string(colors.size()) +
                          " classes; at most 65535 are supported");
    if (tolerance > 255) throw input_error("a color tolerance is at most 255");
    for (const label_color& c : colors) colors_.push_back(pack(c.r, c.g, c.b));
    const std::uint64_t side = 2 * std::uint64_t(tolerance) + 1;
    const std::uint64_t cube_entries = colors.size() * side * side * side;
    cube_ = tolerance > 0 && cube_entries <= (std::uint64_t(1) << 20);
    const std::uint64_t entries = cube_ ? cube_entries : colors.size();
    std::uint32_t size = 16;
    int bits = 4;
    while (size < entries * 2) {
        size <<= 1;
        ++bits;
    }
    keys_.assign(size, empty_key);
    values_.assign(size, -1);
    mask_ = size - 1;
    shift_ = 32 - bits;
    for (std::size_t id = 0; id < colors.size(); ++id) {
        const label_color& c = colors[id];
        const std::uint32_t key = pack(c.r, c.g, c.b);
        std::uint32_t i = hash(key);
        while (keys_[i] != empty_key) {
            if (keys_[i] == key)
                throw input_error("color " + color_text(c.r, c.g, c.b) + " is given to class " +
                                  std::to_string(values_[i]) + " and to class " + std::to_string(id) +
                                  " of the class dictionary");
            i = (i + 1) & mask_;
        }
        keys_[i] = key;
        values_[i] = static_cast<std::int32_t>(id);
    }
    if (tolerance > 0)
        for (std::size_t a = 0; a < colors_.size(); ++a)
            for (std::size_t b = a + 1; b < colors_.size(); ++b)
                if (color_distance(colors_[a], colors_[b]) <= 2 * tolerance)
                    throw input_error("classes " + std::to_string(a) + " and " + std::to_string(b) +
                                      " of the class dictionary lie within twice the color tolerance " +
                                      std::to_string(tolerance) + " of each other");
    if (cube_) {
        const int n = int(tolerance);
        for (std::size_t id = 0; id < colors.size(); ++id) {
            const label_color& c = colors[id];
            for (int dr = -n; dr <= n; ++dr)
                for (int dg = -n; dg <= n; ++dg)
                    for (int db = -n; db <= n; ++db) {
                        const int r = c.r + dr, g = c.g + dg, b = c.b + db;
                        if (r < 0 || r > 255 || g < 0 || g > 255 || b < 0 || b > 255 || (dr == 0 && dg == 0 && db == 0))
                            continue;
                        insert(pack(std::uint8_t(r), std::uint8_t(g), std::uint8_t(b)),
                               static_cast<std::int32_t>(id) | by_tolerance);
                    }
        }
    }
    count_ = colors.size();
}

void color_lookup::insert(std::uint32_t key, std::int32_t value) {
    std::uint32_t i = hash(key);
    while (keys_[i] != empty_key) {
        if (keys_[i] == key) return;  // cannot happen: colors more than 2N apart have disjoint cubes
        i = (i + 1) & mask_;
    }
    keys_[i] = key;
    values_[i] = value;
}

int color_lookup::nearest_within(std::uint32_t rgb) const {
    const nearest_result n = nearest(rgb);
    return n.id >= 0 && n.distance <= tolerance_ ? (n.id | by_tolerance) : -1;
}

color_lookup::nearest_result color_lookup::nearest(std::uint32_t rgb) const {
    nearest_result best;
    for (std::size_t id = 0; id < colors_.size(); ++id) {
        const unsigned d = color_distance(rgb, colors_[id]);
        if (best.id < 0 || d < best.distance) {
            best.id = int(id);
            best.distance = d;
        }
    }
    return best;
}

void map_mask(const image_u8& mask, const geometry_plan& plan, const color_lookup& lookup, unknown_color_policy policy,
              std::uint16_t ignore_value, label_plane& out, unknown_color_hit* first_unknown,
              std::uint64_t* unknown_count) {
    map_mask(mask, plan, lookup, policy, ignore_value, out, first_unknown, unknown_count, nullptr);
}

void map_mask(const image_u8& mask, const geometry_plan& plan, const color_lookup& lookup, unknown_color_policy policy,
              std::uint16_t ignore_value, label_plane& out, unknown_color_hit* first_unknown,
              std::uint64_t* unknown_count, mask_mapping_stats* stats) {
    if (stats) {
        stats->by_tolerance.assign(lookup.size(), 0);
        stats->unknown.clear();
        stats->unknown_index.clear();
    }
    const axis_plan &ax = plan.x, &ay = plan.y;
    check_plan_consistent(plan, "map_mask");
    const std::uint32_t C = mask.channels;
    if (C != 1 && C != 3 && C != 4)
        throw input_error("mask has " + std::to_string(C) + " channels; expected 1 (gray), 3 (RGB) or 4 (RGBA)");
    if (mask.pixels.size() < std::size_t(mask.width) * mask.height * C)
        throw std::invalid_argument("map_mask: the mask's buffer does not match its size");
    check_source_fits("mask", mask.width, mask.height, ax.src_len, nearest_rows_needed(plan));

    out.width = ax.out_len;
    out.height = ay.out_len;
    out.ids.resize(std::size_t(out.width) * out.height);
    if (ax.content_len < ax.out_len || ay.content_len < ay.out_len)
        std::fill(out.ids.begin(), out.ids.end(), ignore_value);

    unknown_color_hit first{};
    std::uint64_t unknown = 0;
    if (ax.content_len && ay.content_len) {
        thread_local std::vector<std::uint32_t> xs;
        xs.resize(ax.content_len);
        for (std::uint32_t i = 0; i < ax.content_len; ++i) xs[i] = nearest_source(ax, ax.crop_offset + i);
        switch (C) {
            case 1: map_rows<1>(mask, plan, lookup, policy, ignore_value, out, xs, first, unknown, stats); break;
            case 3: map_rows<3>(mask, plan, lookup, policy, ignore_value, out, xs, first, unknown, stats); break;
            default: map_rows<4>(mask, plan, lookup, policy, ignore_value, out, xs, first, unknown, stats); break;
        }
    }
    first.count = unknown;
    if (first_unknown) *first_unknown = first;
    if (unknown_count) *unknown_count = unknown;
}

void expand_one_hot(const std::uint16_t* ids, std::size_t pixels, std::uint32_t classes, std::uint8_t* dst) {
    if (classes == 0 || pixels == 0) return;
    std::memset(dst, 0, pixels * classes);
    for (std::size_t p = 0; p < pixels; ++p, dst += classes)
        if (ids[p] < classes) dst[ids[p]] = 1;
}

void count_classes(const label_plane& labels, std::vector<std::uint64_t>& counts) {
    // Labels come in long runs: count a run at a time (no store-to-load chain on one counter).
    const std::size_t n = counts.size();
    std::uint64_t* c = counts.data();
    const std::uint16_t* p = labels.ids.data();
    const std::uint16_t* const end = p + labels.ids.size();
    while (p != end) {
        const std::uint16_t id = *p;
        const std::uint16_t* q = p + 1;
        while (q != end && *q == id) ++q;
        if (id < n) c[id] += static_cast<std::uint64_t>(q - p);
        p = q;
    }
}

}  // namespace shardpack
