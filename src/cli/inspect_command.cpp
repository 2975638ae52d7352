#include "cli/inspect_command.hpp"

#include <iostream>

#include "inspect/dataset_inspector.hpp"

namespace shardpack {

CLI::App* add_inspect_command(CLI::App& app, inspect_command_options& o) {
    CLI::App* c = app.add_subcommand("inspect", "Show a dataset's schema, classes, counts, sizes and shards");
    c->add_option("dir", o.dir, "Dataset folder, or s3://BUCKET/PREFIX")->required();
    c->add_flag("--json", o.json, "Print JSON to stdout");
    return c;
}

int run_inspect_command(const inspect_command_options& o) {
    const auto info = inspect_dataset(o.dir);
    std::cout << (o.json ? info.dump() : format_inspection(info));
    return 0;
}

}  // namespace shardpack
