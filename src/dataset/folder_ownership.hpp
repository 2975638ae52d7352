// Whether a build may write into a folder. shardpack writes only into a folder that is missing,
// empty, or its own dataset folder (it holds the marker .shardpack, or a manifest.json shardpack
// wrote). Anything else is refused with exit 2 naming what is there, unless --force; even then
// it never replaces or removes a file it did not write, so a foreign folder that holds any of
// the fixed names of a dataset folder (manifest.json, report.json, ...) is refused regardless.
// A link at any of those names is refused, and so is a dataset written by a newer format
// version (unless --force). Inputs lying where a build would write are refused too.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace shardpack {

class output_folder;

// What a build needs to know of a manifest.json it finds, read leniently (no shard is opened).
struct manifest_summary {
    bool is_shardpack = false;       // a JSON object with "format": "shardpack"
    std::string version;             // its format_version, as written
    bool version_known = false;      // a MAJOR.MINOR this writer writes or an older minor of it
    std::vector<std::string> shards; // the shard names it lists (only well-formed names), and its shard table's (1.2)
};
// Nothing when there is no manifest.json, or it is a link, not a regular file, over the
// reader's bounds (read_manifest) or not JSON: the folder then counts as shardpack's only by its marker.
std::optional<manifest_summary> read_manifest_summary(const output_folder& folder);

struct output_claim {
    std::shared_ptr<output_folder> folder;
    std::string real_path;      // the folder's canonical path, to compare with inputs
    bool owned_before = false;  // it held a shardpack dataset (marker or manifest) before this build
    bool created = false;       // this build made the folder
};

// Opens (creating it when missing) and checks the output folder; usage_error when a build must
// not write there. `inputs` (the CSV, the class table) are named in the refusal when they lie
// in the folder. A folder made here is removed again when it is refused. force_offered: the
// command has a --force to suggest (merge has none).
output_claim claim_output_folder(const std::string& dir, bool force, const std::vector<std::string>& inputs = {},
                                 bool force_offered = true);

// usage_error when the file at `path` (described as `what`, e.g. "--csv list.csv" or
// "list.csv:12: image x.png"), links resolved, lies in the claimed folder under a name a build
// writes or removes, or below its .partial/: the build would overwrite or delete it.
void refuse_input_in_output(const output_claim& claim, const std::string& path, const std::string& what);
// A cheap test before that one, for the many image and mask paths: whether the path's last
// component is such a name or the path passes through a .partial folder. Most fail it and need
// no file system call. (A link named otherwise that points at such a file is not found this
// way; the list, class table and --report get the full test.)
bool may_be_dataset_file(const std::string& path);

}  // namespace shardpack
