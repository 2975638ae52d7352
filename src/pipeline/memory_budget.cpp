#include "pipeline/memory_budget.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

namespace shardpack {

namespace {

// A cgroup limit file's value; "max" (no limit), a missing file or junk give 0.
std::uint64_t read_cgroup_limit(const char* path) {
    std::ifstream in(path);  // a kernel file of a fixed path, never user input
    std::string text;
    if (!(in >> text) || text == "max") return 0;
    try {
        return std::stoull(text);
    } catch (const std::exception&) {
        return 0;
    }
}

constexpr std::uint64_t mib = std::uint64_t(1) << 20;
constexpr std::uint64_t min_per_thread = 32 * mib;
// Rows in flight are lowered (down to one per thread) until a row may take this much, so that
// large photos fit on machines with many cores; more rows than threads only smooth the flow.
constexpr std::uint64_t wanted_per_row = 512 * mib;

}  // namespace

std::uint64_t available_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    std::uint64_t bytes = pages > 0 && page > 0 ? std::uint64_t(pages) * std::uint64_t(page) : std::uint64_t(4) << 30;
    for (const char* path : {"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
        const std::uint64_t cg = read_cgroup_limit(path);
        if (cg != 0 && cg < bytes) bytes = cg;
    }
    return bytes;
}

std::uint64_t default_memory_limit() { return std::max(min_memory_limit, available_memory_bytes() / 4); }

std::string format_bytes(std::uint64_t bytes) {
    char buf[32];
    if (bytes >= (std::uint64_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(1 << 30));
    else if (bytes >= mib) std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(mib));
    else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(bytes));
    return buf;
}

memory_plan plan_memory(std::uint64_t limit, unsigned requested_threads, unsigned cores) {
    memory_plan p;
    p.limit = limit;
    cores = std::max(1u, cores);
    unsigned threads = requested_threads ? requested_threads : cores;
    const unsigned max_threads = 4 * cores;
    if (threads > max_threads) {
        p.notes.push_back("--threads " + std::to_string(threads) + ": using " + std::to_string(max_threads) +
                          " (4 x the " + std::to_string(cores) + " cores this process may use)");
        threads = max_threads;
    }
    // Each thread decodes one row and each row in flight holds one: at least 2 rows per thread.
    const std::uint64_t by_memory = std::max<std::uint64_t>(1, limit / (2 * min_per_thread));
    if (threads > by_memory) {
        p.notes.push_back("using " + std::to_string(by_memory) + " threads instead of " + std::to_string(threads) +
                          " to stay within --memory-limit " + format_bytes(limit));
        threads = unsigned(by_memory);
    }
    p.threads = threads;
    std::size_t rows = std::size_t(threads) * 4;
    while (rows > threads && limit / (threads + rows) < wanted_per_row) --rows;
    p.rows_in_flight = rows;
    p.per_row = limit / (threads + rows);
    return p;
}

}  // namespace shardpack
