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

}  // namespace shardpack
