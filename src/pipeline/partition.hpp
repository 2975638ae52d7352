// `build --partition K/N`: which contiguous slice of the output order one machine packs, and
// where K and N come from (the command line, or a Slurm job array's environment).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace shardpack {

struct partition_spec {
    std::uint64_t index = 0;  // K, 0 <= K < N
    std::uint64_t count = 1;  // N
};

// Rows [first, first + size) of the output order (after --shuffle: slices of the one global
// permutation). The first n mod N parts get one row more, as the reader's `uneven` policy:
// first = K * floor(n / N) + min(K, n mod N).
struct row_slice {
    std::uint64_t first = 0;
    std::uint64_t size = 0;
};
row_slice partition_slice(std::uint64_t rows, const partition_spec& part);

// Parses "K/N" or "slurm". For "slurm", `getenv` (std::getenv by default) supplies
// SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_COUNT, SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_MAX and
// SLURM_ARRAY_TASK_STEP: K = ID - MIN, N = COUNT; an array with a step or holes is refused, and
// so are variables that contradict each other (MAX below MIN, ID outside [MIN, MAX], COUNT more
// than MAX - MIN + 1).
// Throws usage_error with the reason.
using env_lookup = std::function<const char*(const char*)>;
partition_spec parse_partition(const std::string& text, const env_lookup& getenv = {});

}  // namespace shardpack
