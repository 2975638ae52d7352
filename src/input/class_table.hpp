// The class tables: a segmentation class dictionary (name and mask color per class) or a
// classification list of class names. A class's id is its position in the file.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace shardpack {

struct class_entry {
    std::string name;
    bool has_color = false;
    std::uint8_t r = 0, g = 0, b = 0;
    std::int32_t value = -1;  // index masks: the mask value of this class when the table gives ids
    std::size_t line = 0;     // where the class table lists it (0: not from a file)
};

// The most classes a dataset can have: ids are stored as uint16 and the largest value is kept
// for "ignore".
inline constexpr std::size_t max_class_count = 65535;

// Segmentation: a class_dict.csv (CamVid style). A header row names the columns: name (or
// class, class_name), r, g, b (or red, green, blue), case-insensitive, in any order; other
// columns are ignored. One class per following row. Names and numbers are trimmed of spaces.
// Throws input_error "FILE:LINE: reason" for a missing column, a color value that is not an
// integer in 0..255, an empty, duplicate name or duplicate color (naming both lines), no
// classes, or more than max_class_count.
//
// For index masks the table may give each class its mask value instead of (or besides) a
// color: an id column (id, value, label_id, labelid, mask_value; 0..65535, unique, in any
// order and sparse). Ids are then remapped to 0..K-1 in table order. A table needs colors, ids
// or both.
std::vector<class_entry> load_class_dict(const std::string& path);

// True when every class has a color / a mask value.
bool classes_have_colors(const std::vector<class_entry>& classes);
bool classes_have_values(const std::vector<class_entry>& classes);

// --color-tolerance N: throws usage_error naming both classes (and their lines in `path`) when
// two dictionary colors lie within 2N of each other (color_distance), since a mask color
// between them would be within N of both.
void check_color_tolerance(const std::vector<class_entry>& classes, unsigned tolerance, const std::string& path);

// Classification: class names, one per line. The file may be a CSV: the name is then its first
// column, or the column a header row names name/class/class_name (so a class_dict.csv works
// too, its colors ignored). Throws input_error for empty or duplicate names, no names, or more
// than max_class_count.
std::vector<class_entry> load_class_names(const std::string& path);

}  // namespace shardpack
