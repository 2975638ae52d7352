// An image folder as the input list, instead of a CSV: `--images DIR` with one subfolder per
// class (classification), or `--images DIR --masks DIR` with masks paired to images by their
// path and file stem (segmentation), optionally through a suffix (`--mask-suffix _L`: the mask
// of a/img_0.png is a/img_0_L.png, any extension, as CamVid names them).
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "input/input_list.hpp"

namespace shardpack {

struct image_folder_options {
    std::string images;        // --images DIR
    std::string masks;         // --masks DIR (may be DIR itself when mask_suffix tells masks apart)
    std::string mask_suffix;   // --mask-suffix: a mask's stem is the image's stem plus this
    std::string image_suffix;  // --image-suffix: taken off an image's stem before pairing (Cityscapes' _leftImg8bit)
};

// A file the folders hold that is not in the list, and why (for the summary, and one line each
// with -v).
struct left_out_file {
    std::string path;    // DIR/relative path
    std::string reason;  // "not a .png, .jpg, .jpeg, .tif or .tiff file", "a FIFO, not a regular file", "a mask without an image", ...
};

struct folder_listing {
    std::string source;                // "--images DIR --masks DIR ..." as the commands name it
    std::size_t images = 0;            // rows listed
    std::vector<left_out_file> left_out;  // sorted by path
    // "3 files left out: 1 x not a .png, .jpg, .jpeg, .tif or .tiff file, 2 x a mask without an image"; empty when none.
    std::string left_out_summary() const;
};

// Fills o.list_text with the CSV the folders amount to (header image,label; rows in sorted path
// order; image cells relative to `images`, mask cells absolute), o.root with `images`, o.csv_path
// with `images`, o.list_source with the options and, for masks, o.task = segmentation.
// Throws usage_error for a missing folder, no images, images without a mask (naming a few, and
// the --mask-suffix that would pair them when the masks' names show one), two masks for one image
// or masks whose names differ only in case (naming both), and (for classification) images
// outside any class subfolder; such an error also names (up to 5 of) the files left out, those
// named like images first: a FIFO, socket or device named like the missing mask is said, not
// hidden. Returns what it listed and what it left out.
folder_listing list_image_folders(const image_folder_options& folders, input_options& o);

// Logs the listing: one info line (pairs and what was left out, by reason), and with -v (debug)
// one line per file left out.
void log_folder_listing(const folder_listing& listing);

}  // namespace shardpack
