// Per-sample fields declared at build time (--field NAME:KIND[=SOURCE]): read from CSV cells or
// a COCO-style JSON of boxes, checked per row, and kept per row in their source form until the
// pipeline lays each record out (boxes then follow the record's geometry: field_geometry.hpp).
//
// This is also the entry point for other producers of records (a Python writer): build a
// field_table with declare(), add one row of values with add_row(), then per record
// record_field_bytes() (field_geometry.hpp) with the record's geometry.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "shardpack/detail/fields.hpp"

namespace shardpack {

// One --field option: NAME:KIND, then optionally =COLUMN (a header name or a 0-based index; the
// default is NAME) or, for boxes, =coco:FILE (a COCO-style JSON; rows matched by file name).
struct field_spec {
    std::string name;
    field_kind kind = field_kind::int64;
    std::string column;     // empty: the column named NAME
    std::string coco_path;  // boxes from a COCO JSON instead of a column
    std::string names_path; // --field-names NAME=FILE: the declared tags or box classes, one per line
};

// Parses "NAME:KIND[=SOURCE]"; kinds: int, float, str, int-list, float-list, tags, boxes.
// Throws usage_error naming the option.
field_spec parse_field_spec(const std::string& text);
// Applies "NAME=FILE" (--field-names) to the spec named NAME; usage_error if there is none or
// its kind has no names.
void apply_field_names(std::vector<field_spec>& specs, const std::string& text);

enum class unknown_name_policy { error, ignore };

// A box as the input gives it, in the source image's pixels (before the build's geometry).
struct source_box {
    double x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    std::uint32_t label = 0;
};

// The declared fields and every row's values in their source form, compactly (one byte
// string; per row an offset): values as detail::encode_field_values writes them, except that
// each box is 4 float64 source coordinates and a u32 label (36 bytes).
class field_table {
public:
    const std::vector<field_info>& declarations() const { return decls_; }
    bool empty() const { return decls_.empty(); }
    std::size_t rows() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
    void declare(std::vector<field_info> decls);
    // Appends a row: one value per declaration (boxes in source_boxes, one list per boxes field
    // in declaration order; the value's own `boxes` are ignored).
    void add_row(const std::vector<field_value>& values, const std::vector<std::vector<source_box>>& source_boxes);
    // Row i's source bytes.
    std::string_view row(std::size_t i) const {
        return std::string_view(bytes_).substr(offsets_[i], offsets_[i + 1] - offsets_[i]);
    }

private:
    std::vector<field_info> decls_;
    std::string bytes_;
    std::vector<std::uint64_t> offsets_;
};

// A tags or boxes field's names: declared (--field-names) or found in the data.
struct field_vocabulary {
    std::vector<std::string> names;
    std::unordered_map<std::string, std::uint32_t> id_of;
    bool declared = false;
};

// Appends one row's source bytes (as field_table::row gives them) to `out`.
void append_source_row(const std::vector<field_info>& decls, const std::vector<field_value>& values,
                       const std::vector<std::vector<source_box>>& source_boxes, std::string& out);

// Fields whose values come one row at a time, each as the text of a CSV cell (the sample stream
// of `build --samples -`): the same rules, vocabularies and errors as a CSV column. Tags and
// boxes need their names declared (--field-names): none can be found in data not yet read.
class field_cell_parser {
public:
    // usage: what the options are called in a usage_error ("--samples").
    field_cell_parser(std::vector<field_spec> specs, unknown_name_policy unknown, const std::string& usage);
    const std::vector<field_info>& declarations() const { return decls_; }
    // One row: a cell per declared field, in declaration order; its source bytes into `out`.
    // Throws input_error "field 'NAME' (KIND): ..." for a bad cell (the caller names the row).
    // Not thread-safe (one scratch row).
    void parse(const std::vector<std::string_view>& cells, std::string& out);
    // What the log should say (names ignored by --unknown-name ignore).
    std::vector<std::string> notes() const;

private:
    std::vector<field_spec> specs_;
    unknown_name_policy unknown_;
    std::vector<std::size_t> ignored_;
    std::vector<field_info> decls_;
    std::vector<field_vocabulary> vocab_;
    std::vector<field_value> values_;
    std::vector<std::vector<source_box>> boxes_;
};

// Row i's values from its source bytes: boxes (per boxes field, in declaration order) stay in
// source coordinates in `boxes`; the values' own `boxes` are left empty.
void decode_source_row(const std::vector<field_info>& decls, std::string_view bytes, std::vector<field_value>& values,
                       std::vector<std::vector<source_box>>& boxes);

// What the CSV reader hands over: the header (if any), and per row its cells.
struct field_column_input {
    const std::vector<std::string>* header = nullptr;  // null without a header row
    std::string csv_path;
    unknown_name_policy unknown = unknown_name_policy::error;
};

// Collects the cells of the declared columns while the CSV streams, then resolves names
// (vocabularies), parses every cell and fills a field_table. Errors name FILE:LINE and the field.
class field_column_reader {
public:
    field_column_reader(std::vector<field_spec> specs, field_column_input in);
    // The columns used by fields (to name the unused ones).
    const std::vector<std::size_t>& columns() const { return columns_; }
    // Called with the header (or null) once the columns are decided.
    void start(const std::vector<std::string>* header, std::size_t row_cells);
    void add(std::size_t line, const std::vector<std::string>& cells, std::string_view key);
    // Parses everything; `notes` receives what the log should say (unknown names ignored, ...).
    field_table finish(std::vector<std::string>& notes);

private:
    std::vector<field_spec> specs_;
    field_column_input in_;
    std::vector<std::size_t> columns_;  // per spec: its column, or SIZE_MAX for a COCO source
    std::string cells_;                 // every row's cells of the declared columns, NUL-separated
    std::vector<std::uint64_t> row_at_;
    std::vector<std::uint32_t> lines_;
    std::string keys_;                  // every row's key, NUL-separated (to match COCO file names)
    std::vector<std::uint64_t> key_at_;
};

}  // namespace shardpack
