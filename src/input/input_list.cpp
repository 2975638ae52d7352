#include "input/input_list.hpp"

#include <algorithm>
#include <cstring>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <limits>
#include <optional>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <charconv>

#include "errors.hpp"
#include "input/csv_reader.hpp"
#include "input/text_util.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {

namespace {

using namespace input_detail;
namespace fs = std::filesystem;

// --image-col / --label-col: an integer is a 0-based index, anything else a header name.
struct column_spec {
    const char* option;
    std::string text;
    bool by_name = false;
    std::size_t index = 0;
};

column_spec parse_column_spec(const char* option, const std::string& text) {
    column_spec c{option, text};
    if (trim(text).empty()) throw usage_error(std::string(option) + ": empty; give a header name or a 0-based index");
    if (!is_integer(text)) {
        c.by_name = true;
        return c;
    }
    const auto v = integer_value(text);
    if (!v || *v < 0) throw usage_error(std::string(option) + " " + text + ": a column index must be 0 or more");
    c.index = static_cast<std::size_t>(*v);
    return c;
}

std::string join(const std::vector<std::string>& items, std::size_t limit = 50) {
    std::string out;
    for (std::size_t i = 0; i < items.size() && i < limit; ++i) out += (i ? ", " : "") + items[i];
    if (items.size() > limit) out += ", ... (" + std::to_string(items.size()) + " in all)";
    return out;
}

// Exact match first, then case-insensitive (ignoring surrounding spaces) if that is unique.
std::size_t find_named_column(const column_spec& c, const csv_row& header, const std::string& csv) {
    const auto& cells = header.cells;
    if (const auto it = std::find(cells.begin(), cells.end(), c.text); it != cells.end()) return std::size_t(it - cells.begin());
    std::vector<std::size_t> hits;
    for (std::size_t i = 0; i < cells.size(); ++i)
        if (lower_ascii(trim(cells[i])) == lower_ascii(trim(c.text))) hits.push_back(i);
    if (hits.size() == 1) return hits.front();
    const std::string where_header = csv + ":" + std::to_string(header.line);
    if (hits.empty())
        throw usage_error(std::string(c.option) + ": column '" + c.text + "' not found in header of " + where_header +
                          "; columns are: " + join(cells));
    throw usage_error(std::string(c.option) + ": column '" + c.text + "' matches several columns (ignoring case) in header of " +
                      where_header + "; columns are: " + join(cells) + "; give the exact name or an index");
}

// Relative paths resolve against `base` (--root, or the CSV's folder); absolute ones are kept.
// Plain string work: std::filesystem::path costs more than the rest of the list on 1M rows.
void resolve_into(std::string_view base, std::string_view cell, std::string& out) {
    if (base.empty() || (!cell.empty() && cell.front() == '/')) {
        out.assign(cell);
        return;
    }
    out.clear();
    out.reserve(base.size() + 1 + cell.size());
    out += base;
    if (out.back() != '/') out += '/';
    out += cell;
}

bool is_existing_file(const std::string& base, std::string_view cell) {
    if (cell.empty()) return false;
    std::string path;
    resolve_into(base, cell, path);
    std::error_code ec;
    return fs::is_regular_file(path, ec);
}

// A header cell such as "image", "Mask", "image_path" or "class id": only column words,
// joined by '_', '-' or spaces.
bool is_column_word(std::string_view cell) {
    static const std::set<std::string, std::less<>> words = {
        "image", "images", "img", "imgs", "picture", "photo", "label", "labels", "mask", "masks", "annotation",
        "annotations", "gt", "ground", "truth", "groundtruth", "target", "targets", "seg", "segmentation", "path",
        "paths", "file", "files", "filename", "filenames", "fname", "name", "class", "classes", "cls", "category",
        "categories", "id", "idx", "index", "input", "output", "src", "source", "x", "y", "rel", "relative", "abs",
        "absolute", "key", "sample", "rgb"};
    const std::string s = lower_ascii(trim(cell));
    std::size_t start = 0, tokens = 0;
    while (start <= s.size()) {
        const std::size_t end = std::min(s.find_first_of("_- ", start), s.size());
        if (end > start) {
            if (!words.count(std::string_view(s).substr(start, end - start))) return false;
            ++tokens;
        }
        start = end + 1;
    }
    return tokens > 0;
}

// The image and label columns a header names: the first cell that is an image word (image,
// img, picture, photo, file, path, filename, ...) and the first that is a label word (mask,
// label, annotation, gt, target, class, category, ...), joined words such as image_path included.
std::pair<std::optional<std::size_t>, std::optional<std::size_t>> columns_named_by_header(const csv_row& header) {
    static const std::set<std::string, std::less<>> image_words = {
        "image", "images", "img", "imgs", "picture", "photo", "file", "files", "filename", "fname", "path", "input", "src",
        "source", "rgb", "x"};
    static const std::set<std::string, std::less<>> label_words = {
        "mask", "masks", "label", "labels", "annotation", "annotations", "gt", "groundtruth", "target", "targets", "seg",
        "segmentation", "class", "classes", "cls", "category", "categories", "y"};
    auto kind = [](const std::string& cell) {  // 1 image, 2 label, 0 neither; label words win in "mask_path"
        const std::string s = lower_ascii(trim(cell));
        int k = 0;
        std::size_t start = 0;
        while (start <= s.size()) {
            const std::size_t end = std::min(s.find_first_of("_- ", start), s.size());
            const std::string_view w = std::string_view(s).substr(start, end - start);
            if (label_words.count(w)) return 2;
            if (image_words.count(w)) k = 1;
            start = end + 1;
        }
        return k;
    };
    std::optional<std::size_t> image, label;
    for (std::size_t i = 0; i < header.cells.size(); ++i) {
        if (!is_column_word(header.cells[i])) continue;
        const int k = kind(header.cells[i]);
        if (k == 1 && !image) image = i;
        if (k == 2 && !label) label = i;
    }
    return {image, label};
}

bool looks_like_data(std::string_view cell) {
    return cell.find_first_of("/\\.") != std::string_view::npos || is_integer(cell);
}

// The header rule for header_mode::detect, in order:
//  1. --image-col or --label-col is a name: there must be a header (the caller handles it).
//  2. The first row's image cell, resolved, is an existing file: no header.
//  3. Else the second row's image cell is an existing file: the first row is a header.
//  4. Else (files not there yet, or a one-row list): a header if the first row looks like one:
//     its image and label cells are column words ("image", "label", "mask", "path", "file",
//     "class", or such words joined, e.g. "image_path") and no cell looks like a path or a
//     number. Otherwise no header; a missing first file is then reported like any other.
bool detect_header(const std::vector<csv_row>& rows, std::size_t image_col, std::size_t label_col,
                   const std::string& base) {
    if (rows.empty() || rows[0].cells.size() <= image_col) return false;
    const auto& first = rows[0].cells;
    if (is_existing_file(base, first[image_col])) return false;
    if (rows.size() > 1 && rows[1].cells.size() > image_col && is_existing_file(base, rows[1].cells[image_col]))
        return true;
    if (first.size() <= label_col || !is_column_word(first[image_col]) || !is_column_word(first[label_col])) return false;
    return std::none_of(first.begin(), first.end(), [](const std::string& c) { return looks_like_data(c); });
}

bool has_image_extension(std::string_view path) {
    const std::string p = lower_ascii(path);
    for (const char* ext : {".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".webp", ".gif", ".ppm", ".pgm"}) {
        const std::string_view e(ext);
        if (p.size() > e.size() && p.compare(p.size() - e.size(), e.size(), e) == 0) return true;
    }
    return false;
}

// "FILE:LINE: " for a CSV row; for a row of --images folders, the image file ("DIR/cat/1.png: ").
std::string where_row(const input_list& list, const input_options& o, const sample_row& r) {
    return list.from_folders ? row_origin(o, r.csv_line, r.key) + ": " : where(o.csv_path, r.csv_line);
}

// Classification ids. With a names list, a label is a name in it or an id in [0, n). Without
// one, labels are all ids (classes "0".."max") or all names (classes: the sorted unique names).
std::vector<class_entry> assign_class_ids(input_list& list, const input_options& o) {
    const std::string& csv = o.csv_path;
    std::vector<class_entry> classes;
    std::unordered_map<std::string, std::int32_t> id_of;
    if (!o.classes_path.empty()) {
        classes = load_class_names(o.classes_path);
        for (std::size_t i = 0; i < classes.size(); ++i) id_of.emplace(classes[i].name, std::int32_t(i));
    }
    const bool from_file = !classes.empty();
    std::optional<sample_row> first_id, first_name;
    for (std::size_t i = 0; i < list.size() && !(first_id && first_name); ++i) {
        const sample_row r = list.row(i);
        std::optional<sample_row>& slot = is_integer(r.label_key) ? first_id : first_name;
        if (!slot) slot = r;
    }
    if (!from_file && first_id && first_name) {
        const bool id_later = first_id->csv_line > first_name->csv_line;
        const sample_row& later = id_later ? *first_id : *first_name;
        const sample_row& earlier = id_later ? *first_name : *first_id;
        throw input_error(where_row(list, o, later) + "label '" + std::string(later.label_key) + "' is a class " +
                          (id_later ? "id" : "name") + " but " +
                          (list.from_folders ? row_origin(o, earlier.csv_line, earlier.key) : "line " + std::to_string(earlier.csv_line)) +
                          " has the class " +
                          (id_later ? "name" : "id") + " '" + std::string(earlier.label_key) +
                          "'; use ids or names throughout, or give --classes with the class names");
    }
    if (!from_file && first_name) {
        std::set<std::string, std::less<>> names;  // std::string's order is byte-wise
        for (std::size_t i = 0; i < list.size(); ++i)
            if (const auto t = trim(list.row(i).label_key); names.find(t) == names.end()) names.emplace(t);
        if (names.size() > max_class_count)
            throw input_error(csv + ": " + std::to_string(names.size()) + " distinct class names; at most " +
                              std::to_string(max_class_count));
        for (const auto& n : names) {
            id_of.emplace(n, std::int32_t(classes.size()));
            classes.push_back({n});
        }
    }
    const std::int64_t id_limit = from_file ? std::int64_t(classes.size()) : std::int64_t(max_class_count);
    std::int64_t max_id = -1;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const sample_row row = list.row(i);
        const std::string label(trim(row.label_key));
        const auto named = id_of.find(label);
        std::optional<std::int64_t> id;
        if (is_integer(label)) {
            id = integer_value(label);
            if (!id || *id < 0 || *id >= id_limit)
                throw input_error(where_row(list, o, row) + "class id '" + label + "' is out of range 0.." +
                                  std::to_string(id_limit - 1) +
                                  (from_file ? " (" + o.classes_path + " lists " + std::to_string(classes.size()) + " classes)" : ""));
            if (named != id_of.end() && named->second != *id)
                throw input_error(where_row(list, o, row) + "label '" + label + "' is ambiguous: it is the class id " + label +
                                  " and also the name of class " + std::to_string(named->second) + " in " + o.classes_path);
        } else if (named != id_of.end()) {
            id = named->second;
        } else {
            std::vector<std::string> known;
            for (const auto& c : classes) known.push_back(c.name);
            throw input_error(where_row(list, o, row) + "label '" + label + "' is not a class in " + o.classes_path +
                              " (classes: " + join(known, 20) + ")");
        }
        list.set_class_id(i, static_cast<std::int32_t>(*id));
        max_id = std::max(max_id, *id);
    }
    if (!from_file && !first_name)
        for (std::int64_t c = 0; c <= max_id; ++c) classes.push_back({std::to_string(c)});
    return classes;
}

// Labels that are probably not class labels (issue 31): lists of tags, numbers that are
// measurements, integer targets with about as many values as rows. Each warning names the
// option the user probably wanted; `column` names the label column for it.
void warn_about_labels(input_list& list, const std::string& column) {
    std::vector<std::string> list_like, number_like;
    std::set<std::string, std::less<>> seen;
    bool all_ids = true;
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string_view label = trim(list.row(i).label_key);
        all_ids = all_ids && is_integer(label);
        if (!seen.emplace(label).second) continue;
        if (label.find_first_of(";|") != std::string_view::npos && list_like.size() < 3) list_like.emplace_back(label);
        if (!is_integer(label) && number_like.size() < 3) {
            double v = 0;
            const std::string_view t = !label.empty() && label.front() == '+' ? label.substr(1) : label;
            const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
            if (!t.empty() && ec == std::errc() && end == t.data() + t.size()) number_like.emplace_back(label);
        }
    }
    const auto quoted = [](const std::vector<std::string>& v) {
        std::string out;
        for (std::size_t i = 0; i < v.size(); ++i) out += (i ? ", '" : "'") + v[i] + "'";
        return out;
    };
    if (!list_like.empty())
        list.warnings.push_back("class names such as " + quoted(list_like) + " look like lists of tags; for multi-label "
                                "data declare the column with --field NAME:tags" + (column.empty() ? "" : "=" + column) +
                                " (tags separated by ';', '|' or ',')");
    if (!number_like.empty())
        list.warnings.push_back("class names such as " + quoted(number_like) + " are numbers; for a regression target "
                                "declare the column with --field NAME:float" + (column.empty() ? "" : "=" + column));
    // Classification needs several samples a class: about as many ids as rows is a measurement.
    if (all_ids && seen.size() >= 50 && seen.size() * 2 > list.size())
        list.warnings.push_back("the label column holds " + std::to_string(seen.size()) + " distinct integers over " +
                                std::to_string(list.size()) + " rows, implausibly many classes; for an integer target "
                                "declare the column with --field NAME:int" + (column.empty() ? "" : "=" + column));
}

}  // namespace

