#include "pipeline/build_report.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

#include <spdlog/spdlog.h>

#include "dataset/dataset_writer.hpp"
#include "dataset/manifest_file.hpp"
#include "input/csv_reader.hpp"
#include "io/output_file.hpp"
#include "io/output_folder.hpp"
#include "transform/label_map.hpp"
#include "transform/mask_mapper.hpp"

namespace shardpack {
using detail::json;

namespace {

std::string shell_word(const std::string& s) {
    if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=,:") == std::string::npos)
        return s;
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// Most pixels first; ties: the smaller value first (as `colors` sorts).
std::vector<std::pair<std::uint32_t, const value_total*>> by_pixels(const build_totals& t) {
    std::vector<std::pair<std::uint32_t, const value_total*>> v;
    for (const auto& [value, total] : t.unknown_values.values()) v.emplace_back(value, &total);
    std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
        return a.second->pixels != b.second->pixels ? a.second->pixels > b.second->pixels : a.first < b.first;
    });
    return v;
}

const std::string& example_of(const build_totals& t, std::uint32_t value) {
    static const std::string none;
    const auto it = t.unknown_examples.find(value);
    return it == t.unknown_examples.end() ? none : it->second;
}

std::string nearest_class_text(const std::vector<class_entry>& classes, std::uint32_t rgb) {
    int best = -1;
    unsigned best_d = 0;
    for (std::size_t c = 0; c < classes.size(); ++c) {
        if (!classes[c].has_color) continue;
        const unsigned d = color_distance(rgb, std::uint32_t(classes[c].r) << 16 | std::uint32_t(classes[c].g) << 8 | classes[c].b);
        if (best < 0 || d < best_d) {
            best = int(c);
            best_d = d;
        }
    }
    if (best < 0) return "";
    return ", nearest class '" + classes[std::size_t(best)].name + "' at distance " + std::to_string(best_d);
}

}  // namespace

std::string colors_command_hint(const build_options& o) {
    std::string hint = o.input.list_text.empty() ? "shardpack colors --csv " + shell_word(o.input.csv_path)
                                                 : "shardpack colors " + o.input.list_source;
    if (!o.input.classes_path.empty()) hint += " --classes " + shell_word(o.input.classes_path);
    if (!o.input.root.empty() && o.input.list_text.empty()) hint += " --root " + shell_word(o.input.root);
    if (o.input.label_col != "1") hint += " --label-col " + shell_word(o.input.label_col);
    if (o.input.image_col != "0") hint += " --image-col " + shell_word(o.input.image_col);
    if (o.mask.values == mask_value_kind::index) hint += " --mask-values index";
    return hint;
}

std::string unknown_pixels_counted(const build_options& o) {
    if (o.geometry.width == 0 && o.geometry.height == 0) return "whole masks";
    return "records (" + std::to_string(o.geometry.width) + "x" + std::to_string(o.geometry.height) +
           ", after resizing and cropping)";
}

