#include "cli/push_command.hpp"

#include <spdlog/spdlog.h>

#include <iostream>

#include "errors.hpp"
#include "remote/dataset_push.hpp"
#include "remote/s3_client.hpp"

namespace shardpack {

CLI::App* add_push_command(CLI::App& app, push_command_options& o) {
    CLI::App* p = app.add_subcommand(
        "push",
        "Upload a verified dataset to S3-compatible object storage: changed shards first, manifest.json last "
        "(readers see the old dataset or the new one); credentials and endpoint from AWS_* variables or ~/.aws");
    p->add_option("dir", o.dir, "Dataset folder (verified in full before anything is sent)")->required();
    p->add_option("url", o.url, "Destination s3://BUCKET/PREFIX")->required();
    p->add_flag("--json", o.json, "Print the push report as JSON to stdout");
    return p;
}

int run_push_command(const push_command_options& o) {
    if (!remote::is_s3_url(o.url)) throw usage_error("push: the destination must be an s3://BUCKET/PREFIX URL, not \"" + o.url + "\"");
    try {
        remote::parse_s3_url(o.url);
    } catch (const std::exception& e) {
        throw usage_error(std::string("push: ") + e.what());
    }
    auto client = remote::shared_client();
    const remote::push_result r =
        remote::push_dataset(o.dir, o.url, *client, [](const std::string& line) { spdlog::info("{}", line); });
    spdlog::info("{}: {} records in {} shard(s): {} uploaded ({} bytes), {} already there, {} removed, {} kept for readers "
                 "of the previous manifest{}; content hash {}, {:.2f} s",
                 r.url, r.records, r.shards, r.shards_uploaded, r.bytes_uploaded, r.shards_present, r.shards_removed,
                 r.shards_retained, r.manifest_unchanged ? " (manifest unchanged)" : "", r.content_hash, r.seconds);
    if (r.unknown_objects)
        spdlog::warn("{}: {} object(s) under the prefix are named by no shardpack manifest or ledger; left alone", r.url,
                     r.unknown_objects);
    if (o.json) std::cout << r.report().dump();
    return 0;
}

}  // namespace shardpack
