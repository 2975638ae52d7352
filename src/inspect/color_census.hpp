// `shardpack colors`: every distinct color (or, for index masks, value) in the masks a list
// names, with its pixel and file counts and one example, scanned in parallel; matched against
// a class dictionary when one is given.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "input/input_list.hpp"
#include "shardpack/detail/json.hpp"
#include "transform/mask_options.hpp"

namespace shardpack {

struct color_census_options {
    input_options input;        // task is forced to segmentation; classes_path may be empty
    mask_options mask;          // --mask-values, --color-tolerance, --ignore-values (unknown_label unused)
    unsigned threads = 0;       // 0: all cores
};

enum class color_match { none, exact, tolerance, ignored };

struct census_entry {
    std::uint32_t value = 0;       // packed 0xRRGGBB, or an index mask's value
    std::uint64_t pixels = 0, files = 0;
    std::size_t example_row = 0;   // the first row (in list order) whose mask holds it
    std::string example;           // that row's mask cell as written
    std::size_t example_line = 0;  // its CSV line
    std::uint32_t x = 0, y = 0;    // the first pixel there (row-major) with this value
    // With a class table: the class it maps to (or -1), how, and the nearest class and distance.
    int class_id = -1;
    color_match match = color_match::none;
    int nearest = -1;
    unsigned distance = 0;
};

struct unreadable_mask {
    std::size_t line = 0;
    std::string mask, reason;
};

struct color_census {
    bool index_masks = false;
    bool from_folders = false;  // --images/--masks: examples are named by file, without a list line
    unsigned tolerance = 0;
    std::vector<class_entry> classes;
    std::vector<census_entry> entries;  // most pixels first (ties: smaller value first)
    std::vector<std::size_t> unused_classes;  // ids no mask maps to
    std::uint64_t masks = 0, pixels = 0;
    std::vector<unreadable_mask> unreadable;
    double seconds = 0;
};

// Reads the list and scans every mask (whole, at its own size). A mask that cannot be read or
// decoded is listed in `unreadable`, not fatal. Throws usage_error/input_error for bad options,
// lists and class tables (as build does).
color_census scan_mask_colors(const color_census_options& options);

detail::json census_to_json(const color_census& census);
std::string format_census(const color_census& census, std::size_t max_rows = 200);

// A class table that would build these masks: dictionary classes keep their names and ids; a
// class that exactly one mask color maps to (exactly or within the tolerance) gets that color;
// colors that map to no class become new classes named class_R_G_B (index masks: name,id with
// class_V). Returns the CSV text, and in `tolerance_needed` the --color-tolerance a build with it
// needs (0 unless several colors map to one class).
std::string census_class_dict(const color_census& census, unsigned& tolerance_needed);

}  // namespace shardpack
