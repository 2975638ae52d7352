// `shardpack verify`: reads everything and trusts nothing. Checks the manifest against the
// folder and the shards (names, sizes, whole-file hashes, the content hash, extra or missing
// shards), every record's checksum, its decompression, its header, and its label values.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace shardpack {

class dataset;

struct verify_result {
    std::uint64_t records_checked = 0;
    std::uint64_t shards_checked = 0;
    std::uint64_t bytes_checked = 0;
    std::vector<std::string> problems;  // each names the shard and record where there is one
    std::vector<std::string> warnings;  // not damage: e.g. a stale temporary file
    bool ok() const { return problems.empty(); }
};

// Where the manifest's copies of the schema and the class table (which readers ignore: the
// shards are authoritative) contradict the shards' header, each as "manifest.json: PATH is X,
// the shards say Y". Empty when they agree.
std::vector<std::string> schema_copy_contradictions(const dataset& ds);

// Stops collecting after `max_problems` problems.
verify_result verify_dataset(const std::string& dir, std::size_t max_problems = 100);

}  // namespace shardpack
