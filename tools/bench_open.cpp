// bench_open: what opening a dataset costs (time, memory, open shards), and reading from it.
//
//   bench_open DATASET [--reads N] [--io auto|mmap|pread] [--max-open-shards K]
//
// Opens the dataset once (timed), then reads N records (default 10,000) spread over the whole
// dataset (index i * size / N) with one read_context (timed). Prints one JSON line: open_s,
// read_s, the shards open after the reads, and the process's RSS after open and its peak
// (VmRSS and VmHWM of /proc/self/status, MB = 2^20 bytes), plus the mappings count
// (/proc/self/maps lines). Exit 0; 1 on a read error; 2 on bad usage.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "bench_common.hpp"
#include "shardpack/reader.hpp"

namespace {
double status_mb(const char* field) {
    const long long kb = shardpack::bench::process_status_kb(field);
    return kb < 0 ? -1 : double(kb) / 1024.0;
}
std::size_t mappings() {
    std::ifstream in("/proc/self/maps");
    std::string line;
    std::size_t n = 0;
    while (std::getline(in, line)) ++n;
    return n;
}
[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "bench_open: %s\nusage: bench_open DATASET [--reads N] [--io auto|mmap|pread] [--max-open-shards K]\n",
                 why.c_str());
    std::exit(2);
}
}  // namespace

int main(int argc, char** argv) {
    std::string folder;
    std::size_t reads = 10000;
    shardpack::open_options o;
    for (shardpack::bench::arg_walker args(argc, argv, usage); args.next();) {
        const std::string& a = args.arg();
        if (a == "--reads") reads = args.uint_value(0);
        else if (a == "--max-open-shards") o.max_open_shards = args.uint_value(0);
        else if (a == "--io") {
            const std::string v = args.value();
            if (v == "mmap") o.io = shardpack::io_mode::mmap;
            else if (v == "pread") o.io = shardpack::io_mode::pread;
            else if (v != "auto") usage("--io is auto, mmap or pread");
        } else if (!a.empty() && a[0] == '-') usage("unknown option " + a);
        else folder = a;
    }
    if (folder.empty()) usage("DATASET is required");
    try {
        const auto t0 = std::chrono::steady_clock::now();
        const auto ds = shardpack::dataset::open(folder, o);
        const auto t1 = std::chrono::steady_clock::now();
        const double rss_open = status_mb("VmRSS");
        shardpack::read_context ctx;
        std::uint64_t check = 0;
        const std::size_t n = ds.size();
        for (std::size_t j = 0; j < reads; ++j) check += ds.read(static_cast<std::size_t>(double(j) * double(n) / double(reads)), ctx).height();
        const auto t2 = std::chrono::steady_clock::now();
        std::printf("{\"dataset\": \"%s\", \"shards\": %zu, \"records\": %zu, \"open_s\": %.4f, \"reads\": %zu, \"read_s\": %.4f, "
                    "\"open_shards\": %zu, \"max_open_shards\": %zu, \"rss_after_open_mb\": %.1f, \"peak_rss_mb\": %.1f, "
                    "\"mappings\": %zu, \"check\": %llu}\n",
                    folder.c_str(), ds.shard_count(), n, std::chrono::duration<double>(t1 - t0).count(), reads,
                    std::chrono::duration<double>(t2 - t1).count(), ds.open_shard_count(), ds.max_open_shards(), rss_open,
                    status_mb("VmHWM"), mappings(), static_cast<unsigned long long>(check));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_open: %s\n", e.what());
        return 1;
    }
    return 0;
}
