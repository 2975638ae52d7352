#include "cli/export_command.hpp"

#include <cstdint>
#include <iostream>

#include "cli/build_command.hpp"
#include "errors.hpp"
#include "inspect/record_exporter.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack {

CLI::App* add_export_command(CLI::App& app, export_command_options& o) {
    CLI::App* c = app.add_subcommand("export", "Write records as PNG files and print their keys and classes");
    c->add_option("dir", o.dir, "Dataset folder")->required();
    c->add_option("--index", o.indices, "Record index; several allowed (--index 3 7 or --index 3,7)")
        ->delimiter(',')
        ->check(count_in_range(UINT64_MAX));
    c->add_option("--range", o.range, "Records A:B (A inclusive, B exclusive)");
    c->add_option("--key", o.key, "The record(s) whose key (the image path as the CSV wrote it) is KEY");
    c->add_flag("--overlay", o.overlay, "Also write PREFIX.overlay.png: the label blended over the image");
    c->add_option("--out", o.prefix,
                  "Output prefix: PREFIX.image.png, PREFIX.label.png (PREFIX-I.* for several records); its folder is created")
        ->required();
    return c;
}

int run_export_command(const export_command_options& o) {
    if (o.indices.empty() && o.range.empty() && o.key.empty())
        throw usage_error("export: choose records with --index I, --range A:B or --key KEY");
    refuse_url("--out", o.prefix, "give a local path prefix");
    const auto chosen = select_records(o.dir, o.indices, o.range, o.key);
    if (chosen.size() == 1) {
        std::cout << export_record(o.dir, chosen[0], o.prefix, o.overlay).dump();
    } else {
        detail::json all = detail::json::array();
        for (auto i : chosen) all.push(export_record(o.dir, i, o.prefix + "-" + std::to_string(i), o.overlay));
        std::cout << all.dump();
    }
    return 0;
}

}  // namespace shardpack