std::vector<std::string> build_warnings(const input_list& input, const build_totals& t, bool index_masks,
                                        const build_options& options) {
    std::vector<std::string> out;
    const bool seg = input.task == task_kind::segmentation;
    if (t.lost_bits)
        out.push_back(std::to_string(t.lost_bits) + " of the " + std::to_string(t.records - t.reused) +
                      " images decoded in this build had 16 bits a sample and were stored with 8, the high byte of each (" +
                      (options.depth == 8 ? std::string("--depth 8")
                                          : std::string("--depth auto: the first row's image has 8 bits")) +
                      "), e.g. " + t.lost_bits_example +
                      (input.from_folders ? std::string() : " (line " + std::to_string(t.lost_bits_line) + ")") +
                      "; give --depth 16 to keep every bit" +
                      (t.reused ? " (the " + std::to_string(t.reused) + " records taken back from the previous build are not counted)"
                                : std::string()));
    for (std::size_t c = 0; c < input.classes.size() && c < t.class_counts.size(); ++c)
        if (t.class_counts[c] == 0)
            out.push_back("class " + std::to_string(c) + " '" + input.classes[c].name + "' has 0 " +
                          (seg ? "pixels" : "samples") + " in the dataset" +
                          (seg && !index_masks && input.classes[c].has_color
                               ? " (no mask holds its color " +
                                     color_text(std::uint32_t(input.classes[c].r) << 16 |
                                                 std::uint32_t(input.classes[c].g) << 8 | input.classes[c].b) +
                                     "; see `shardpack colors` for the colors the masks do hold)"
                               : std::string()));
    if (!seg) {
        for (std::size_t c = 0; c < input.classes.size() && c < t.class_counts.size(); ++c)
            if (t.class_counts[c] == 1)
                out.push_back("class " + std::to_string(c) + " '" + input.classes[c].name + "' has a single sample");
        std::map<std::string, std::vector<std::size_t>> folded;  // names that differ only in case
        for (std::size_t c = 0; c < input.classes.size(); ++c) {
            std::string k;
            for (char ch : input.classes[c].name) k += char(std::tolower(static_cast<unsigned char>(ch)));
            folded[k].push_back(c);
        }
        for (const auto& [k, ids] : folded)
            if (ids.size() > 1) {
                std::string text = "class names that differ only in case are separate classes:";
                for (auto id : ids) text += " " + std::to_string(id) + " '" + input.classes[id].name + "'";
                out.push_back(text + " (a typo? give --classes with the names to refuse unknown ones)");
            }
    }
    if (seg && t.unknown_pixels) {
        const auto sorted = by_pixels(t);
        const std::string counted = unknown_pixels_counted(options);
        const bool whole = counted == "whole masks";
        std::string text = std::to_string(t.unknown_pixels) + " pixels of the " + counted + " had " +
                           (index_masks ? "values not in the class table" : "colors not in the dictionary") +
                           " and were mapped to the ignore value" +
                           (whole ? " (counted as `shardpack colors` counts them)"
                                  : " (`shardpack colors` counts the whole masks: other counts, and maybe another first pixel)") +
                           "; " + std::to_string(t.unknown_values.size()) +
                           (t.unknown_values.size() >= build_totals::max_unknown_listed ? "+" : "") + " distinct:";
        std::size_t shown = 0;
        for (const auto& [value, u] : sorted) {
            if (shown++ == 20) {
                text += "; ... (" + std::to_string(sorted.size() - 20) + " more in report.json)";
                break;
            }
            text += (shown > 1 ? ";" : "") + std::string(" ") + (index_masks ? "value " + std::to_string(value) : color_text(value)) +
                    ": " + std::to_string(u->pixels) + " pixels in " + std::to_string(u->files) + " file(s), e.g. " +
                    example_of(t, value) + (input.from_folders ? std::string() : " (line " + std::to_string(u->row) + ")") +
                    (whole ? " at pixel (" : " at mask pixel (") + std::to_string(u->x) + "," + std::to_string(u->y) + ")" +
                    (whole ? std::string() : " (the first the record shows)") +
                    (index_masks ? std::string() : nearest_class_text(input.classes, value));
        }
        out.push_back(text);
    }
    return out;
}

std::vector<std::string> class_id_table(const input_list& input, const build_totals& t) {
    std::vector<std::string> out;
    out.push_back("class ids (id, name, samples):");
    for (std::size_t c = 0; c < input.classes.size(); ++c)
        out.push_back("  " + std::to_string(c) + "  " + input.classes[c].name + "  " +
                      std::to_string(c < t.class_counts.size() ? t.class_counts[c] : 0));
    return out;
}

std::vector<std::string> class_id_changes(const std::string& out_dir, const input_list& input, bool classes_given) {
    std::vector<std::string> out;
    if (classes_given || input.task != task_kind::classification) return out;
    std::vector<std::string> before;
    try {
        // The dataset this build replaces, if any: read as our own file (bounded, no link).
        const auto manifest = read_manifest_if_present(*output_folder::open(out_dir, false, true));
        if (!manifest) return out;
        const json& m = *manifest;
        if (m.at("schema").at("task").as_string() != "classification") return out;
        for (const auto& c : m.at("classes").as_array()) before.push_back(c.at("name").as_string());
    } catch (const std::exception&) {
        return out;
    }
    std::vector<std::string> now;
    for (const auto& c : input.classes) now.push_back(c.name);
    if (before == now) return out;
    std::string moved;
    std::size_t moves = 0;
    for (std::size_t id = 0; id < before.size(); ++id) {
        const auto it = std::find(now.begin(), now.end(), before[id]);
        if (it == now.end()) moved += (moves++ < 10 ? "; '" + before[id] + "' (was " + std::to_string(id) + ") is gone" : "");
        else if (std::size_t(it - now.begin()) != id)
            moved += (moves++ < 10 ? "; '" + before[id] + "' was " + std::to_string(id) + ", now " + std::to_string(it - now.begin()) : "");
    }
    out.push_back("the previous build in " + out_dir + " had " + std::to_string(before.size()) + " classes, this list has " +
                  std::to_string(now.size()) + (now.size() < before.size() ? " (fewer distinct names)" : "") +
                  ": class ids change" + moved +
                  "; give --classes with the full list of names to keep ids the same across builds");
    return out;
}