sample_row input_list::row(std::size_t i) const {
    const stored_row& r = rows_[i];
    const std::size_t end = i + 1 < rows_.size() ? rows_[i + 1].offset : text_.size();
    const std::string_view cells = std::string_view(text_).substr(r.offset, end - r.offset);
    const std::size_t nul = cells.find('\0');
    return {r.csv_line, cells.substr(0, nul), cells.substr(nul + 1), r.class_id};
}

void input_list::resolve(std::string_view cell, std::string& out) const { resolve_into(base_dir, cell, out); }

std::string input_list::image_path(std::size_t i) const {
    std::string out;
    image_path(i, out);
    return out;
}

void input_list::image_path(std::size_t i, std::string& out) const { resolve(row(i).key, out); }

std::string input_list::label_path(std::size_t i) const {
    std::string out;
    label_path(i, out);
    return out;
}

void input_list::label_path(std::size_t i, std::string& out) const {
    if (task == task_kind::segmentation) resolve(row(i).label_key, out);
    else out.clear();
}

std::string row_origin(const input_options& o, std::size_t csv_line, std::string_view key) {
    if (o.from_stream) return "sample " + std::to_string(csv_line) + " '" + std::string(key) + "'";
    if (!o.list_text.empty()) return o.root + (!o.root.empty() && o.root.back() == '/' ? "" : "/") + std::string(key);
    return std::filesystem::path(o.csv_path).filename().string() + ":" + std::to_string(csv_line);
}

