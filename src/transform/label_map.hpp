// Color-coded segmentation masks → class ids, and the label layouts derived from them.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "errors.hpp"
#include "image.hpp"
#include "transform/geometry.hpp"

namespace shardpack {

struct label_color {
    std::uint8_t r = 0, g = 0, b = 0;
};

// Largest color difference between two colors: the largest of the three channel differences.
inline unsigned color_distance(std::uint32_t a_rgb, std::uint32_t b_rgb) {
    unsigned d = 0;
    for (int shift = 0; shift <= 16; shift += 8) {
        const int a = int((a_rgb >> shift) & 0xFF), b = int((b_rgb >> shift) & 0xFF);
        d = std::max(d, unsigned(a > b ? a - b : b - a));
    }
    return d;
}

// Color → class id lookup (never a palette index), built from the class dictionary in order
// (id = position). Exact by default; with a tolerance N, a color within N (color_distance) of
// a dictionary color maps to that class too. Since dictionary colors must then lie more than
// 2N apart, such a color is within N of exactly one class. Immutable after construction: one
// instance may be shared by threads. Throws input_error for a color listed twice, two colors
// within 2N of each other, or more than 65535 classes.
class color_lookup {
public:
    explicit color_lookup(const std::vector<label_color>& colors, unsigned tolerance = 0);
    // The class id of the color (exact or within the tolerance), or -1.
    int find(std::uint8_t r, std::uint8_t g, std::uint8_t b) const {
        const int v = find_packed(pack(r, g, b));
        return v < 0 ? v : v & id_mask;
    }
    // The class id, with by_tolerance set when the color is not the dictionary's own; or -1.
    int find_packed(std::uint32_t rgb) const {
        std::uint32_t i = hash(rgb);
        for (;;) {
            const std::uint32_t k = keys_[i];
            if (k == rgb) return values_[i];
            if (k == empty_key) return tolerance_ && !cube_ ? nearest_within(rgb) : -1;
            i = (i + 1) & mask_;
        }
    }
    static constexpr int by_tolerance = 0x10000;
    static constexpr int id_mask = 0xFFFF;
    std::size_t size() const { return count_; }
    unsigned tolerance() const { return tolerance_; }
    // The dictionary color nearest to rgb (ties: the lower id) and its distance; id -1 when the
    // dictionary is empty.
    struct nearest_result {
        int id = -1;
        unsigned distance = 0;
    };
    nearest_result nearest(std::uint32_t rgb) const;

    static std::uint32_t pack(std::uint8_t r, std::uint8_t g, std::uint8_t b) {
        return (std::uint32_t(r) << 16) | (std::uint32_t(g) << 8) | b;
    }

private:
    static constexpr std::uint32_t empty_key = 0xFFFFFFFFu;
    std::uint32_t hash(std::uint32_t rgb) const { return (rgb * 0x9E3779B1u) >> shift_; }
    int nearest_within(std::uint32_t rgb) const;
    void insert(std::uint32_t key, std::int32_t value);
    std::vector<std::uint32_t> keys_;
    std::vector<std::int32_t> values_;
    std::vector<std::uint32_t> colors_;  // packed, by id
    std::uint32_t mask_ = 0;
    int shift_ = 32;
    std::size_t count_ = 0;
    unsigned tolerance_ = 0;
    // With a small tolerance every color within it is in the table; a large one (where that
    // table would pass 2^20 entries) searches the dictionary on a miss instead.
    bool cube_ = false;
};

// Thrown by map_mask for a color outside the dictionary (and its tolerance) under policy error:
// the color and its source position, for callers that add what the dictionary suggests.
struct unknown_color_error : input_error {
    unknown_color_error(const std::string& what, std::uint32_t rgb_, std::uint32_t x_, std::uint32_t y_)
        : input_error(what), rgb(rgb_), x(x_), y(y_) {}
    std::uint32_t rgb = 0, x = 0, y = 0;
};

// What mapping one mask found besides its class ids: per class the output pixels mapped by
// tolerance rather than exactly, and each distinct unknown color (ignore policy) with its
// output pixel count and first source position. Cleared by map_mask.
struct mask_mapping_stats {
    struct unknown_color {
        std::uint32_t rgb = 0;
        std::uint64_t pixels = 0;
        std::uint32_t x = 0, y = 0;
    };
    std::vector<std::uint64_t> by_tolerance;  // sized to the class count by map_mask
    std::vector<unknown_color> unknown;      // in order of first appearance (output order)
    std::unordered_map<std::uint32_t, std::size_t> unknown_index;  // rgb -> position in unknown
};

enum class unknown_color_policy { error, ignore };

// Class id per pixel (row-major), or the ignore value.
struct label_plane {
    std::uint32_t width = 0, height = 0;
    std::vector<std::uint16_t> ids;
};

// The first output pixel (in row-major output order) whose color is not in the dictionary:
// its color and source coordinates; count = all such output pixels (same as *unknown_count).
struct unknown_color_hit {
    std::uint8_t r = 0, g = 0, b = 0;
    std::uint32_t x = 0, y = 0;
    std::uint64_t count = 0;
};

// Nearest-neighbour geometry and color lookup in one pass over the output pixels (masks are
// never interpolated, classes never mixed): an output pixel inside the content shows source
// pixel nearest_source(plan.x, cx), nearest_source(plan.y, cy) of the plan's scaled coordinates
// (the same box as apply_geometry). Padding → ignore_value. rgb_mask has 3 channels, or 4
// (alpha ignored), or 1 (gray g is color (g,g,g)); its width must be plan.x.src_len and it needs
// at least plan.y.src_rows_needed() rows. An unknown color under policy error throws
// input_error("unknown color (r,g,b) at pixel (x,y) — not in the class dictionary") with
// source coordinates; under ignore it becomes ignore_value and is counted. first_unknown and
// unknown_count may be null; they are always written when not null (count 0: no unknown color).
void map_mask(const image_u8& rgb_mask, const geometry_plan& plan, const color_lookup& lookup,
              unknown_color_policy policy, std::uint16_t ignore_value, label_plane& out,
              unknown_color_hit* first_unknown, std::uint64_t* unknown_count);
// The same, also filling `stats` (may be null). The error under policy error is an
// unknown_color_error.
void map_mask(const image_u8& rgb_mask, const geometry_plan& plan, const color_lookup& lookup,
              unknown_color_policy policy, std::uint16_t ignore_value, label_plane& out,
              unknown_color_hit* first_unknown, std::uint64_t* unknown_count, mask_mapping_stats* stats);

// Index map → one-hot HWC u8 (0/1); an id >= classes (the ignore value) → all zeros. Writes
// pixels * classes bytes to dst.
void expand_one_hot(const std::uint16_t* ids, std::size_t pixels, std::uint32_t classes, std::uint8_t* dst);

// Per-class pixel histogram: counts[id]++ for every pixel with id < counts.size() (the caller
// sizes counts to the class count; the ignore value and anything beyond are not counted).
void count_classes(const label_plane& labels, std::vector<std::uint64_t>& counts);

}  // namespace shardpack
