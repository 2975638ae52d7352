// What a build refuses before it writes anything: records over the format's size limit or the
// memory budget, and inputs that are files the build would write or remove.
#pragma once
#include "dataset/folder_ownership.hpp"
#include "input/input_list.hpp"
#include "pipeline/build_options.hpp"
#include "pipeline/memory_budget.hpp"
#include "shardpack/detail/format.hpp"

namespace shardpack {

// A fixed-size record (image and labels) must fit the format's 4 GiB record limit: refused
// before any row is read, as bad usage.
void check_fixed_record_size(const detail::schema_record& schema, const memory_plan& memory);

// The build writes manifest.json, report.json, rejected.csv, ... and shards into the output
// folder and removes some of them: refuse when an input is one of those files, before anything
// is written. Only paths whose last component is such a name are looked at on disk.
void refuse_inputs_in_output(const output_claim& claim, const build_options& options, const input_list& input);

}  // namespace shardpack