void input_list::add_row(std::size_t csv_line, std::string_view key, std::string_view label_key) {
    if (csv_line > std::numeric_limits<std::uint32_t>::max())
        throw std::invalid_argument("input_list: line " + std::to_string(csv_line) + " does not fit 32 bits");
    if (key.find('\0') != std::string_view::npos) throw std::invalid_argument("input_list: a key with a NUL byte");
    rows_.push_back({text_.size(), static_cast<std::uint32_t>(csv_line), -1});
    text_.append(key);
    text_.push_back('\0');
    text_.append(label_key);
}

input_list load_stream_input(const input_options& o) {
    if (o.task == task_kind::automatic) throw usage_error("--samples needs --task seg or --task cls");
    if (o.classes_path.empty())
        throw usage_error("--samples needs --classes: a class_dict.csv (seg) or a list of class names (cls)");
    input_list list;
    list.from_stream = true;
    list.task = o.task;
    list.classes = o.task == task_kind::segmentation ? load_class_dict(o.classes_path) : load_class_names(o.classes_path);
    if (!o.fields.empty()) {  // each sample brings its values (cells, as a CSV's): declared here, parsed as they come
        list.stream_fields = std::make_shared<field_cell_parser>(o.fields, o.unknown_name, "--samples");
        list.fields.declare(list.stream_fields->declarations());
    }
    return list;
}

