#include "cli/merge_command.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <memory>

#include "cli/build_command.hpp"
#include "errors.hpp"
#include "dataset/dataset_merger.hpp"
#include "io/output_folder.hpp"
#include "pipeline/build_pipeline.hpp"
#include "remote/part_fetch.hpp"
#include "remote/s3_client.hpp"

namespace shardpack {

CLI::App* add_merge_command(CLI::App& app, merge_command_options& o) {
    CLI::App* m = app.add_subcommand("merge", "Merge the parts of a build --partition K/N into one dataset, checked and atomic");
    m->add_option("--out", o.out, "The merged dataset's folder (created; an existing dataset is replaced atomically); required unless --check");
    m->add_option("parts", o.parts,
                  "The part folders (any order), or one folder holding them; or the same on object storage "
                  "(s3://BUCKET/PREFIX: fetched first, then checked as local parts)")->required();
    m->add_option("--link", o.link,
                  "hard: hard-link the part shards that go over unchanged, copying where a link cannot be made "
                  "(another file system); copy: always copy them. Parts are never changed.")
        ->check(CLI::IsMember({"hard", "copy"}))->capture_default_str();
    m->add_flag("--check", o.check,
                "Only check: the parts of one build, all there, every record's checksum and every shard's hash; write nothing");
    m->add_flag("--json", o.json, "Print the merge report as JSON to stdout");
    m->add_option("--fetch-dir", o.fetch_dir,
                  "s3:// parts: the new folder they are fetched into before the merge checks them (removed after; "
                  "default OUT.fetched-parts; required with --check)");
    return m;
}

int run_merge_command(const merge_command_options& o) {
    if (o.out.empty() && !o.check) throw usage_error("merge: --out DIR is required (or --check to only check the parts)");
    if (!o.out.empty() && o.check) throw usage_error("merge: --check writes nothing; leave out --out");
    refuse_url("--out", o.out, "merge into a local folder, then upload it with `shardpack push DIR " + o.out + "`");
    merge_options mo;
    mo.check_only = o.check;
    mo.parts = o.parts;
    mo.out_dir = o.out;
    mo.copy = o.link == "copy";
    mo.stop = &build_interrupt_signal;
    const auto remote = [](const std::string& p) { return remote::is_s3_url(p); };
    const bool fetch = std::any_of(o.parts.begin(), o.parts.end(), remote);
    if (fetch && !std::all_of(o.parts.begin(), o.parts.end(), remote))
        throw usage_error("merge: give parts on object storage (s3://) or local parts, not both");
    if (!fetch && !o.fetch_dir.empty()) throw usage_error("merge: --fetch-dir is for parts on object storage (s3://)");
    const std::string fetch_dir = !o.fetch_dir.empty() ? o.fetch_dir : o.out.empty() ? "" : o.out + ".fetched-parts";
    if (fetch && fetch_dir.empty())
        throw usage_error("merge --check of s3:// parts: give --fetch-dir DIR, where they are fetched to be checked");
    // The fetched parts are removed whatever happens (the merged dataset keeps its own links).
    std::shared_ptr<output_folder> staging;
    struct remove_staging {
        std::shared_ptr<output_folder>& folder;
        std::string path;
        ~remove_staging() {
            if (!folder) return;
            try {
                remote::remove_fetched(*folder);
                folder.reset();
                output_folder::remove_if_empty(path);
            } catch (const std::exception& e) {
                spdlog::warn("could not remove the fetched parts in {}: {}", path, e.what());
            }
        }
    } cleanup{staging, fetch_dir};
    if (fetch) {
        auto folder = output_folder::open(fetch_dir, true);
        if (!folder->names().empty())
            throw usage_error("merge: --fetch-dir " + fetch_dir + " is not empty; s3:// parts are fetched into a new folder");
        staging = folder;
        mo.parts = remote::fetch_parts(o.parts, *staging);
        spdlog::info("fetched {} part(s) from object storage into {}", mo.parts.size(), fetch_dir);
    }
    const merge_result r = merge_parts(mo);
    if (r.interrupted_by) {
        spdlog::error("interrupted by signal {}: nothing was published; {} is unchanged", r.interrupted_by, o.out);
        return 128 + r.interrupted_by;
    }
    if (o.check) {
        spdlog::info("{} parts of one build, all present: {} records in {} shard(s), {} bytes checked, {:.2f} s", r.parts,
                     r.records, r.shards, r.bytes, r.seconds);
        if (o.json) std::cout << r.report.dump();
        return 0;
    }
    spdlog::info("{}: merged {} parts: {} records in {} shard(s) ({} linked, {} copied, {} written), {} bytes, {:.2f} s; "
                 "content hash {}", o.out, r.parts, r.records, r.shards, r.shards_linked, r.shards_copied, r.shards_written,
                 r.bytes, r.seconds, r.manifest.at("content_hash").as_string());
    if (o.json) std::cout << r.report.dump();
    return 0;
}

}  // namespace shardpack
