#include "input/field_columns.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <unordered_map>

#include "errors.hpp"
#include "input/class_table.hpp"
#include "input/text_util.hpp"
#include "io/input_file.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack {

using namespace input_detail;
using detail::json;

namespace {

constexpr std::size_t no_column = std::numeric_limits<std::size_t>::max();
// A COCO file of a few hundred thousand annotations (COCO val2017's is 25 MB).
constexpr std::uint64_t max_coco_bytes = std::uint64_t(512) << 20;
constexpr std::size_t source_box_bytes = 36;

const std::map<std::string, field_kind, std::less<>>& kind_words() {
    static const std::map<std::string, field_kind, std::less<>> words = {
        {"int", field_kind::int64},           {"float", field_kind::float64},           {"str", field_kind::string},
        {"int-list", field_kind::int64_list}, {"float-list", field_kind::float64_list}, {"tags", field_kind::tags},
        {"boxes", field_kind::boxes}};
    return words;
}

std::optional<double> number_value(std::string_view s) {
    s = trim(s);
    if (!s.empty() && s.front() == '+') s.remove_prefix(1);
    double v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
    return v;
}

// Splits at any of `seps`, trims each piece, drops empty pieces.
std::vector<std::string_view> split_any(std::string_view s, std::string_view seps) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    while (start <= s.size()) {
        const std::size_t end = std::min(s.find_first_of(seps, start), s.size());
        const std::string_view piece = trim(s.substr(start, end - start));
        if (!piece.empty()) out.push_back(piece);
        start = end + 1;
    }
    return out;
}

// "[1, 2]" or "1 2" or "1;2": the brackets of a JSON-style list are optional.
std::string_view strip_brackets(std::string_view s) {
    s = trim(s);
    if (s.size() >= 2 && s.front() == '[' && s.back() == ']') s = s.substr(1, s.size() - 2);
    return s;
}

void put_u32(std::string& out, std::uint32_t v) {
    unsigned char b[4];
    detail::store_u32(b, v);
    out.append(reinterpret_cast<const char*>(b), 4);
}

using vocabulary = field_vocabulary;

// A label's pieces: the tags of a tags cell, or each box's label in a boxes cell.
std::vector<std::string_view> labels_in(field_kind kind, std::string_view cell) {
    std::vector<std::string_view> out;
    if (kind == field_kind::tags) return split_any(strip_brackets(cell), ";|,");
    for (std::string_view b : split_any(cell, ";")) {
        const auto parts = split_any(strip_brackets(b), " \t,");
        if (parts.size() == 5) out.push_back(parts[4]);
    }
    return out;
}