namespace {

// The options that can be refused before the list is read.
void check_list_options(const input_options& o, const column_spec& image_spec, const column_spec& label_spec) {
    const bool named = image_spec.by_name || label_spec.by_name;
    if (named && o.header == header_mode::absent)
        throw usage_error("--no-header: columns can then only be given by 0-based index, not by name ('" +
                          (image_spec.by_name ? image_spec.text : label_spec.text) + "')");
    if (o.task == task_kind::segmentation && o.classes_path.empty() && !o.classes_optional)
        throw usage_error("--task seg needs --classes class_dict.csv (a header row name,r,g,b and one class per row)");
    if (!o.root.empty()) {
        std::error_code ec;
        if (!fs::is_directory(o.root, ec)) throw usage_error("--root " + o.root + ": not a folder");
    }
}

// Takes a CSV list's records into the list as they are parsed. The header and named columns
// are decided on the first two records, which are held back until then. An error in the data
// or the options found before the end is kept and thrown once the whole file has parsed, so
// that, as when the file was parsed first, a syntax error anywhere is reported before it.
class row_taker {
public:
    row_taker(const input_options& o, input_list& list, const column_spec& image_spec, const column_spec& label_spec)
        : o_(o), csv_(o.csv_path), list_(list), image_spec_(image_spec), label_spec_(label_spec),
          named_(image_spec.by_name || label_spec.by_name) {
        if (!o.fields.empty()) fields.emplace(o.fields, field_column_input{nullptr, csv_, o.unknown_name});
    }

