// `shardpack merge`: the parts of a `build --partition K/N` made into one dataset.
#pragma once
#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace shardpack {

struct merge_command_options {
    std::string out;
    std::vector<std::string> parts;
    std::string link = "hard";
    bool json = false;
    bool check = false;
    std::string fetch_dir;  // s3:// parts are fetched here first (default: OUT.fetched-parts)
};

CLI::App* add_merge_command(CLI::App& app, merge_command_options& options);
int run_merge_command(const merge_command_options& options);

}  // namespace shardpack
