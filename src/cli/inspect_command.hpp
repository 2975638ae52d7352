// `shardpack inspect DIR`: a dataset's schema, classes, counts, sizes and shards
// (src/inspect/dataset_inspector.hpp does the work).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace shardpack {

struct inspect_command_options {
    std::string dir;
    bool json = false;
    std::string chart;  // --chart FILE.png: class frequencies as a bar chart
};

CLI::App* add_inspect_command(CLI::App& app, inspect_command_options& options);
int run_inspect_command(const inspect_command_options& options);

}  // namespace shardpack