    void take_all(csv_stream& records) {
        bool head_taken = false;
        for (csv_row row{}; records.next(row);) {
            if (head_taken) {
                unless_deferred([&] { take_row(row); });
                continue;
            }
            head_.push_back(std::move(row));
            if (head_.size() == 2) {
                take_head();
                head_taken = true;
            }
        }
        if (!head_taken) take_head();
        if (deferred_) std::rethrow_exception(deferred_);
    }

    std::optional<field_column_reader> fields;
    std::string label_column_name;

private:
    const input_options& o_;
    const std::string& csv_;
    input_list& list_;
    const column_spec& image_spec_;
    const column_spec& label_spec_;
    const bool named_;
    std::vector<csv_row> head_;
    std::size_t image_col_ = 0, label_col_ = 0, needed_ = 0;
    std::exception_ptr deferred_;

    void decide_columns() {
        if (named_ && head_.empty())
            throw input_error(csv_ + ": the file is empty; expected a header row naming the columns");
        list_.had_header = o_.header == header_mode::present || named_ ||
                           (o_.header == header_mode::detect &&
                            detect_header(head_, image_spec_.index, label_spec_.index, list_.base_dir));
        image_col_ = image_spec_.by_name ? find_named_column(image_spec_, head_[0], csv_) : image_spec_.index;
        label_col_ = label_spec_.by_name ? find_named_column(label_spec_, head_[0], csv_) : label_spec_.index;
        // A header that names its columns picks them when no column was chosen: "mask,image" reads right.
        if (list_.had_header && o_.image_col == "0" && o_.label_col == "1" && !head_.empty()) {
            const auto [named_image, named_label] = columns_named_by_header(head_[0]);
            if (named_image && named_label && *named_image != *named_label) {
                image_col_ = *named_image;
                label_col_ = *named_label;
            }
        }
        if (image_col_ == label_col_)
            throw usage_error("--image-col " + o_.image_col + " and --label-col " + o_.label_col + " are the same column (" +
                              std::to_string(image_col_) + ")");
        needed_ = std::max(image_col_, label_col_) + 1;
        if (head_.empty()) return;
        const std::vector<std::string>* header = list_.had_header ? &head_[0].cells : nullptr;
        if (fields) fields->start(header, head_[0].cells.size());
        label_column_name = header && label_col_ < header->size() ? (*header)[label_col_] : std::to_string(label_col_);
        if (o_.list_text.empty()) warn_unused_columns(header);
    }

    // Columns the build does not use are named: nothing in the list is dropped silently.
    void warn_unused_columns(const std::vector<std::string>* header) {
        std::vector<std::string> unused;
        for (std::size_t c = 0; c < head_[0].cells.size(); ++c) {
            if (c == image_col_ || c == label_col_) continue;
            if (fields && std::find(fields->columns().begin(), fields->columns().end(), c) != fields->columns().end()) continue;
            unused.push_back(header ? "'" + head_[0].cells[c] + "'" : std::to_string(c));
        }
        if (!unused.empty())
            list_.warnings.push_back(std::string(unused.size() == 1 ? "column " : "columns ") + join(unused) + " of " + csv_ +
                                     (unused.size() == 1 ? " is" : " are") + " not packed; keep one with --field NAME:KIND=COLUMN "
                                     "(kinds: int, float, str, int-list, float-list, tags, boxes)");
    }

    void take_row(const csv_row& row) {
        if (row.line > std::numeric_limits<std::uint32_t>::max())
            throw input_error(where(csv_, row.line) + "more than 4294967295 lines; split the list");
        if (row.cells.size() < needed_)
            throw input_error(where(csv_, row.line) + "expected at least " + std::to_string(needed_) + " columns, found " +
                              std::to_string(row.cells.size()));
        if (row.cells[image_col_].empty())
            throw input_error(where(csv_, row.line) + "empty image path (column " + std::to_string(image_col_) + ")");
        if (trim(row.cells[label_col_]).empty())
            throw input_error(where(csv_, row.line) + "empty label (column " + std::to_string(label_col_) + ")");
        list_.add_row(row.line, row.cells[image_col_], row.cells[label_col_]);
        if (fields) fields->add(row.line, row.cells, row.cells[image_col_]);
    }

