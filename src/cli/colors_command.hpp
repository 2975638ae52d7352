// `shardpack colors`: the colors (or index values) the masks of a list hold, against a class
// dictionary when one is given; optionally writes a dictionary that would build.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace shardpack {

struct colors_command_options {
    std::string csv, images, masks, mask_suffix, image_suffix, classes, root, image_col = "0", label_col = "1", mask_values = "auto", ignore_values, write_dict;
    unsigned tolerance = 0, threads = 0;
    bool json = false;
};

CLI::App* add_colors_command(CLI::App& app, colors_command_options& options);
int run_colors_command(const colors_command_options& options);

}  // namespace shardpack