// Field `s`'s cell into `v` (boxes into `list`), by the rules of a CSV column. `at` prefixes
// errors (the row's place); `ignored` counts names dropped by --unknown-name ignore.
void parse_cell(const field_spec& s, std::string_view cell, const vocabulary& vocab, unknown_name_policy unknown,
                const std::string& at, std::size_t& ignored, field_value& v, std::vector<source_box>& list) {
    const std::string bad = at + "field '" + s.name + "' (" + detail::field_kind_name(s.kind) + "): ";
    const auto label_id = [&](std::string_view label) -> std::optional<std::uint32_t> {
        if (const auto it = vocab.id_of.find(std::string(label)); it != vocab.id_of.end()) return it->second;
        if (is_integer(label)) {
            const auto id = integer_value(label);
            if (id && *id >= 0 && *id < std::int64_t(vocab.names.size())) return std::uint32_t(*id);
        }
        if (unknown == unknown_name_policy::ignore) {
            ++ignored;
            return std::nullopt;
        }
        throw input_error(at + "field '" + s.name + "': '" + std::string(label) + "' is not one of its " +
                          std::to_string(vocab.names.size()) + " names" +
                          (vocab.declared ? " in " + s.names_path + " (--unknown-name ignore drops such names, counted)" : ""));
    };
    switch (s.kind) {
        case field_kind::int64: {
            const auto i = is_integer(cell) ? integer_value(cell) : std::nullopt;
            if (!i) throw input_error(bad + "'" + std::string(cell) + "' is not a 64-bit integer");
            v.ints.push_back(*i);
            break;
        }
        case field_kind::float64: {
            const auto x = number_value(cell);
            if (!x) throw input_error(bad + "'" + std::string(cell) + "' is not a finite number");
            v.floats.push_back(*x);
            break;
        }
        case field_kind::string: v.text.assign(cell); break;
        case field_kind::int64_list:
        case field_kind::float64_list:
            for (std::string_view item : split_any(strip_brackets(cell), " \t,;")) {
                if (s.kind == field_kind::int64_list) {
                    const auto i = is_integer(item) ? integer_value(item) : std::nullopt;
                    if (!i) throw input_error(bad + "'" + std::string(item) + "' is not a 64-bit integer");
                    v.ints.push_back(*i);
                } else {
                    const auto x = number_value(item);
                    if (!x) throw input_error(bad + "'" + std::string(item) + "' is not a finite number");
                    v.floats.push_back(*x);
                }
            }
            break;
        case field_kind::tags: {
            for (std::string_view tag : labels_in(s.kind, cell))
                if (const auto id = label_id(tag)) v.ids.push_back(*id);
            std::sort(v.ids.begin(), v.ids.end());
            v.ids.erase(std::unique(v.ids.begin(), v.ids.end()), v.ids.end());
            break;
        }
        case field_kind::boxes:
            for (std::string_view b : split_any(cell, ";")) {
                const auto parts = split_any(strip_brackets(b), " \t,");
                if (parts.size() != 5)
                    throw input_error(bad + "'" + std::string(b) + "' is not a box 'x0 y0 x1 y1 label' (boxes separated by ';')");
                double c[4];
                for (int j = 0; j < 4; ++j) {
                    const auto x = number_value(parts[j]);
                    if (!x) throw input_error(bad + "'" + std::string(parts[j]) + "' is not a finite number");
                    c[j] = *x;
                }
                if (const auto id = label_id(parts[4])) list.push_back({c[0], c[1], c[2], c[3], *id});
            }
            break;
    }
}

// A declared list of names (--field-names), as a vocabulary.
vocabulary declared_vocabulary(const field_spec& s) {
    vocabulary v;
    for (const auto& c : load_class_names(s.names_path)) v.names.push_back(c.name);
    v.declared = true;
    for (std::size_t i = 0; i < v.names.size(); ++i) v.id_of.emplace(v.names[i], std::uint32_t(i));
    return v;
}

}  // namespace

field_spec parse_field_spec(const std::string& text) {
    const std::string usage = "--field '" + text + "': ";
    const std::size_t colon = text.find(':');
    if (colon == std::string::npos || colon == 0)
        throw usage_error(usage + "expected NAME:KIND[=COLUMN] (kinds: int, float, str, int-list, float-list, tags, boxes)");
    field_spec f;
    f.name = text.substr(0, colon);
    const std::size_t eq = text.find('=', colon + 1);
    const std::string kind = text.substr(colon + 1, eq == std::string::npos ? std::string::npos : eq - colon - 1);
    const auto k = kind_words().find(kind);
    if (k == kind_words().end())
        throw usage_error(usage + "unknown kind '" + kind + "' (kinds: int, float, str, int-list, float-list, tags, boxes)");
    f.kind = k->second;
    if (f.name.size() > detail::max_field_name_bytes) throw usage_error(usage + "a field name has at most 256 bytes");
    if (eq != std::string::npos) {
        const std::string source = text.substr(eq + 1);
        if (source.rfind("coco:", 0) == 0) {
            if (f.kind != field_kind::boxes) throw usage_error(usage + "coco:FILE is a source of boxes only");
            f.coco_path = source.substr(5);
            if (f.coco_path.empty()) throw usage_error(usage + "coco: needs a file");
        } else {
            if (trim(source).empty()) throw usage_error(usage + "empty column after '='");
            f.column = source;
        }
    }
    return f;
}

