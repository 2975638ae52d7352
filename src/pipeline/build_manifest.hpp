// What a build records about itself in manifest.json (spec 13.3) beside its shards: the
// effective options ("build"), the digest of everything that shapes a record's bytes (which
// decides what a rebuild may take back), and a part's "partition" member.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "input/input_list.hpp"
#include "pipeline/build_options.hpp"
#include "pipeline/partition.hpp"
#include "shardpack/detail/format.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack {

// The class table as the format stores it.
std::vector<detail::class_record> to_class_records(const std::vector<class_entry>& classes);

// The options that shape the output, as recorded in the manifest (no thread count, no paths
// of the machine that built it).
detail::json effective_options_json(const build_options& options, task_kind task);

// The manifest's "build" object: effective_options_json and, for segmentation, how mask values
// were read: mask_values, then color_tolerance (colors) or ignore_values and class_values
// (index masks).
detail::json manifest_build_json(const build_options& options, const input_list& input, mask_value_kind mask_values);

// Everything besides a row's own files that shapes its record's bytes. A previous build's
// records are taken back only when this matches; shard size and order do not enter into it.
std::string record_options_digest(const build_options& options, const detail::schema_record& schema,
                                  const std::vector<detail::class_record>& classes, const detail::json& libraries,
                                  const char* mask_values, const std::vector<class_entry>& table);

// The manifest's "partition" member of a `build --partition` part: K, N, the rows of the
// whole list and the part's slice of them, and digests of the options (`options_digest`: the
// manifest's `build` object and everything that shapes a record's bytes; `records_digest`: the
// latter alone, as fingerprints.tsv has it). Parts of one build agree on all but the slice.
detail::json partition_json(const partition_spec& part, const row_slice& slice, std::uint64_t rows,
                            const detail::json& build, const std::string& record_options_digest);
std::string partition_options_digest(const detail::json& build, const std::string& record_options_digest);

}  // namespace shardpack
