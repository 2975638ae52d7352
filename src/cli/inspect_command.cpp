#include "cli/inspect_command.hpp"

#include <iostream>

#include "errors.hpp"
#include "inspect/class_chart.hpp"
#include "inspect/dataset_inspector.hpp"
#include "inspect/record_exporter.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {

CLI::App* add_inspect_command(CLI::App& app, inspect_command_options& o) {
    CLI::App* c = app.add_subcommand("inspect", "Show a dataset's schema, classes, counts, sizes and shards");
    c->add_option("dir", o.dir, "Dataset folder, or s3://BUCKET/PREFIX")->required();
    c->add_flag("--json", o.json, "Print JSON to stdout");
    c->add_option("--chart", o.chart,
                  "Also write FILE.png: a bar chart of the class frequencies (labelled pixels and records holding each "
                  "class for segmentation, records for classification), counted from every record's label");
    return c;
}

namespace {

// Counts the classes, draws the chart into `path` and returns the counts for --json.
detail::json write_chart(const std::string& dir, const std::string& path) {
    const dataset ds = dataset::open(dir);
    const class_counts counts = count_classes(ds);
    const class_chart chart = render_class_chart(ds, counts, dir + ": class frequencies");
    write_png_file(path, chart.canvas);
    detail::json out = detail::json::object();
    out.set("file", path);
    out.set("records", counts.total_records);
    if (counts.segmentation) out.set("labelled_pixels", counts.labelled_pixels);
    detail::json classes = detail::json::array();
    for (std::size_t c = 0; c < counts.records.size(); ++c) {
        detail::json e = detail::json::object();
        e.set("class", ds.classes()[c].name);
        if (counts.segmentation) e.set("pixels", counts.pixels[c]);
        e.set("records", counts.records[c]);
        classes.push(e);
    }
    out.set("classes", classes);
    return out;
}

}  // namespace

int run_inspect_command(const inspect_command_options& o) {
    auto info = inspect_dataset(o.dir);
    if (!o.chart.empty()) info.set("chart", write_chart(o.dir, o.chart));
    std::cout << (o.json ? info.dump() : format_inspection(info) + (o.chart.empty() ? "" : "chart        " + o.chart + "\n"));
    return 0;
}

}  // namespace shardpack