void apply_field_names(std::vector<field_spec>& specs, const std::string& text) {
    const std::size_t eq = text.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
        throw usage_error("--field-names '" + text + "': expected NAME=FILE (the names of a tags or boxes field, one per line)");
    const std::string name = text.substr(0, eq);
    for (auto& s : specs)
        if (s.name == name) {
            if (!detail::has_vocabulary(s.kind))
                throw usage_error("--field-names " + text + ": field '" + name + "' is " + detail::field_kind_name(s.kind) +
                                  "; only tags and boxes fields have names");
            s.names_path = text.substr(eq + 1);
            return;
        }
    throw usage_error("--field-names " + text + ": no --field is named '" + name + "'");
}

void field_table::declare(std::vector<field_info> decls) {
    if (auto why = detail::fields_problem(decls); !why.empty()) throw usage_error("--field: " + why);
    decls_ = std::move(decls);
    bytes_.clear();
    offsets_.assign(1, 0);
}

void append_source_row(const std::vector<field_info>& decls, const std::vector<field_value>& values,
                       const std::vector<std::vector<source_box>>& source_boxes, std::string& out) {
    if (values.size() != decls.size()) throw std::invalid_argument("append_source_row: one value per declared field");
    // Each value as a record holds it, except boxes, which keep their source coordinates.
    std::size_t box_field = 0;
    std::vector<field_value> one(1);
    for (std::size_t i = 0; i < decls.size(); ++i) {
        if (decls[i].kind != field_kind::boxes) {
            std::vector<unsigned char> piece;
            one[0] = values[i];
            detail::encode_field_values({decls[i]}, one, piece);
            out.append(reinterpret_cast<const char*>(piece.data()), piece.size());
        } else {
            const auto& list = source_boxes.at(box_field++);
            put_u32(out, static_cast<std::uint32_t>(list.size()));
            for (const source_box& b : list) {
                unsigned char q[source_box_bytes];
                detail::store_f64(q, b.x0);
                detail::store_f64(q + 8, b.y0);
                detail::store_f64(q + 16, b.x1);
                detail::store_f64(q + 24, b.y1);
                detail::store_u32(q + 32, b.label);
                out.append(reinterpret_cast<const char*>(q), sizeof q);
            }
        }
    }
}

void field_table::add_row(const std::vector<field_value>& values, const std::vector<std::vector<source_box>>& source_boxes) {
    append_source_row(decls_, values, source_boxes, bytes_);
    offsets_.push_back(bytes_.size());
}

field_cell_parser::field_cell_parser(std::vector<field_spec> specs, unknown_name_policy unknown, const std::string& usage)
    : specs_(std::move(specs)), unknown_(unknown), ignored_(specs_.size(), 0), values_(specs_.size()) {
    std::set<std::string> names;
    for (const auto& s : specs_) {
        if (!names.insert(s.name).second) throw usage_error("--field: two fields are named '" + s.name + "'");
        if (!s.coco_path.empty()) throw usage_error(usage + ": --field " + s.name + ":boxes=coco:FILE reads a list's file names; give the boxes in the field's values");
        if (!s.column.empty() && s.column != s.name) throw usage_error(usage + ": --field " + s.name + "=" + s.column + ": a value has no column; give NAME:KIND");
        field_info d{s.name, s.kind, {}};
        vocabulary v;
        if (detail::has_vocabulary(s.kind)) {
            if (s.names_path.empty())
                throw usage_error(usage + ": field '" + s.name + "' (" + detail::field_kind_name(s.kind) + ") needs --field-names " +
                                  s.name + "=FILE: its names cannot be found in data that has not come yet");
            v = declared_vocabulary(s);
            d.vocabulary = v.names;
        }
        vocab_.push_back(std::move(v));
        decls_.push_back(std::move(d));
        boxes_.resize(boxes_.size() + (s.kind == field_kind::boxes));
    }
    if (specs_.size() > detail::max_fields) throw usage_error("--field: at most 256 fields");
    if (auto why = detail::fields_problem(decls_); !why.empty()) throw usage_error("--field: " + why);
}

