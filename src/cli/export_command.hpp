// `shardpack export DIR --index I --out PREFIX`: records as PNG files, their keys and classes
// as JSON on stdout (src/inspect/record_exporter.hpp does the work); with --grid, one contact
// sheet PNG of many records, as stored or as the loader delivers them (src/inspect/contact_sheet.hpp).
#pragma once
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardpack {

struct export_command_options {
    std::string dir, prefix, range, key;
    std::vector<std::size_t> indices;
    bool overlay = false;
    // --grid: a contact sheet
    bool grid = false;
    std::size_t count = 16, tile = 256, columns = 0;
    std::string sample_seed;  // set: --count records drawn at random with this seed
    double alpha = 0.5;
    std::vector<std::string> hide, background;
    std::string crop, crop_position = "center";
    double hflip = 0, vflip = 0;
    std::uint64_t epoch = 0, seed = 0;
};

CLI::App* add_export_command(CLI::App& app, export_command_options& options);
int run_export_command(const export_command_options& options);

}  // namespace shardpack
