// `shardpack push DIR s3://bucket/prefix`: publishes a verified dataset to object storage
// (see src/remote/dataset_push.hpp for the order of the steps and the grace rule).
#pragma once
#include <CLI/CLI.hpp>
#include <string>

namespace shardpack {

struct push_command_options {
    std::string dir, url;
    bool json = false;
};

CLI::App* add_push_command(CLI::App& app, push_command_options& options);
int run_push_command(const push_command_options& options);

}  // namespace shardpack
