// The input list: the CSV of image paths and labels, read, checked and resolved into samples.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "input/class_table.hpp"

namespace shardpack {

enum class task_kind { automatic, segmentation, classification };
enum class header_mode { detect, present, absent };

struct input_options {
    std::string csv_path;
    std::string root;             // empty: relative paths resolve against the CSV's folder
    header_mode header = header_mode::detect;
    std::string image_col = "0";  // a column name (needs a header) or a 0-based index
    std::string label_col = "1";
    task_kind task = task_kind::automatic;
    std::string classes_path;     // class_dict.csv (seg) or names list (cls); may be empty for cls
};

struct sample_row {
    std::size_t csv_line = 0;     // 1-based line in the CSV
    std::string key;              // the image path exactly as the CSV wrote it
    std::string image_path;       // resolved path to open
    std::string label_path;       // segmentation: resolved mask path
    std::string label_key;        // the label cell as written
    std::int32_t class_id = -1;   // classification
};

struct input_list {
    task_kind task = task_kind::classification;  // never automatic here
    std::vector<class_entry> classes;
    std::vector<sample_row> rows;
    std::uint64_t csv_digest = 0;  // XXH3-64 of the CSV file's bytes
    bool had_header = false;
};

// Reads opts.csv_path and resolves every row (see input_list.cpp for the header, column and
// task rules). Image and mask files are not opened: the pipeline reports a missing file per
// row. Throws input_error for bad data ("FILE:LINE: reason") and usage_error for bad options.
input_list load_input_list(const input_options& opts);

}  // namespace shardpack
