// Colour-coded segmentation masks → class ids, and the label layouts derived from them.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "image.hpp"
#include "transform/geometry.hpp"

namespace shardpack {

struct label_colour {
    std::uint8_t r = 0, g = 0, b = 0;
};

// Exact colour → class id lookup (never a palette index), built from the class dictionary in
// order (id = position). Immutable after construction: one instance may be shared by threads.
// Throws input_error for a colour listed twice or more than 65535 classes.
class colour_lookup {
public:
    explicit colour_lookup(const std::vector<label_colour>& colours);
    // The class id of the colour, or -1.
    int find(std::uint8_t r, std::uint8_t g, std::uint8_t b) const { return find_packed(pack(r, g, b)); }
    int find_packed(std::uint32_t rgb) const {
        std::uint32_t i = hash(rgb);
        for (;;) {
            const std::uint32_t k = keys_[i];
            if (k == rgb) return values_[i];
            if (k == empty_key) return -1;
            i = (i + 1) & mask_;
        }
    }
    std::size_t size() const { return count_; }

    static std::uint32_t pack(std::uint8_t r, std::uint8_t g, std::uint8_t b) {
        return (std::uint32_t(r) << 16) | (std::uint32_t(g) << 8) | b;
    }

private:
    static constexpr std::uint32_t empty_key = 0xFFFFFFFFu;
    std::uint32_t hash(std::uint32_t rgb) const { return (rgb * 0x9E3779B1u) >> shift_; }
    std::vector<std::uint32_t> keys_;
    std::vector<std::int32_t> values_;
    std::uint32_t mask_ = 0;
    int shift_ = 32;
    std::size_t count_ = 0;
};

enum class unknown_colour_policy { error, ignore };

// Class id per pixel (row-major), or the ignore value.
struct label_plane {
    std::uint32_t width = 0, height = 0;
    std::vector<std::uint16_t> ids;
};

// The first output pixel (in row-major output order) whose colour is not in the dictionary:
// its colour and source coordinates; count = all such output pixels (same as *unknown_count).
struct unknown_colour_hit {
    std::uint8_t r = 0, g = 0, b = 0;
    std::uint32_t x = 0, y = 0;
    std::uint64_t count = 0;
};

// Nearest-neighbour geometry and colour lookup in one pass over the output pixels (masks are
// never interpolated, classes never mixed): an output pixel inside the content shows source
// pixel nearest_source(plan.x, cx), nearest_source(plan.y, cy) of the plan's scaled coordinates
// (the same box as apply_geometry). Padding → ignore_value. rgb_mask has 3 channels, or 4
// (alpha ignored), or 1 (gray g is colour (g,g,g)); its width must be plan.x.src_len and it needs
// at least plan.y.src_rows_needed() rows. An unknown colour under policy error throws
// input_error("unknown colour (r,g,b) at pixel (x,y) — not in the class dictionary") with
// source coordinates; under ignore it becomes ignore_value and is counted. first_unknown and
// unknown_count may be null; they are always written when not null (count 0: no unknown colour).
void map_mask(const image_u8& rgb_mask, const geometry_plan& plan, const colour_lookup& lookup,
              unknown_colour_policy policy, std::uint16_t ignore_value, label_plane& out,
              unknown_colour_hit* first_unknown, std::uint64_t* unknown_count);

// Index map → one-hot HWC u8 (0/1); an id >= classes (the ignore value) → all zeros. Writes
// pixels * classes bytes to dst.
void expand_one_hot(const std::uint16_t* ids, std::size_t pixels, std::uint32_t classes, std::uint8_t* dst);

// Per-class pixel histogram: counts[id]++ for every pixel with id < counts.size() (the caller
// sizes counts to the class count; the ignore value and anything beyond are not counted).
void count_classes(const label_plane& labels, std::vector<std::uint64_t>& counts);

}  // namespace shardpack
