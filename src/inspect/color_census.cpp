#include "inspect/color_census.hpp"

#include <algorithm>
#include <chrono>
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <cstdio>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "errors.hpp"
#include "input/csv_reader.hpp"
#include "pipeline/file_loader.hpp"
#include "transform/mask_mapper.hpp"
#include "pipeline/value_totals.hpp"
#include "transform/index_mask.hpp"
#include "transform/label_map.hpp"

namespace shardpack {
using detail::json;

namespace {

struct file_tally {
    std::uint64_t pixels = 0;
    std::uint32_t x = 0, y = 0;  // first occurrence
};

// One thread's totals and its reusable buffers.
struct census_worker {
    value_totals totals;  // rows are row indices
    std::unordered_map<std::uint32_t, file_tally> file;
    std::vector<std::uint8_t> bytes;
    mask_scratch decoded;  // the mask, decoded as a build decodes it (transform/mask_mapper)
    std::string path;
    std::vector<unreadable_mask> unreadable;
    std::uint64_t masks = 0, pixels = 0;
};

// Counts runs, not pixels, into the per-file map: masks are mostly long runs of one color.
template <typename Key>
void tally_runs(std::uint32_t width, std::uint32_t height, Key key_at, std::unordered_map<std::uint32_t, file_tally>& file) {
    for (std::uint32_t y = 0; y < height; ++y) {
        std::uint32_t x = 0;
        while (x < width) {
            const std::uint32_t k = key_at(x, y);
            std::uint32_t end = x + 1;
            while (end < width && key_at(end, y) == k) ++end;
            auto [it, fresh] = file.try_emplace(k);
            if (fresh) {
                it->second.x = x;
                it->second.y = y;
            }
            it->second.pixels += end - x;
            x = end;
        }
    }
}

// The kind of mask values the census counts. With a class table, `mapper` becomes the build's
// mapper: its lookups match the census's colors or values to classes as a build would map them.
mask_value_kind set_up_mapper(const color_census_options& o, const input_options& in, const input_list& list,
                              std::optional<mask_mapper>& mapper) {
    mask_value_kind kind = o.mask.values;
    if (!list.classes.empty()) {
        kind = resolve_mask_values(o.mask, list.classes, in.classes_path);
        mapper.emplace(list.classes, kind, o.mask, std::string());
    } else if (kind == mask_value_kind::automatic) {
        kind = mask_value_kind::color;
    }
    return kind;
}

// Reads and decodes row i's mask and adds its colors or values to the worker's totals; an
// unreadable mask is noted.
void count_mask(const input_list& list, std::size_t i, mask_value_kind kind, bool index_masks, census_worker& w) {
    list.label_path(i, w.path);
    const sample_row row = list.row(i);
    file_format format = file_format::unknown;
    std::string why = read_file_into(w.path, w.bytes, nullptr, UINT64_MAX, true,  // --write-dict never replaces a mask
                                     &format);
    w.file.clear();
    if (why.empty()) {
        try {
            decode_mask(w.bytes.data(), w.bytes.size(), format, kind, 0, w.decoded);  // whole
            if (index_masks) {
                const value_plane& v = w.decoded.values;
                tally_runs(v.width, v.height, [&](std::uint32_t x, std::uint32_t y) { return std::uint32_t(v.row(y)[x]); },
                           w.file);
                w.pixels += std::uint64_t(v.width) * v.height;
            } else {
                const image_u8& m = w.decoded.colors;
                tally_runs(m.width, m.height, [&](std::uint32_t x, std::uint32_t y) {
                    const std::uint8_t* p = m.row(y) + std::size_t(x) * 3;
                    return std::uint32_t(p[0]) << 16 | std::uint32_t(p[1]) << 8 | p[2];
                }, w.file);
                w.pixels += std::uint64_t(m.width) * m.height;
            }
        } catch (const std::exception& e) {
            why = e.what();
        }
    }
    if (!why.empty()) {
        w.unreadable.push_back({row.csv_line, w.path, why});
        return;
    }
    ++w.masks;
    for (const auto& [k, f] : w.file) w.totals.add(k, f.pixels, i, f.x, f.y);
}

// One color or value of the census, its example and the class it maps to (with a mapper).
census_entry entry_of(std::uint32_t k, const value_total& t, const input_list& list, const color_lookup* colors,
                      const value_lookup* values) {
    census_entry e;
    e.value = k;
    e.pixels = t.pixels;
    e.files = t.files;
    e.example_row = t.row;
    const sample_row row = list.row(t.row);
    e.example = std::string(row.label_key);
    e.example_line = row.csv_line;
    e.x = t.x;
    e.y = t.y;
    if (colors) {
        const int v = colors->find_packed(k);
        if (v >= 0) {
            e.class_id = v & color_lookup::id_mask;
            e.match = (v & color_lookup::by_tolerance) ? color_match::tolerance : color_match::exact;
        }
        const auto n = colors->nearest(k);
        e.nearest = n.id;
        e.distance = n.distance;
    } else if (values) {
        const int id = values->find(static_cast<std::uint16_t>(k));
        if (id >= 0) {
            e.class_id = id;
            e.match = color_match::exact;
        } else if (id == value_lookup::ignored) {
            e.match = color_match::ignored;
        }
    }
    return e;
}

}  // namespace

color_census scan_mask_colors(const color_census_options& o) {
    const auto started = std::chrono::steady_clock::now();
    input_options in = o.input;
    in.task = task_kind::segmentation;
    in.classes_optional = true;
    const input_list list = load_input_list(in);
    if (list.empty()) throw input_error(in.csv_path + ": the list has no rows");

    color_census census;
    census.classes = list.classes;
    census.tolerance = o.mask.color_tolerance;
    std::optional<mask_mapper> mapper;
    const mask_value_kind kind = set_up_mapper(o, in, list, mapper);
    census.index_masks = kind == mask_value_kind::index;
    census.from_folders = list.from_folders;

    tbb::enumerable_thread_specific<census_worker> workers;
    const unsigned threads = o.threads ? o.threads : unsigned(tbb::info::default_concurrency());
    tbb::task_arena arena(static_cast<int>(threads));
    arena.execute([&] {
        tbb::parallel_for(tbb::blocked_range<std::size_t>(0, list.size(), 1), [&](const tbb::blocked_range<std::size_t>& range) {
            census_worker& w = workers.local();
            for (std::size_t i = range.begin(); i != range.end(); ++i) count_mask(list, i, kind, census.index_masks, w);
        });
    });

    value_totals totals;
    for (auto& w : workers) {
        census.masks += w.masks;
        census.pixels += w.pixels;
        for (auto& u : w.unreadable) census.unreadable.push_back(std::move(u));
        totals.merge(w.totals);
    }
    std::sort(census.unreadable.begin(), census.unreadable.end(), [](const auto& a, const auto& b) { return a.line < b.line; });

    const color_lookup* colors = mapper ? mapper->color_table() : nullptr;
    const value_lookup* values = mapper ? mapper->value_table() : nullptr;
    std::vector<bool> used(list.classes.size(), false);
    for (const auto& [k, t] : totals.values()) {
        census_entry e = entry_of(k, t, list, colors, values);
        if (e.class_id >= 0) used[std::size_t(e.class_id)] = true;
        census.entries.push_back(std::move(e));
    }
    std::sort(census.entries.begin(), census.entries.end(), [](const census_entry& a, const census_entry& b) {
        return a.pixels != b.pixels ? a.pixels > b.pixels : a.value < b.value;
    });
    for (std::size_t c = 0; c < used.size(); ++c)
        if (!used[c]) census.unused_classes.push_back(c);
    census.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return census;
}

namespace {

std::string value_text(const color_census& c, std::uint32_t v) {
    return c.index_masks ? std::to_string(v) : color_text(v);
}

const char* match_name(color_match m) {
    switch (m) {
        case color_match::exact: return "exact";
        case color_match::tolerance: return "tolerance";
        case color_match::ignored: return "ignored";
        case color_match::none: break;
    }
    return "unknown";
}

std::string class_text(const color_census& c, std::size_t id) {
    const class_entry& e = c.classes[id];
    std::string t = "'" + e.name + "'";
    if (c.index_masks) t += " (value " + std::to_string(e.value >= 0 ? e.value : std::int32_t(id)) + ")";
    else if (e.has_color) t += " " + color_text(std::uint32_t(e.r) << 16 | std::uint32_t(e.g) << 8 | e.b);
    return t;
}

}  // namespace

json census_to_json(const color_census& c) {
    json out = json::object();
    out.set("mask_values", c.index_masks ? "index" : "color");
    out.set("masks", c.masks);
    out.set("pixels", c.pixels);
    out.set("pixels_counted", "whole masks");
    out.set("seconds", c.seconds);
    if (!c.index_masks) out.set("color_tolerance", c.tolerance);
    json entries = json::array();
    for (const auto& e : c.entries) {
        json j = json::object();
        if (c.index_masks) j.set("value", e.value);
        else j.set("color", json(json::array_t{json((e.value >> 16) & 0xFFu), json((e.value >> 8) & 0xFFu), json(e.value & 0xFFu)}));
        j.set("pixels", e.pixels);
        j.set("fraction", c.pixels ? double(e.pixels) / double(c.pixels) : 0.0);
        j.set("files", e.files);
        json ex = json::object();
        ex.set("mask", e.example);
        ex.set("line", e.example_line);
        ex.set("x", e.x);
        ex.set("y", e.y);
        j.set("example", ex);
        if (!c.classes.empty()) {
            j.set("match", match_name(e.match));
            if (e.class_id >= 0) j.set("class", c.classes[std::size_t(e.class_id)].name);
            else j.set("class", nullptr);
            if (e.nearest >= 0) {
                j.set("nearest_class", c.classes[std::size_t(e.nearest)].name);
                j.set("distance", e.distance);
            }
        }
        entries.push(j);
    }
    out.set(c.index_masks ? "values" : "colors", entries);
    json unused = json::array();
    for (auto id : c.unused_classes) {
        json j = json::object();
        j.set("id", id);
        j.set("name", c.classes[id].name);
        unused.push(j);
    }
    out.set("unused_classes", unused);
    json bad = json::array();
    for (const auto& u : c.unreadable) {
        json j = json::object();
        j.set("line", u.line);
        j.set("mask", u.mask);
        j.set("reason", u.reason);
        bad.push(j);
    }
    out.set("unreadable", bad);
    return out;
}

std::string format_census(const color_census& c, std::size_t max_rows) {
    std::string out;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "%llu masks, %llu pixels (the whole masks, at their own size; a build with --size counts its records' "
                  "pixels), %zu distinct %s (%.2f s)\n",
                  (unsigned long long)c.masks, (unsigned long long)c.pixels, c.entries.size(),
                  c.index_masks ? "values" : "colors", c.seconds);
    out += buf;
    const bool table = !c.classes.empty();
    std::snprintf(buf, sizeof buf, "%-15s %12s %7s %6s  %-30s%s\n", c.index_masks ? "value" : "color", "pixels", "share",
                  "files", c.from_folders ? "example at pixel" : "example (line) at pixel", table ? "  class" : "");
    out += buf;
    std::size_t shown = 0;
    for (const auto& e : c.entries) {
        if (shown++ == max_rows) {
            out += "... " + std::to_string(c.entries.size() - max_rows) + " more (--json lists all)\n";
            break;
        }
        const std::string example = e.example + (c.from_folders ? std::string() : " (" + std::to_string(e.example_line) + ")") +
                                    " at (" + std::to_string(e.x) + "," + std::to_string(e.y) + ")";
        std::string cls;
        if (table) {
            if (e.match == color_match::exact) cls = "  " + c.classes[std::size_t(e.class_id)].name;
            else if (e.match == color_match::tolerance)
                cls = "  " + c.classes[std::size_t(e.class_id)].name + " (by tolerance, distance " + std::to_string(e.distance) + ")";
            else if (e.match == color_match::ignored) cls = "  ignored (--ignore-values)";
            else if (e.nearest >= 0)
                cls = "  UNKNOWN: nearest " + class_text(c, std::size_t(e.nearest)) + " at distance " + std::to_string(e.distance);
            else cls = "  UNKNOWN: not in the class table";
        }
        std::snprintf(buf, sizeof buf, "%-15s %12llu %6.2f%% %6llu  %-30s", value_text(c, e.value).c_str(),
                      (unsigned long long)e.pixels, c.pixels ? 100.0 * double(e.pixels) / double(c.pixels) : 0.0,
                      (unsigned long long)e.files, example.c_str());
        out += buf + cls + "\n";
    }
    if (table) {
        if (c.unused_classes.empty()) {
            out += "every class of the table is used\n";
        } else {
            out += "classes no mask uses:";
            for (std::size_t i = 0; i < c.unused_classes.size(); ++i)
                out += (i ? ", " : " ") + std::to_string(c.unused_classes[i]) + " " + class_text(c, c.unused_classes[i]);
            out += "\n";
        }
        std::size_t unknown = 0;
        unsigned max_near = 0;
        for (const auto& e : c.entries)
            if (e.match == color_match::none) {
                ++unknown;
                max_near = std::max(max_near, e.distance);
            }
        if (unknown)
            out += std::to_string(unknown) + (c.index_masks ? " value(s)" : " color(s)") + " not in the class table" +
                   (c.index_masks ? "" : " (within the tolerance " + std::to_string(c.tolerance) + ")") + "\n";
    }
    for (const auto& u : c.unreadable)
        out += "unreadable: " + (c.from_folders ? std::string() : "line " + std::to_string(u.line) + ": ") + u.mask + ": " +
               u.reason + "\n";
    return out;
}