void field_cell_parser::parse(const std::vector<std::string_view>& cells, std::string& out) {
    if (cells.size() != specs_.size())
        throw input_error(std::to_string(cells.size()) + " field values for the " + std::to_string(specs_.size()) + " declared fields");
    std::size_t box_field = 0;
    for (std::size_t f = 0; f < specs_.size(); ++f) {
        field_value& v = values_[f];
        v.kind = specs_[f].kind;
        v.clear();
        std::vector<source_box> none;
        auto& list = specs_[f].kind == field_kind::boxes ? boxes_[box_field++] : none;
        list.clear();
        parse_cell(specs_[f], cells[f], vocab_[f], unknown_, "", ignored_[f], v, list);
    }
    out.clear();
    append_source_row(decls_, values_, boxes_, out);
}

std::vector<std::string> field_cell_parser::notes() const {
    std::vector<std::string> out;
    for (std::size_t f = 0; f < specs_.size(); ++f)
        if (ignored_[f])
            out.push_back("field '" + specs_[f].name + "': " + std::to_string(ignored_[f]) +
                          " names not in its list were ignored (--unknown-name ignore)");
    return out;
}

void decode_source_row(const std::vector<field_info>& decls, std::string_view bytes, std::vector<field_value>& values,
                       std::vector<std::vector<source_box>>& boxes) {
    values.resize(decls.size());
    std::size_t box_fields = 0;
    for (const auto& d : decls) box_fields += d.kind == field_kind::boxes;
    boxes.resize(box_fields);
    const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
    std::size_t at = 0, box_field = 0;
    for (std::size_t i = 0; i < decls.size(); ++i) {
        field_value& v = values[i];
        v.kind = decls[i].kind;
        v.clear();
        switch (decls[i].kind) {
            case field_kind::int64: v.ints.push_back(std::int64_t(detail::load_u64(p + at))); at += 8; break;
            case field_kind::float64: v.floats.push_back(detail::load_f64(p + at)); at += 8; break;
            case field_kind::string: {
                const std::uint32_t n = detail::load_u32(p + at);
                v.text.assign(bytes.substr(at + 4, n));
                at += 4 + n;
                break;
            }
            case field_kind::int64_list:
            case field_kind::float64_list: {
                const std::uint32_t n = detail::load_u32(p + at);
                at += 4;
                for (std::uint32_t j = 0; j < n; ++j, at += 8) {
                    if (decls[i].kind == field_kind::int64_list) v.ints.push_back(std::int64_t(detail::load_u64(p + at)));
                    else v.floats.push_back(detail::load_f64(p + at));
                }
                break;
            }
            case field_kind::tags: {
                const std::uint32_t n = detail::load_u32(p + at);
                at += 4;
                for (std::uint32_t j = 0; j < n; ++j, at += 2) v.ids.push_back(detail::load_u16(p + at));
                break;
            }
            case field_kind::boxes: {
                const std::uint32_t n = detail::load_u32(p + at);
                at += 4;
                auto& list = boxes[box_field++];
                list.resize(n);
                for (std::uint32_t j = 0; j < n; ++j, at += source_box_bytes)
                    list[j] = {detail::load_f64(p + at), detail::load_f64(p + at + 8), detail::load_f64(p + at + 16),
                               detail::load_f64(p + at + 24), detail::load_u32(p + at + 32)};
                break;
            }
        }
    }
}

field_column_reader::field_column_reader(std::vector<field_spec> specs, field_column_input in)
    : specs_(std::move(specs)), in_(std::move(in)) {
    std::set<std::string> names;
    for (const auto& s : specs_)
        if (!names.insert(s.name).second) throw usage_error("--field: two fields are named '" + s.name + "'");
    if (specs_.size() > detail::max_fields) throw usage_error("--field: at most 256 fields");
    row_at_.push_back(0);
    key_at_.push_back(0);
}

