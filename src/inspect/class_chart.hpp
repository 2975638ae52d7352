// `shardpack inspect --chart`: class frequencies as a bar chart (PNG), drawn with the project's
// canvas and bitmap font: per class, the share of labelled pixels and of records that hold the
// class (segmentation), or of records of the class (classification).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "inspect/bitmap_font.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {

struct class_counts {
    bool segmentation = true;
    std::vector<std::uint64_t> pixels;   // per class (segmentation); ignored pixels are not counted
    std::vector<std::uint64_t> records;  // per class: records that hold it (segmentation) or are of it
    std::uint64_t labelled_pixels = 0, total_records = 0;
};
// Reads every record's label (segmentation: the label alone, not the image) or class.
class_counts count_classes(const dataset& ds);

struct chart_bar {
    std::size_t class_id = 0;
    bool records = false;               // the records panel (else pixels, or classification's records)
    double fraction = 0;                // of labelled pixels, or of records
    std::size_t x = 0, y = 0, length = 0, height = 0;  // the bar: length = round(fraction * full_length)
    rgb color;
};
struct class_chart {
    rgb_canvas canvas;
    std::vector<chart_bar> bars;
    std::size_t full_length = 0;  // a bar of 100%
};
class_chart render_class_chart(const dataset& ds, const class_counts& counts, const std::string& title);

}  // namespace shardpack
