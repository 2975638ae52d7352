#include "input/class_table.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <unordered_map>

#include "errors.hpp"
#include "input/csv_reader.hpp"
#include "input/text_util.hpp"

namespace shardpack {

namespace {

using namespace input_detail;

bool is_name_column(const std::string& header_cell) {
    const std::string h = lower_ascii(trim(header_cell));
    return h == "name" || h == "class" || h == "class_name" || h == "classname";
}

// The index of the first header cell that is one of `aliases` (lower case), if any.
std::optional<std::size_t> find_column(const csv_row& header, std::initializer_list<const char*> aliases) {
    for (std::size_t i = 0; i < header.cells.size(); ++i) {
        const std::string h = lower_ascii(trim(header.cells[i]));
        for (const char* a : aliases)
            if (h == a) return i;
    }
    return std::nullopt;
}

std::string join_cells(const std::vector<std::string>& cells) {
    std::string out;
    for (const auto& c : cells) out += (out.empty() ? "" : ", ") + c;
    return out;
}

// Names must be unique; remembers where each was first seen.
class name_registry {
public:
    explicit name_registry(const std::string& path) : path_(path) {}
    void add(const std::string& name, std::size_t line) {
        if (name.empty()) throw input_error(where(path_, line) + "empty class name");
        const auto [it, fresh] = lines_.emplace(name, line);
        if (!fresh)
            throw input_error(where(path_, line) + "duplicate class name '" + name + "' (first on line " +
                              std::to_string(it->second) + ")");
        if (lines_.size() > max_class_count)
            throw input_error(where(path_, line) + "too many classes: at most " + std::to_string(max_class_count));
    }

private:
    const std::string& path_;
    std::unordered_map<std::string, std::size_t> lines_;
};

}  // namespace

std::vector<class_entry> load_class_dict(const std::string& path) {
    const std::vector<csv_row> rows = parse_csv(read_text_file(path), path);
    if (rows.empty()) throw input_error(path + ": the class dictionary is empty; expected a header row name,r,g,b");
    const csv_row& header = rows.front();
    const auto name_col = find_column(header, {"name", "class", "class_name", "classname"});
    const auto r_col = find_column(header, {"r", "red"});
    const auto g_col = find_column(header, {"g", "green"});
    const auto b_col = find_column(header, {"b", "blue"});
    const auto id_col = find_column(header, {"id", "value", "label_id", "labelid", "mask_value"});
    const bool colors = r_col && g_col && b_col;
    std::string missing;
    if (!name_col) missing += " name";
    if (!colors && !id_col) {
        if (!r_col) missing += " r";
        if (!g_col) missing += " g";
        if (!b_col) missing += " b";
    }
    if (!missing.empty())
        throw input_error(where(path, header.line) + "the header row has no column(s)" + missing +
                          "; a class dictionary needs a header with name,r,g,b (color masks) or name,id (index masks)"
                          " (found: " + join_cells(header.cells) + ")");
    std::size_t needed = *name_col + 1;
    if (colors) needed = std::max({needed, *r_col + 1, *g_col + 1, *b_col + 1});
    if (id_col) needed = std::max(needed, *id_col + 1);

    std::vector<class_entry> classes;
    name_registry names(path);
    std::map<std::uint32_t, std::size_t> color_owner;  // packed rgb -> index into classes
    std::map<std::int32_t, std::size_t> value_owner;    // mask value -> index into classes
    for (std::size_t i = 1; i < rows.size(); ++i) {
        const csv_row& row = rows[i];
        if (row.cells.size() < needed)
            throw input_error(where(path, row.line) + "expected at least " + std::to_string(needed) + " columns, found " +
                              std::to_string(row.cells.size()));
        class_entry e;
        e.name = std::string(trim(row.cells[*name_col]));
        e.line = row.line;
        names.add(e.name, row.line);
        if (colors) {
            e.has_color = true;
            const std::pair<std::size_t, std::uint8_t*> channels[] = {{*r_col, &e.r}, {*g_col, &e.g}, {*b_col, &e.b}};
            for (const auto& [col, dst] : channels) {
                const std::string& cell = row.cells[col];
                const auto v = is_integer(cell) ? integer_value(cell) : std::nullopt;
                if (!v || *v < 0 || *v > 255)
                    throw input_error(where(path, row.line) + "color value '" + cell + "' in column '" + header.cells[col] +
                                      "' of class '" + e.name + "' is not an integer in 0..255");
                *dst = static_cast<std::uint8_t>(*v);
            }
            const std::uint32_t packed = std::uint32_t(e.r) << 16 | std::uint32_t(e.g) << 8 | e.b;
            const auto [it, fresh] = color_owner.emplace(packed, classes.size());
            if (!fresh)
                throw input_error(where(path, row.line) + "class '" + e.name + "' has color (" + std::to_string(e.r) + ", " +
                                  std::to_string(e.g) + ", " + std::to_string(e.b) + "), already used by class '" +
                                  classes[it->second].name + "' on line " + std::to_string(classes[it->second].line) +
                                  "; a mask color must map to one class");
        }
        if (id_col) {
            const std::string& cell = row.cells[*id_col];
            const auto v = is_integer(cell) ? integer_value(cell) : std::nullopt;
            if (!v || *v < 0 || *v > 65535)
                throw input_error(where(path, row.line) + "mask value '" + cell + "' in column '" + header.cells[*id_col] +
                                  "' of class '" + e.name + "' is not an integer in 0..65535");
            e.value = static_cast<std::int32_t>(*v);
            const auto [it, fresh] = value_owner.emplace(e.value, classes.size());
            if (!fresh)
                throw input_error(where(path, row.line) + "class '" + e.name + "' has mask value " + std::to_string(e.value) +
                                  ", already used by class '" + classes[it->second].name + "' on line " +
                                  std::to_string(classes[it->second].line) + "; a mask value must map to one class");
        }
        classes.push_back(std::move(e));
    }
    if (classes.empty())
        throw input_error(where(path, header.line) + "the class dictionary has a header but no classes");
    return classes;
}

bool classes_have_colors(const std::vector<class_entry>& classes) {
    return !classes.empty() && std::all_of(classes.begin(), classes.end(), [](const class_entry& c) { return c.has_color; });
}

bool classes_have_values(const std::vector<class_entry>& classes) {
    return !classes.empty() && std::all_of(classes.begin(), classes.end(), [](const class_entry& c) { return c.value >= 0; });
}

void check_color_tolerance(const std::vector<class_entry>& classes, unsigned tolerance, const std::string& path) {
    if (tolerance == 0) return;
    auto text = [](const class_entry& c) {
        return "'" + c.name + "' (" + std::to_string(c.r) + "," + std::to_string(c.g) + "," + std::to_string(c.b) + ")" +
               (c.line ? " on line " + std::to_string(c.line) : std::string());
    };
    for (std::size_t a = 0; a < classes.size(); ++a)
        for (std::size_t b = a + 1; b < classes.size(); ++b) {
            const class_entry &x = classes[a], &y = classes[b];
            if (!x.has_color || !y.has_color) continue;
            const unsigned d = std::max({unsigned(std::abs(int(x.r) - int(y.r))), unsigned(std::abs(int(x.g) - int(y.g))),
                                         unsigned(std::abs(int(x.b) - int(y.b)))});
            if (d <= 2 * tolerance)
                throw usage_error("--color-tolerance " + std::to_string(tolerance) + ": classes " + text(x) + " and " +
                                  text(y) + " of " + path + " differ by only " + std::to_string(d) +
                                  " (largest channel difference), within twice the tolerance, so a mask color between "
                                  "them could belong to either; use --color-tolerance " +
                                  std::to_string(d == 0 ? 0 : (d - 1) / 2) + " or less");
        }
}

std::vector<class_entry> load_class_names(const std::string& path) {
    const std::vector<csv_row> rows = parse_csv(read_text_file(path), path);
    std::size_t col = 0, first = 0;
    if (!rows.empty()) {
        const auto& head = rows.front().cells;
        const auto it = std::find_if(head.begin(), head.end(), is_name_column);
        if (it != head.end()) {
            col = std::size_t(it - head.begin());
            first = 1;
        }
    }
    std::vector<class_entry> classes;
    name_registry names(path);
    for (std::size_t i = first; i < rows.size(); ++i) {
        const csv_row& row = rows[i];
        if (row.cells.size() <= col)
            throw input_error(where(path, row.line) + "expected at least " + std::to_string(col + 1) + " columns, found " +
                              std::to_string(row.cells.size()));
        class_entry e;
        e.name = std::string(trim(row.cells[col]));
        names.add(e.name, row.line);
        classes.push_back(std::move(e));
    }
    if (classes.empty()) throw input_error(path + ": the class name list is empty");
    return classes;
}

}  // namespace shardpack