json unknown_values_json(const build_totals& t, bool index_masks) {
    json out = json::array();
    for (const auto& [value, u] : by_pixels(t)) {
        json e = json::object();
        if (index_masks) e.set("value", value);
        else e.set("color", json(json::array_t{json((value >> 16) & 0xFFu), json((value >> 8) & 0xFFu), json(value & 0xFFu)}));
        e.set("pixels", u->pixels);
        e.set("files", u->files);
        json ex = json::object();
        ex.set("mask", example_of(t, value));
        ex.set("line", u->row);
        ex.set("x", u->x);
        ex.set("y", u->y);
        e.set("example", ex);
        out.push(e);
    }
    return out;
}

std::string common_reasons(const std::vector<rejected_row>& rows, std::size_t top) {
    std::map<std::string, std::size_t> counts;
    std::vector<std::string> order;
    for (const auto& r : rows) {
        std::string reason = r.reason;
        // Take out the file name the reason starts with ("/data/masks/x.png: ...").
        const std::size_t colon = reason.find(": ");
        if (colon != std::string::npos && reason.substr(0, colon).find_first_of("/.") != std::string::npos)
            reason = reason.substr(colon + 2);
        reason = reason.substr(0, reason.find(';'));  // advice is per value; the reason itself is before it
        std::string shape;
        for (std::size_t i = 0; i < reason.size(); ++i) {
            if (std::isdigit(static_cast<unsigned char>(reason[i]))) {
                while (i + 1 < reason.size() && std::isdigit(static_cast<unsigned char>(reason[i + 1]))) ++i;
                shape += 'N';
            } else {
                shape += reason[i];
            }
        }
        if (counts[shape]++ == 0) order.push_back(shape);
    }
    std::stable_sort(order.begin(), order.end(), [&](const auto& a, const auto& b) { return counts[a] > counts[b]; });
    std::string out;
    for (std::size_t i = 0; i < order.size() && i < top; ++i)
        out += (i ? "; " : "") + std::to_string(counts[order[i]]) + " x " + order[i];
    if (order.size() > top) out += "; and " + std::to_string(order.size() - top) + " other reason(s)";
    return out;
}

namespace {

// The report's "rejected" array: line, image, label and reason of every rejected row.
json rejected_rows_json(const std::vector<rejected_row>& rows) {
    json rejected = json::array();
    for (const auto& row : rows) {
        json e = json::object();
        e.set("line", row.csv_line);
        e.set("image", row.image);
        e.set("label", row.label);
        e.set("reason", row.reason);
        rejected.push(e);
    }
    return rejected;
}

}  // namespace

std::string rejected_csv(const std::vector<rejected_row>& rows) {
    std::string out = "line,image,label,reason\n";
    for (const auto& r : rows)
        out += std::to_string(r.csv_line) + "," + csv_quoted(r.image) + "," + csv_quoted(r.label) + "," +
               csv_quoted(r.reason) + "\n";
    return out;
}

