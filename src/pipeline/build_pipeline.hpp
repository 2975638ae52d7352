// `shardpack build`: the assembly of the pipeline stages, and nothing else.
//
//   row source (serial, in order) -> file_loader (parallel) -> sample_transformer (parallel)
//     -> record_compressor (parallel) -> record_sink (serial, in order)
//
// A bounded number of tokens keeps memory flat however long the list is; the in-order sink
// makes the output independent of the thread count.
#pragma once
#include <atomic>
#include <string>

#include "pipeline/build_options.hpp"
#include "pipeline/record_sink.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack {

struct build_result {
    build_totals totals;
    detail::json manifest;
    detail::json report;
    double seconds = 0;
    int interrupted_by = 0;  // the signal that stopped the build, or 0
};

// Set by the CLI's SIGINT/SIGTERM handler; the build stops taking rows and publishes nothing.
extern std::atomic<int> build_interrupt_signal;

build_result run_build(const build_options& options);

// The options that shape the output, as recorded in the manifest (no thread count, no paths
// of the machine that built it).
detail::json effective_options_json(const build_options& options, task_kind task);

// The manifest's "partition" member of a `build --partition` part: K, N, the rows of the
// whole list and the part's slice of them, and digests of the options (`options_digest`: the
// manifest's `build` object and everything that shapes a record's bytes; `records_digest`: the
// latter alone, as fingerprints.tsv has it). Parts of one build agree on all but the slice.
detail::json partition_json(const partition_spec& part, const row_slice& slice, std::uint64_t rows,
                            const detail::json& build, const std::string& record_options_digest);
std::string partition_options_digest(const detail::json& build, const std::string& record_options_digest);

}  // namespace shardpack
