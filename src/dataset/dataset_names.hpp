// The names shardpack gives files in a dataset folder. Nothing else there is its own: a build
// writes, replaces or removes only names of these forms, and in a folder it does not own (see
// folder_ownership.hpp) not even those.
#pragma once
#include <string_view>

namespace shardpack {

// shard-NNNNN-<16 lowercase hex digits>.spk (NNNNN: at least 5 decimal digits).
bool is_shard_name(std::string_view name);
// shards-<16 lowercase hex digits>.spt: a binary shard table (format 1.2), named by its XXH3-64.
bool is_shard_table_name(std::string_view name);
// A temporary of a build with process id P: .tmp-P-shard-N.spk, .tmp-P-fingerprints.tsv, or
// NAME.tmp-P for a small file NAME it replaces atomically (manifest.json, report.json,
// rejected.csv, fingerprints.tsv, .shardpack, or a shard table).
bool is_temporary_name(std::string_view name);
// The fixed names of a dataset folder: manifest.json, report.json, rejected.csv,
// fingerprints.tsv, .partial, .shardpack (the folder's marker and ledger), .shardpack.lock.
bool is_reserved_name(std::string_view name);
// Any of the above: a name a build may create, replace or remove.
inline bool is_dataset_file_name(std::string_view name) {
    return is_shard_name(name) || is_shard_table_name(name) || is_temporary_name(name) || is_reserved_name(name);
}

}  // namespace shardpack
