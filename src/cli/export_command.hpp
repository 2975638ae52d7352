// `shardpack export DIR --index I --out PREFIX`: records as PNG files, their keys and classes
// as JSON on stdout (src/inspect/record_exporter.hpp does the work).
#pragma once
#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace shardpack {

struct export_command_options {
    std::string dir, prefix, range, key;
    std::vector<std::size_t> indices;
    bool overlay = false;
};

CLI::App* add_export_command(CLI::App& app, export_command_options& options);
int run_export_command(const export_command_options& options);

}  // namespace shardpack
