// An image folder as the input list, instead of a CSV: `--images DIR` with one subfolder per
// class (classification), or `--images DIR --masks DIR` with masks paired to images by their
// path and file stem (segmentation).
#pragma once
#include <string>

#include "input/input_list.hpp"

namespace shardpack {

// Fills o.list_text with the CSV the folders amount to (header image,label; rows in sorted path
// order; image cells relative to `images`, mask cells absolute), o.root with `images`, o.csv_path
// with `images` (messages then say DIR:LINE) and, for masks, o.task = segmentation. Throws
// usage_error for a missing folder, no images, images without a mask (naming a few), or (for
// classification) images outside any class subfolder.
void list_image_folders(const std::string& images, const std::string& masks, input_options& o);

}  // namespace shardpack