void field_column_reader::start(const std::vector<std::string>* header, std::size_t row_cells) {
    in_.header = header;
    columns_.clear();
    for (const auto& s : specs_) {
        if (!s.coco_path.empty()) {
            columns_.push_back(no_column);
            continue;
        }
        const std::string col = s.column.empty() ? s.name : s.column;
        std::size_t index = no_column;
        if (header) {
            for (std::size_t i = 0; i < header->size(); ++i)
                if ((*header)[i] == col) index = i;
            if (index == no_column)
                for (std::size_t i = 0; i < header->size(); ++i)
                    if (lower_ascii(trim((*header)[i])) == lower_ascii(trim(col))) index = i;
        }
        if (index == no_column && is_integer(col)) {
            const auto v = integer_value(col);
            if (v && *v >= 0) index = std::size_t(*v);
        }
        if (index == no_column) {
            std::string known;
            if (header)
                for (std::size_t i = 0; i < header->size(); ++i) known += (i ? ", " : "") + (*header)[i];
            throw usage_error("--field " + s.name + ": no column '" + col + "'" +
                              (header ? " in the header of " + in_.csv_path + " (columns: " + known + ")"
                                      : " (without a header row, give the column as NAME:KIND=INDEX)"));
        }
        if (index >= row_cells && header)
            throw usage_error("--field " + s.name + ": column " + std::to_string(index) + " is past the header's " +
                              std::to_string(row_cells) + " columns");
        columns_.push_back(index);
    }
}

void field_column_reader::add(std::size_t line, const std::vector<std::string>& cells, std::string_view key) {
    for (std::size_t f = 0; f < specs_.size(); ++f) {
        if (columns_[f] == no_column) continue;
        if (columns_[f] >= cells.size())
            throw input_error(where(in_.csv_path, line) + "field '" + specs_[f].name + "': the row has no column " +
                              std::to_string(columns_[f]));
        if (cells[columns_[f]].find('\0') != std::string::npos)
            throw input_error(where(in_.csv_path, line) + "field '" + specs_[f].name + "': a NUL byte in the cell");
        cells_.append(cells[columns_[f]]);
        cells_.push_back('\0');
    }
    row_at_.push_back(cells_.size());
    lines_.push_back(static_cast<std::uint32_t>(line));
    keys_.append(key);
    key_at_.push_back(keys_.size());
}

