// `shardpack merge` of parts on object storage (issue #34): each part's objects (manifest.json,
// shards, shard table, report) are fetched into a local folder, where the merge then checks them
// exactly as it checks local parts (every part of one build present, every record's checksum,
// every shard's hash) before it writes anything.
#pragma once
#include <string>
#include <vector>

#include "io/output_folder.hpp"

namespace shardpack::remote {

// The parts `urls` names: a URL holding manifest.json is a part; one that does not is a prefix
// holding parts (each sub-prefix with a manifest.json, sorted by name). Fetches every object
// directly under each part into staging/<the part's last path component> and returns those
// folders. Two parts of one name, or a URL with no part, are an input_error naming the URL.
std::vector<std::string> fetch_parts(const std::vector<std::string>& urls, const output_folder& staging);

// Removes what fetch_parts wrote into `staging`: its part folders and their files.
void remove_fetched(const output_folder& staging);

}  // namespace shardpack::remote