std::string census_class_dict(const color_census& c, unsigned& tolerance_needed) {
    tolerance_needed = 0;
    std::vector<std::vector<const census_entry*>> by_class(c.classes.size());
    std::vector<const census_entry*> strays;
    for (const auto& e : c.entries) {
        if (e.match == color_match::ignored) continue;
        if (e.class_id >= 0) by_class[std::size_t(e.class_id)].push_back(&e);
        else strays.push_back(&e);
    }
    std::string out = c.index_masks ? "name,id\n" : "name,r,g,b\n";
    auto rgb = [](std::uint32_t v) {
        return std::to_string((v >> 16) & 0xFF) + "," + std::to_string((v >> 8) & 0xFF) + "," + std::to_string(v & 0xFF);
    };
    for (std::size_t id = 0; id < c.classes.size(); ++id) {
        const class_entry& k = c.classes[id];
        if (c.index_masks) {
            out += csv_cell(k.name) + "," + std::to_string(k.value >= 0 ? k.value : std::int32_t(id)) + "\n";
            continue;
        }
        std::uint32_t color = std::uint32_t(k.r) << 16 | std::uint32_t(k.g) << 8 | k.b;
        if (by_class[id].size() == 1) {
            color = by_class[id].front()->value;
        } else {
            for (const auto* e : by_class[id]) tolerance_needed = std::max(tolerance_needed, e->distance);
        }
        out += csv_cell(k.name) + "," + rgb(color) + "\n";
    }
    std::vector<const census_entry*> sorted = strays;
    std::sort(sorted.begin(), sorted.end(), [](const auto* a, const auto* b) { return a->value < b->value; });
    for (const auto* e : sorted) {
        if (c.index_masks) out += "class_" + std::to_string(e->value) + "," + std::to_string(e->value) + "\n";
        else out += "class_" + std::to_string((e->value >> 16) & 0xFF) + "_" + std::to_string((e->value >> 8) & 0xFF) + "_" +
                    std::to_string(e->value & 0xFF) + "," + rgb(e->value) + "\n";
    }
    return out;
}

}  // namespace shardpack
