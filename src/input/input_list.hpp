// The input list: the CSV of image paths and labels, read, checked and resolved into samples.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "input/class_table.hpp"
#include "input/field_columns.hpp"

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
    bool classes_optional = false;
    // When not empty: the list's CSV text itself (from --images/--masks); csv_path then only
    // names it in messages, and root must be given.
    std::string list_text;
    std::size_t files_left_out = 0;  // with list_text: files in the folders not listed (folder_input.hpp)
    std::vector<field_spec> fields;  // --field: per-sample fields from other columns (field_columns.hpp)
    unknown_name_policy unknown_name = unknown_name_policy::error;  // --unknown-name: a tag or box class not declared
    // The samples come from the sample stream (build --samples -, pipeline/sample_stream.hpp),
    // not from a list: load_stream_input; rows are then named "sample N 'KEY'" in messages.
    bool from_stream = false;
    std::string list_source;  // with list_text: the options that made it ("--images A --masks B")  // seg without --classes is allowed (`shardpack colors`): no classes
};

// One row of the list. The views point into the input_list and live as long as it does.
struct sample_row {
    std::size_t csv_line = 0;     // 1-based line in the CSV
    std::string_view key;         // the image path exactly as the CSV wrote it
    std::string_view label_key;   // the label cell as written
    std::int32_t class_id = -1;   // classification
};

// The rows are stored compactly, because a list can have millions of them: the two cells of
// every row back to back in one string, and per row only where they start, the line and the
// class id (16 bytes). Paths are resolved when asked for, not stored: they differ from the
// cells only by base_dir.
class input_list {
public:
    task_kind task = task_kind::classification;  // never automatic here
    std::vector<class_entry> classes;
    std::uint64_t csv_digest = 0;  // XXH3-64 of the CSV file's bytes
    bool had_header = false;
    bool from_folders = false;     // made from --images folders: rows are files, not CSV lines (row_origin)
    std::string base_dir;          // relative paths resolve against it: --root, or the CSV's folder (may be "")
    field_table fields;            // --field values, one row per row of the list (empty without --field)
    // For the log: what the list holds that the build does not use or probably misreads.
    std::vector<std::string> notes;     // facts (fields' names found, unknown names ignored)
    std::vector<std::string> warnings;  // columns not used; labels that look like tags, numbers or targets

    std::size_t size() const { return rows_.size(); }
    // The rows of the list, or of a stream the samples it gave (stream_rows, set at its end).
    std::uint64_t row_count() const { return from_stream ? stream_rows : rows_.size(); }
    bool from_stream = false;
    std::shared_ptr<field_cell_parser> stream_fields;  // from_stream with --field: each sample's values as cells
    std::uint64_t stream_rows = 0;
    bool empty() const { return rows_.empty(); }
    sample_row row(std::size_t i) const;

    // The file to open for row i's image: an absolute cell as written, a relative one joined to
    // base_dir with a '/'. The second form writes into `out`, reusing its capacity.
    std::string image_path(std::size_t i) const;
    void image_path(std::size_t i, std::string& out) const;
    // Segmentation: the mask to open, resolved the same way. Classification: "" (no file).
    std::string label_path(std::size_t i) const;
    void label_path(std::size_t i, std::string& out) const;

    // Adds a row (load_input_list does). The key must hold no NUL byte (the CSV parser lets
    // none through) and csv_line must fit 32 bits; else std::invalid_argument.
    void add_row(std::size_t csv_line, std::string_view key, std::string_view label_key);
    void set_class_id(std::size_t i, std::int32_t class_id) { rows_[i].class_id = class_id; }

private:
    struct stored_row {
        std::uint64_t offset;   // in text_: key, a NUL, then the label key up to the next row
        std::uint32_t csv_line;
        std::int32_t class_id;
    };
    std::string text_;
    std::vector<stored_row> rows_;

    void resolve(std::string_view cell, std::string& out) const;
};

// Where a row comes from, for messages: "list.csv:12" (the list's file name and line); for a
// list made from --images folders (list_text), whose lines are no file's, the image file itself
// ("DIR/a/b.png").
std::string row_origin(const input_options& opts, std::size_t csv_line, std::string_view key);

// A sample stream's list (opts.from_stream): no rows; the task (seg or cls, which must be
// given) and the class table from opts.classes_path (required: a class_dict.csv for seg, a
// names list for cls). Throws usage_error and input_error as load_input_list does.
input_list load_stream_input(const input_options& opts);

// Reads opts.csv_path and resolves every row (see input_list.cpp for the header, column and
// task rules). Image and mask files are not opened: the pipeline reports a missing file per
// row. Throws input_error for bad data ("FILE:LINE: reason") and usage_error for bad options.
input_list load_input_list(const input_options& opts);

}  // namespace shardpack