namespace {

// COCO: images [{id, file_name}], annotations [{image_id, bbox [x, y, w, h], category_id}],
// categories [{id, name}]. Per file name, its boxes in source pixels (x0 y0 x1 y1).
struct coco_boxes {
    std::vector<std::string> names;                                // box classes, by category id order
    std::unordered_map<std::string, std::vector<source_box>> by_file;
    std::size_t annotations = 0;
};

coco_boxes load_coco(const std::string& path, const std::string& field) {
    const std::string what = "--field " + field + " coco:" + path + ": ";
    json doc;
    try {
        doc = json::parse(read_text_file(path, max_coco_bytes), 64u << 20);
    } catch (const input_error&) {
        throw;
    } catch (const std::exception& e) {
        throw input_error(what + e.what());
    }
    coco_boxes out;
    try {
        std::vector<std::pair<std::int64_t, std::string>> cats;
        for (const json& c : doc.at("categories").as_array()) cats.emplace_back(c.at("id").as_i64(), c.at("name").as_string());
        std::sort(cats.begin(), cats.end());
        std::unordered_map<std::int64_t, std::uint32_t> label_of;
        for (const auto& [id, name] : cats) {
            if (!label_of.emplace(id, std::uint32_t(out.names.size())).second)
                throw input_error(what + "category id " + std::to_string(id) + " is listed twice");
            out.names.push_back(name);
        }
        std::unordered_map<std::int64_t, std::string> file_of;
        for (const json& im : doc.at("images").as_array()) {
            const std::string& file = im.at("file_name").as_string();
            if (!file_of.emplace(im.at("id").as_i64(), file).second)
                throw input_error(what + "image id " + std::to_string(im.at("id").as_i64()) + " is listed twice");
            out.by_file.emplace(file, std::vector<source_box>{});
        }
        for (const json& a : doc.at("annotations").as_array()) {
            const auto im = file_of.find(a.at("image_id").as_i64());
            if (im == file_of.end())
                throw input_error(what + "an annotation's image_id " + std::to_string(a.at("image_id").as_i64()) +
                                  " is not in \"images\"");
            const auto cat = label_of.find(a.at("category_id").as_i64());
            if (cat == label_of.end())
                throw input_error(what + "an annotation's category_id " + std::to_string(a.at("category_id").as_i64()) +
                                  " is not in \"categories\"");
            const auto& bb = a.at("bbox").as_array();
            if (bb.size() != 4) throw input_error(what + "an annotation's bbox is not [x, y, width, height]");
            const double x = bb[0].as_double(), y = bb[1].as_double(), w = bb[2].as_double(), h = bb[3].as_double();
            out.by_file[im->second].push_back({x, y, x + w, y + h, cat->second});
            ++out.annotations;
        }
    } catch (const input_error&) {
        throw;
    } catch (const std::exception& e) {
        throw input_error(what + e.what());
    }
    if (out.names.empty()) throw input_error(what + "no categories");
    return out;
}

// Where row r of the list is, for messages ("list.csv:12: ").
struct row_places {
    const std::string& csv_path;
    const std::vector<std::uint32_t>& lines;
    std::string at(std::size_t r) const { return where(csv_path, lines[r]); }
};

// The cells of row r, field f (by its position among the fields that have a column).
std::vector<std::vector<std::string_view>> split_row_cells(const std::string& cells_, const std::vector<std::uint64_t>& row_at_,
                                                           std::size_t rows, std::size_t per_row) {
    std::vector<std::vector<std::string_view>> cells(rows);
    for (std::size_t r = 0; r < rows; ++r) {
        std::string_view all = std::string_view(cells_).substr(row_at_[r], row_at_[r + 1] - row_at_[r]);
        for (std::size_t k = 0; k < per_row; ++k) {
            const std::size_t nul = all.find('\0');
            cells[r].push_back(all.substr(0, nul));
            all.remove_prefix(nul + 1);
        }
    }
    return cells;
}

// A tags or boxes field's names found in its column (cell `column` of each row), as
// classification labels: all ids (names "0".."max") or all names (sorted).
vocabulary found_vocabulary(const field_spec& s, const std::vector<std::vector<std::string_view>>& cells, std::size_t column,
                            const row_places& places, std::vector<std::string>& notes) {
    vocabulary v;
    std::set<std::string, std::less<>> names;
    std::int64_t max_id = -1;
    std::optional<std::size_t> first_id, first_name;
    for (std::size_t r = 0; r < cells.size(); ++r)
        for (std::string_view label : labels_in(s.kind, cells[r][column])) {
            if (is_integer(label)) {
                const auto id = integer_value(label);
                if (!id || *id < 0 || *id >= std::int64_t(detail::max_vocabulary))
                    throw input_error(places.at(r) + "field '" + s.name + "': id '" + std::string(label) + "' is out of range 0..65534");
                max_id = std::max(max_id, *id);
                if (!first_id) first_id = r;
            } else {
                names.emplace(label);
                if (!first_name) first_name = r;
            }
        }
    if (first_id && first_name)
        throw input_error(places.at(std::max(*first_id, *first_name)) + "field '" + s.name +
                          "': mixes ids and names; use one of them, or give --field-names " + s.name + "=FILE");
    if (names.size() > detail::max_vocabulary)
        throw input_error(places.csv_path + ": field '" + s.name + "' has more than 65535 distinct names");
    if (first_id)
        for (std::int64_t i = 0; i <= max_id; ++i) v.names.push_back(std::to_string(i));
    else
        v.names.assign(names.begin(), names.end());
    if (v.names.empty()) v.names.push_back(s.kind == field_kind::tags ? "(no tag)" : "(no box)");
    notes.push_back("field '" + s.name + "': " + std::to_string(v.names.size()) + " " +
                    (s.kind == field_kind::tags ? "tags" : "box classes") + " found in the data (give --field-names " +
                    s.name + "=FILE to declare them)");
    return v;
}

// The boxes a COCO file gives the image of row r, found by its key as the JSON names it: the
// whole path, else its file name. `used` collects the COCO images the list names.
const std::vector<source_box>& coco_row_boxes(const coco_boxes& coco, const field_spec& s, const std::string& k,
                                              const row_places& places, std::size_t r, std::set<std::string>& used) {
    auto it = coco.by_file.find(k);
    if (it == coco.by_file.end())
        it = coco.by_file.find(std::filesystem::path(k).filename().string());
    if (it == coco.by_file.end())
        throw input_error(places.at(r) + "field '" + s.name + "' (boxes): the image '" + k + "' is not in " + s.coco_path +
                          " (its \"images\" list every image, those without boxes too)");
    used.insert(it->first);
    return it->second;
}

}  // namespace