json make_report(const build_options& o, const input_list& input, const build_totals& t, double seconds,
                 const json& manifest, unsigned threads, std::uint64_t shards_written, std::uint64_t shards_reused,
                 bool index_masks, std::uint64_t bytes_out, const std::vector<std::string>& id_changes) {
    json r = json::object();
    r.set("dataset", o.out_dir);
    r.set("content_hash", manifest.at("content_hash"));
    r.set("rows", input.row_count());
    r.set("records", t.records);
    r.set("reused_records", t.reused);
    r.set("decoded_records", t.records - t.reused);
    r.set("shards_written", shards_written);
    r.set("shards_reused", shards_reused);
    r.set("skipped", t.rejected.size());
    r.set("rejected", rejected_rows_json(t.rejected));
    r.set("seconds", seconds);
    r.set("threads", threads);
    r.set("samples_per_second", seconds > 0 ? double(t.records) / seconds : 0.0);
    r.set("bytes_in", t.bytes_in);
    r.set("bytes_decoded", t.decoded_bytes);
    r.set("bytes_stored", t.stored_bytes);
    r.set("bytes_out", bytes_out);
    r.set("compression_ratio", t.stored_bytes ? double(t.decoded_bytes) / double(t.stored_bytes) : 1.0);
    const bool seg = input.task == task_kind::segmentation;
    std::uint64_t total = 0;
    for (auto c : t.class_counts) total += c;
    json freq = json::array();
    for (std::size_t c = 0; c < input.classes.size(); ++c) {
        json e = json::object();
        e.set("class", input.classes[c].name);
        e.set(seg ? "pixels" : "samples", t.class_counts[c]);
        if (seg) {
            const std::uint64_t tolerant = c < t.tolerance_counts.size() ? t.tolerance_counts[c] : 0;
            e.set("exact_pixels", t.class_counts[c] - std::min(tolerant, t.class_counts[c]));
            e.set("tolerance_pixels", tolerant);
        }
        e.set("fraction", total ? double(t.class_counts[c]) / double(total) : 0.0);
        freq.push(e);
    }
    r.set("class_frequencies", freq);
    r.set("images_reduced_to_8_bits", t.lost_bits);  // of decoded_records
    if (seg) r.set("unknown_color_pixels", t.unknown_pixels);
    if (seg) r.set(index_masks ? "unknown_values" : "unknown_colors", unknown_values_json(t, index_masks));
    if (seg) r.set("unknown_pixels_counted", unknown_pixels_counted(o));
    json warnings = json::array();
    for (const auto& w : build_warnings(input, t, index_masks, o)) warnings.push(w);
    for (const auto& w : id_changes) warnings.push(w);
    r.set("warnings", warnings);
    return r;
}

void log_build_messages(const build_options& options, const input_list& input, const build_totals& totals, bool index_masks,
                        const std::vector<std::string>& id_changes) {
    if (input.task == task_kind::classification)
        for (const auto& line : class_id_table(input, totals)) spdlog::info("{}", line);
    for (const auto& w : build_warnings(input, totals, index_masks, options)) spdlog::warn("{}", w);
    for (const auto& w : id_changes) spdlog::warn("{}", w);
}

void write_report_files(const output_folder& folder, const build_options& options, const json& report,
                        const std::vector<rejected_row>& rejected) {
    const std::string report_text = report.dump();
    folder.write_atomically("report.json", report_text);
    if (!options.report_path.empty()) write_file_atomically(options.report_path, report_text);
    if (options.on_error == error_policy::skip) folder.write_atomically("rejected.csv", rejected_csv(rejected));
    else folder.remove("rejected.csv");
}

build_stopped keep_failed_build(const build_options& options, const input_list& input, const build_totals& t,
                                const std::string& what) {
    const std::string dir = options.out_dir + "/" + dataset_writer::partial_dir;
    json report = json::object();
    report.set("dataset", options.out_dir);
    report.set("published", false);
    report.set("error", what);
    report.set("rows", input.row_count());
    report.set("rows_seen", t.rows);
    report.set("records", t.records);
    report.set("skipped", t.rejected.size());
    report.set("common_reasons", common_reasons(t.rejected, 5));
    report.set("rejected", rejected_rows_json(t.rejected));
    std::string where;
    try {
        write_file_atomically(dir + "/rejected.csv", rejected_csv(t.rejected));
        write_file_atomically(dir + "/report.json", report.dump());
        where = " Rejected rows: " + dir + "/rejected.csv; report: " + dir + "/report.json";
        if (!options.report_path.empty()) {
            write_file_atomically(options.report_path, report.dump());
            where += " and " + options.report_path;
        }
        where += ".";
    } catch (const std::exception& e) {
        where = " (the rejected rows could not be written: " + std::string(e.what()) + ")";
    }
    return build_stopped(what + ". Most common reasons: " + common_reasons(t.rejected) + "." + where);
}

}  // namespace shardpack
