// `shardpack export`: one record back to files a person can look at: the stored image exactly,
// and a segmentation label drawn in the class dictionary's colors.
#pragma once
#include <string>
#include <vector>

#include "shardpack/detail/json.hpp"

namespace shardpack {

struct image_u8;
struct rgb_canvas;

// Writes an image (or a drawn canvas: a contact sheet, a chart) as a PNG at `path`, atomically,
// creating its folder first; an encoder failure is reported as a failure to write that file
// (io_error). What export, inspect --chart and export --grid write.
void write_png_file(const std::string& path, const image_u8& img);
void write_png_file(const std::string& path, const rgb_canvas& canvas);

// Writes PREFIX.image.png and, for segmentation, PREFIX.label.png (RGB, each class in its
// dictionary color, or class_color's palette for classes without one) and, with overlay,
// PREFIX.overlay.png (the image with the label colors blended at 50%). Ignored label pixels
// are drawn as a checkerboard of 4x4 magenta (255,0,255) and black squares, in the label and
// the overlay alike. Creates PREFIX's folder. Returns what it wrote: index, key, image, class_id
// and class (classification), or label, overlay, classes_present and ignored_pixels.
detail::json export_record(const std::string& dir, std::size_t index, const std::string& prefix, bool overlay = false);

// The records to export: `indices` (each checked), then `range` "A:B" (A inclusive, B exclusive),
// then every record whose key equals `key`. Throws usage_error for a malformed range and
// input_error for an index or range beyond the dataset or a key no record has.
std::vector<std::size_t> select_records(const std::string& dir, const std::vector<std::size_t>& indices,
                                        const std::string& range, const std::string& key);

}  // namespace shardpack