field_table field_column_reader::finish(std::vector<std::string>& notes) {
    const std::size_t rows = lines_.size();
    const std::size_t per_row = specs_.size() - static_cast<std::size_t>(std::count(columns_.begin(), columns_.end(), no_column));
    const std::vector<std::vector<std::string_view>> cells = split_row_cells(cells_, row_at_, rows, per_row);
    const auto key = [&](std::size_t r) {
        return std::string_view(keys_).substr(key_at_[r], key_at_[r + 1] - key_at_[r]);
    };
    const row_places places{in_.csv_path, lines_};

    std::vector<field_info> decls;
    std::vector<vocabulary> vocab(specs_.size());
    std::vector<coco_boxes> coco(specs_.size());
    std::vector<std::size_t> cell_index(specs_.size(), no_column);
    for (std::size_t f = 0, k = 0; f < specs_.size(); ++f)
        if (columns_[f] != no_column) cell_index[f] = k++;

    for (std::size_t f = 0; f < specs_.size(); ++f) {
        const field_spec& s = specs_[f];
        field_info d{s.name, s.kind, {}};
        if (!s.coco_path.empty()) {
            coco[f] = load_coco(s.coco_path, s.name);
            d.vocabulary = coco[f].names;
        } else if (detail::has_vocabulary(s.kind)) {
            vocabulary& v = vocab[f];
            if (!s.names_path.empty()) v = declared_vocabulary(s);
            else v = found_vocabulary(s, cells, cell_index[f], places, notes);
            if (!v.declared)
                for (std::size_t i = 0; i < v.names.size(); ++i) v.id_of.emplace(v.names[i], std::uint32_t(i));
            d.vocabulary = v.names;
        }
        decls.push_back(std::move(d));
    }

    field_table table;
    table.declare(decls);
    std::vector<std::size_t> unknown_ignored(specs_.size(), 0);
    std::vector<std::set<std::string>> coco_used(specs_.size());
    std::vector<field_value> values(specs_.size());
    std::size_t box_fields = 0;
    for (const auto& s : specs_) box_fields += s.kind == field_kind::boxes;
    std::vector<std::vector<source_box>> boxes(box_fields);

    for (std::size_t r = 0; r < rows; ++r) {
        std::size_t box_field = 0;
        for (std::size_t f = 0; f < specs_.size(); ++f) {
            const field_spec& s = specs_[f];
            field_value& v = values[f];
            v.kind = s.kind;
            v.clear();
            const std::string_view cell = cell_index[f] == no_column ? std::string_view() : cells[r][cell_index[f]];
            std::vector<source_box> none;
            auto& list = s.kind == field_kind::boxes ? boxes[box_field++] : none;
            list.clear();
            if (!s.coco_path.empty()) list = coco_row_boxes(coco[f], s, std::string(key(r)), places, r, coco_used[f]);
            else parse_cell(s, cell, vocab[f], in_.unknown, places.at(r), unknown_ignored[f], v, list);
        }
        table.add_row(values, boxes);
    }
    for (std::size_t f = 0; f < specs_.size(); ++f) {
        if (unknown_ignored[f])
            notes.push_back("field '" + specs_[f].name + "': " + std::to_string(unknown_ignored[f]) +
                            " names not in its list were ignored (--unknown-name ignore)");
        if (!specs_[f].coco_path.empty() && coco_used[f].size() < coco[f].by_file.size())
            notes.push_back("field '" + specs_[f].name + "': " + std::to_string(coco[f].by_file.size() - coco_used[f].size()) +
                            " images of " + specs_[f].coco_path + " are not in the list; their boxes are not packed");
    }
    return table;
}

}  // namespace shardpack
