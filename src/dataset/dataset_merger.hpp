// `shardpack merge`: the parts of a `build --partition K/N` made into one dataset, equal record
// for record, and shard for shard, to a one-machine build with the same options.
//
// Why shards are not simply linked: a shard's header holds its shard number and first record,
// which readers check against the manifest, and its name is the hash of all its bytes. Part
// K > 0 numbers its shards from 0, so its files cannot be the merged dataset's shards as they
// are. The merger runs the parts' stored records (never decoded, never recompressed; each
// checked against its checksum) through the same shard writer and the same content-defined
// cut policy as a build, so the merged shards are the one-machine build's shards, byte for
// byte, and so is the content hash. A part's shard that ends up with the same records at the
// same position (the parts before it hold no record, e.g. all of part 0's shards but the last)
// is taken over whole: hard-linked (copied across file systems, or with --link copy).
//
// The merge checks, before it writes anything, that exactly the parts 0..N-1 of one build are
// there (same N, rows, input list digest, options digest, schema and class table; each part's
// row slice where K/N puts it), and refuses a missing, duplicate or foreign part by name. It
// publishes like a build (shards in .partial/, manifest.json renamed into place last), so an
// interrupted or killed merge leaves no dataset, or the previous one, in the output folder.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "shardpack/detail/json.hpp"

namespace shardpack {

struct merge_options {
    std::vector<std::string> parts;  // part folders, in any order; or one folder holding them
    std::string out_dir;
    bool copy = false;               // --link copy: never hard-link a part's shard
    bool check_only = false;         // --check: every check of a merge (and the parts' whole-file
                                     // hashes), nothing written; out_dir unused
    const std::atomic<int>* stop = nullptr;  // a signal number once the merge should stop
};

struct merge_result {
    detail::json manifest;
    detail::json report;
    std::uint64_t parts = 0, records = 0, shards = 0, shards_linked = 0, shards_copied = 0, shards_written = 0;
    std::uint64_t bytes = 0;
    double seconds = 0;
    int interrupted_by = 0;
};

// The part folders `parts` names: the folders given, or, for one folder with no manifest.json,
// its subfolders that hold one (skipping `out_dir`), sorted by name.
std::vector<std::string> find_part_folders(const std::vector<std::string>& parts, const std::string& out_dir);

merge_result merge_parts(const merge_options& options);

}  // namespace shardpack
