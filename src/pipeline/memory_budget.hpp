// The build's memory budget (--memory-limit): how many threads and rows in flight it allows,
// and how much one row may take. Every row in flight holds its files and its record; every
// thread, the decode of one row. So with T threads and R rows in flight, a row that stays
// within per_row bytes keeps the whole build within the limit, whatever the input.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace shardpack {

// Physical memory, or the cgroup's limit (v2 memory.max, v1 memory.limit_in_bytes) where lower.
std::uint64_t available_memory_bytes();

// The default --memory-limit: a quarter of available_memory_bytes().
std::uint64_t default_memory_limit();

// "6.0 GiB", for messages and --help.
std::string format_bytes(std::uint64_t bytes);

// The least --memory-limit accepted.
inline constexpr std::uint64_t min_memory_limit = std::uint64_t(64) << 20;

struct memory_plan {
    std::uint64_t limit = 0;       // the whole build's budget
    unsigned threads = 0;          // worker threads
    std::size_t rows_in_flight = 0;
    std::uint64_t per_row = 0;     // files + decode + record of one row
    std::vector<std::string> notes;  // why threads or rows were lowered (logged as warnings)
};

// requested_threads: 0 for all cores. cores: the cores this process may use. The thread count
// is capped at 4 x cores (more cannot run at once and each costs memory) and where each thread
// would get less than 32 MiB; rows in flight are 4 x threads, fewer where a row would get less
// than 512 MiB, never fewer than the threads.
memory_plan plan_memory(std::uint64_t limit, unsigned requested_threads, unsigned cores);

}  // namespace shardpack
