#include "cli/verify_command.hpp"

#include <spdlog/spdlog.h>

#include <iostream>

#include "inspect/dataset_verifier.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack {

CLI::App* add_verify_command(CLI::App& app, verify_command_options& o) {
    CLI::App* c = app.add_subcommand("verify", "Check every checksum, decode every record, check the manifest");
    c->add_option("dir", o.dir, "Dataset folder, or s3://BUCKET/PREFIX")->required();
    c->add_flag("--json", o.json, "Print a JSON summary to stdout");
    return c;
}

int run_verify_command(const verify_command_options& o) {
    const verify_result r = verify_dataset(o.dir);
    for (const auto& w : r.warnings) spdlog::warn("{}", w);
    for (const auto& p : r.problems) spdlog::error("{}", p);
    if (o.json) {
        detail::json out = detail::json::object();
        out.set("ok", r.ok());
        out.set("records", r.records_checked);
        out.set("shards", r.shards_checked);
        out.set("bytes", r.bytes_checked);
        detail::json problems = detail::json::array();
        for (const auto& p : r.problems) problems.push(p);
        out.set("problems", problems);
        std::cout << out.dump();
    }
    if (!r.ok()) {
        spdlog::error("{}: verification failed: {} problem(s)", o.dir, r.problems.size());
        return 1;
    }
    spdlog::info("{}: ok: {} records in {} shards, {} bytes checked", o.dir, r.records_checked, r.shards_checked,
                 r.bytes_checked);
    return 0;
}

}  // namespace shardpack