    template <class Step>
    void unless_deferred(Step&& step) {
        if (deferred_) return;
        try {
            step();
        } catch (const input_error&) {
            deferred_ = std::current_exception();
        } catch (const usage_error&) {
            deferred_ = std::current_exception();
        }
    }

    void take_head() {
        unless_deferred([&] {
            decide_columns();
            for (std::size_t i = list_.had_header ? 1 : 0; i < head_.size(); ++i) take_row(head_[i]);
        });
        head_.clear();
        head_.shrink_to_fit();
    }
};

// What the rows' pass leaves beside the list itself.
struct parsed_rows {
    std::optional<field_column_reader> fields;
    std::string label_column_name;
};

// The CSV is parsed as it is read, and each record is dropped once its two cells are in the
// list: neither the text nor all records are ever in memory at once.
parsed_rows read_rows(const input_options& o, input_list& list, const column_spec& image_spec, const column_spec& label_spec) {
    const std::string& csv = o.csv_path;
    if (o.list_text.empty()) {
        std::error_code ec;
        if (fs::is_directory(csv, ec))
            throw usage_error("--csv " + csv + ": this is a folder; --csv takes a CSV file with one row per sample "
                              "(image path, then mask path or class), or give --images DIR (one subfolder per class) "
                              "or --images DIR --masks DIR (pairs by file name) instead");
    }
    std::optional<text_file_reader> file;
    if (o.list_text.empty()) file.emplace(csv);
    std::size_t text_read = 0;
    XXH3_state_t digest;
    XXH3_64bits_reset(&digest);
    csv_stream records(
        [&](char* buf, std::size_t n) {
            std::size_t got = 0;
            if (file) {
                got = file->read(buf, n);
            } else {
                got = std::min(n, o.list_text.size() - text_read);
                std::memcpy(buf, o.list_text.data() + text_read, got);
                text_read += got;
            }
            XXH3_64bits_update(&digest, buf, got);
            return got;
        },
        csv);
    row_taker rows(o, list, image_spec, label_spec);
    rows.take_all(records);
    list.csv_digest = XXH3_64bits_digest(&digest);
    return {std::move(rows.fields), std::move(rows.label_column_name)};
}

// The task rule for task_kind::automatic: every label an integer -> classification by id;
// else the first label is an existing file or has an image extension -> segmentation;
// else classification by name. (An empty list counts as classification.)
task_kind decide_task(const input_options& o, const input_list& list) {
    if (o.task != task_kind::automatic) return o.task;
    bool all_ids = true;
    for (std::size_t i = 0; i < list.size() && all_ids; ++i) all_ids = is_integer(list.row(i).label_key);
    const bool mask_like = !list.empty() && (is_existing_file(list.base_dir, list.row(0).label_key) ||
                                             has_image_extension(list.row(0).label_key));
    const task_kind task = !all_ids && mask_like ? task_kind::segmentation : task_kind::classification;
    if (task == task_kind::segmentation && o.classes_path.empty())
        throw usage_error(where(o.csv_path, list.row(0).csv_line) + "the label '" + std::string(list.row(0).label_key) +
                          "' is a mask image, so this is a segmentation list, which needs --classes class_dict.csv "
                          "(or give --task cls if the labels are class names)");
    return task;
}

}  // namespace

input_list load_input_list(const input_options& o) {
    if (o.csv_path.empty()) throw usage_error("no input list; give --csv LIST");
    const column_spec image_spec = parse_column_spec("--image-col", o.image_col);
    const column_spec label_spec = parse_column_spec("--label-col", o.label_col);
    check_list_options(o, image_spec, label_spec);
    input_list list;
    list.from_folders = !o.list_text.empty();
    list.base_dir = o.root.empty() ? fs::path(o.csv_path).parent_path().string() : o.root;
    parsed_rows parsed = read_rows(o, list, image_spec, label_spec);
    list.task = decide_task(o, list);
    if (list.task == task_kind::segmentation) {
        if (!o.classes_path.empty()) list.classes = load_class_dict(o.classes_path);
    } else {
        list.classes = assign_class_ids(list, o);
        if (o.classes_path.empty()) warn_about_labels(list, list.from_folders ? std::string() : parsed.label_column_name);
    }
    if (parsed.fields) list.fields = parsed.fields->finish(list.notes);
    return list;
}

}  // namespace shardpack
