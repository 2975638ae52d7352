// libFuzzer target: bytes -> the CSV reader, the class tables and the input list (src/input/).
//
// Input: one selector byte, then the text.
//   bits 0-1: header mode (detect, present, absent, detect)
//   bits 2-3: task (automatic, segmentation, classification, automatic)
//   bits 4-5: columns (0/1, 1/0, by name image/label, 2/0)
//   bit 6:    classification with a names list (else the names come from the CSV)
// Every input goes through parse_csv, load_class_dict and load_class_names (the text as the
// class file), and load_input_list (the text as the list, next to a few existing image files
// so that header and task detection see real paths). They may throw input_error or usage_error;
// anything else, a sanitizer report or a broken invariant is a finding. The text is also read
// as a fingerprints.tsv (load_fingerprints: the other text file a build reads, from the output
// folder), which refuses by returning nothing and throws nothing.
#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <typeinfo>

#include "errors.hpp"
#include "dataset/input_fingerprints.hpp"
#include "fuzz_common.hpp"
#include "input/class_table.hpp"
#include "input/csv_reader.hpp"
#include "input/input_list.hpp"

using namespace shardpack;
using shardpack::fuzz::finding;

namespace {

volatile std::uint64_t sink;

struct files {
    std::string dir, list, dict, names;
};

const files& scratch() {
    static const files f = [] {
        files s;
        s.dir = fuzz::scratch_dir("csv");
        s.list = s.dir + "/list.csv";
        s.dict = s.dir + "/class_dict.csv";
        s.names = s.dir + "/names.txt";
        fuzz::fs::create_directories(s.dir + "/images");
        for (const char* name : {"a.png", "b.jpg", "images/1.png", "images/2.png", "0", "1"}) fuzz::put_file(s.dir + "/" + name, "x");
        fuzz::put_file(s.dict, "name,r,g,b\nsky,128,128,128\nroad,128,64,128\ncar,64,0,128\n");
        fuzz::put_file(s.names, "cat\ndog\n2\n");
        return s;
    }();
    return f;
}

void check_rows(const std::vector<csv_row>& rows) {
    std::size_t last = 0;
    for (const auto& r : rows) {
        if (r.cells.empty()) finding("parse_csv returned a row with no cells");
        if (r.line <= last) finding("parse_csv line numbers do not increase");
        last = r.line;
    }
}

// dictionary: a class_dict.csv, which gives every class a color, a mask value (an id column,
// for index masks), or both; each of them unique.
void check_classes(const std::vector<class_entry>& classes, bool dictionary) {
    if (classes.empty() || classes.size() > max_class_count) finding("class table of impossible size");
    const bool colors = dictionary && classes_have_colors(classes);
    const bool values = dictionary && classes_have_values(classes);
    if (dictionary && !colors && !values) finding("a class dictionary without a color or an id for every class accepted");
    std::set<std::string> names;
    std::set<std::uint32_t> rgb;
    std::set<std::int32_t> ids;
    for (const auto& c : classes) {
        if (c.name.empty() || !names.insert(c.name).second) finding("empty or duplicate class name accepted");
        if (colors && !rgb.insert(std::uint32_t(c.r) << 16 | c.g << 8 | c.b).second) finding("duplicate color accepted");
        if (values && (c.value < 0 || c.value > 65535 || !ids.insert(c.value).second))
            finding("duplicate or out-of-range class id accepted");
    }
}

template <class F>
void expect_input_errors(const char* what, F&& f) {
    try {
        f();
    } catch (const input_error&) {
    } catch (const usage_error&) {
    } catch (const std::exception& e) {
        finding(std::string(what) + " threw " + typeid(e).name() + ": " + e.what());
    }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
    (void)scratch();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned sel = data[0];
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const files& f = scratch();

    expect_input_errors("parse_csv", [&] { check_rows(parse_csv(text, "fuzz.csv")); });
    fuzz::put_file(f.list, text.data(), text.size());
    expect_input_errors("load_class_dict", [&] { check_classes(load_class_dict(f.list), true); });
    expect_input_errors("load_class_names", [&] { check_classes(load_class_names(f.list), false); });

    try {
        if (const auto fp = load_fingerprints(f.list)) {
            std::uint64_t n = 0;
            for (const auto& g : fp->groups) n += g.records.size();
            sink = sink + n;
        }
    } catch (const std::exception& e) {
        finding(std::string("load_fingerprints threw ") + typeid(e).name() + ": " + e.what());
    }

    input_options o;
    o.csv_path = f.list;
    static const header_mode headers[4] = {header_mode::detect, header_mode::present, header_mode::absent, header_mode::detect};
    static const task_kind tasks[4] = {task_kind::automatic, task_kind::segmentation, task_kind::classification,
                                       task_kind::automatic};
    static const char* const columns[4][2] = {{"0", "1"}, {"1", "0"}, {"image", "label"}, {"2", "0"}};
    o.header = headers[sel & 3];
    o.task = tasks[(sel >> 2) & 3];
    o.image_col = columns[(sel >> 4) & 3][0];
    o.label_col = columns[(sel >> 4) & 3][1];
    if (o.task == task_kind::segmentation || (o.task == task_kind::automatic && !(sel & 0x40))) o.classes_path = f.dict;
    else if (sel & 0x40) o.classes_path = f.names;
    expect_input_errors("load_input_list", [&] {
        const input_list list = load_input_list(o);
        if (list.task == task_kind::automatic) finding("load_input_list left the task automatic");
        for (std::size_t i = 0; i < list.size(); ++i) {
            const sample_row r = list.row(i);
            if (r.key.empty() || list.image_path(i).empty()) finding("a row without an image path");
            if (list.task == task_kind::classification && (r.class_id < 0 || std::size_t(r.class_id) >= list.classes.size()))
                finding("class id " + std::to_string(r.class_id) + " outside the " + std::to_string(list.classes.size()) +
                        " classes");
            if (list.task == task_kind::segmentation && list.label_path(i).empty()) finding("a segmentation row without a mask");
        }
        sink = sink + list.size() + list.classes.size();
    });
    return 0;
}
