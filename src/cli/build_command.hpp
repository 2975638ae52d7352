// `shardpack build`: its options as the command line gives them, and their translation into
// build_options (where every bad value or combination becomes a usage_error, exit code 2).
#pragma once
#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "pipeline/build_options.hpp"

namespace shardpack {

struct build_command_options {
    std::string csv, out, root, image_col = "0", label_col = "1", task = "auto", classes;
    bool header = false, no_header = false;
    std::string color = "rgb", size, resize, crop = "center", filter = "area", depth = "auto";
    std::string label_layout = "onehot", unknown_label = "error";
    std::string compression = "zstd";
    int level = 1;
    std::uint32_t band_rows = 0;
    std::string shard_size = "256MiB";
    bool shuffle = false;
    std::uint64_t seed = 0;
    std::string on_error = "fail";
    std::uint64_t max_errors = 0;
    unsigned threads = 0;
    std::string memory_limit;  // empty: default_memory_limit()
    std::string report, config;
    bool json = false;
    bool full = false;
    std::string partition;  // "K/N" or "slurm"
    unsigned color_tolerance = 0;
    std::string mask_values = "auto", ignore_values;
    std::string images, masks;  // --images DIR [--masks DIR] instead of --csv
    std::string mask_suffix, image_suffix;  // how masks pair with images (--mask-suffix _L)
    std::vector<std::string> fields, field_names;  // --field NAME:KIND[=SOURCE], --field-names NAME=FILE
    std::string unknown_name = "error";            // --unknown-name
    bool force = false;
    // Hidden, for the Python writer (shardpack.write): samples from the sample stream on standard
    // input (pipeline/sample_stream.hpp) instead of a list, and the progress line without a terminal.
    std::string samples;
    bool progress = false;
};

// --ignore-values "255,0": the values, each 0..65535; throws usage_error naming a bad one.
std::vector<std::uint16_t> parse_ignore_values(const std::string& text);

CLI::App* add_build_command(CLI::App& app, build_command_options& options);
// A local path option (build --out and --report, merge --out, export --out) given a URL
// (SCHEME://..., s3:// or any other): a usage_error saying so, with `hint` (what to do instead),
// rather than a local folder named "s3:". "./s3://x" is a local path and passes.
void refuse_url(const std::string& option, const std::string& path, const std::string& hint);
// --mask-suffix and --image-suffix (build and colors): how --images pairs masks with images.
void add_mask_pairing_options(CLI::App& command, std::string& mask_suffix, std::string& image_suffix);
build_options to_build_options(const build_command_options& options);
// Parses sizes such as 4096, 64KiB, 256MiB, 1GiB, 10MB: decimal digits only (no sign, no
// spaces) and a unit. Throws usage_error naming `option` for anything else or a value that
// does not fit in 64 bits (no wrap-around).
std::uint64_t parse_byte_size(const std::string& option, const std::string& text);

// A CLI11 check for an integer option: decimal digits only (no sign: "-1" is refused rather
// than wrapped) and at most `max`. CLI11 names the option in the message (exit 2).
CLI::Validator count_in_range(std::uint64_t max);
// CLI11 2.1 does not read a subcommand's config file, so `build --config FILE` is expanded
// here, before parsing: each `key = value` of FILE (top level or a [build] section) becomes
// `--key value`, unless the command line gives that option itself (the command line wins).
// Throws usage_error for an unreadable or malformed file.
// build_command: the build subcommand, whose options are the keys a config may hold; a key
// that is none of them is a usage_error naming the file and the key.
std::vector<std::string> expand_build_config(const std::vector<std::string>& args, const CLI::App* build_command = nullptr);

int run_build_command(const build_command_options& options, bool progress);

}  // namespace shardpack
