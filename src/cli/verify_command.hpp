// `shardpack verify DIR`: every checksum, every record decoded, the manifest checked
// (src/inspect/dataset_verifier.hpp does the work). Exit 1 when anything is wrong.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace shardpack {

struct verify_command_options {
    std::string dir;
    bool json = false;
};

CLI::App* add_verify_command(CLI::App& app, verify_command_options& options);
int run_verify_command(const verify_command_options& options);

}  // namespace shardpack
