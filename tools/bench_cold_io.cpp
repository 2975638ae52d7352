// bench_cold_io: the reader's I/O modes (open_options::io) on a cold and a warm page cache.
//
//   bench_cold_io DATASET [--reps R] [--batch B] [--io mmap,pread,...] [--order random,sequential]
//                         [--limit N] [--threads T]
//
// For each rep, each order and each io mode (interleaved, in an order rotated by one each rep):
//   cold: every file of the dataset is evicted from the page cache (posix_fadvise DONTNEED on
//         each; the fraction still resident afterwards, measured with mincore, is reported), the
//         dataset is opened and one epoch (or the first --limit records) is read with read_batch
//         in batches of B (uint8 images and labels as stored) on T threads (default 1), each
//         thread a contiguous share of the batches;
//   warm: the same epoch again, at once (the pages the cold epoch read are now cached).
// "random" is a seeded permutation of the records (seed 1), "sequential" is 0..n-1.
// Output: one JSON line, per (order, io, cold|warm): median seconds, samples/s and stored MB/s
// (the records' stored bytes / s, MB = 1e6 bytes), and every rep's seconds. Logs on stderr.
// Exit 0; 1 on a read error; 2 on bad usage.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "shardpack/reader.hpp"

namespace {

namespace bench = shardpack::bench;

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "bench_cold_io: %s\nusage: bench_cold_io DATASET [--reps R] [--batch B] [--io mmap,pread,auto] "
                 "[--order random,sequential] [--limit N] [--threads T]\n",
                 why.c_str());
    std::exit(2);
}

// Evicts every file of the folder; returns the fraction of their pages still resident.
double evict(const std::string& folder) {
    std::uint64_t pages = 0, resident = 0;
    const long page = ::sysconf(_SC_PAGESIZE);
    for (const auto& e : std::filesystem::directory_iterator(folder)) {
        if (!e.is_regular_file()) continue;
        const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        const auto size = static_cast<std::size_t>(e.file_size());
        if (size > 0) {
            void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
            if (p != MAP_FAILED) {
                std::vector<unsigned char> v((size + std::size_t(page) - 1) / std::size_t(page));
                if (::mincore(p, size, v.data()) == 0)
                    for (unsigned char c : v) resident += c & 1;
                pages += v.size();
                ::munmap(p, size);
            }
        }
        ::close(fd);
    }
    return pages ? double(resident) / double(pages) : 0.0;
}

struct result {
    std::vector<double> seconds;
};


}  // namespace

int main(int argc, char** argv) {
    std::string folder;
    unsigned reps = 3, threads = 1;
    std::size_t batch = 64, limit = 0;
    std::vector<std::string> ios{"mmap", "pread"}, orders{"random", "sequential"};
    for (bench::arg_walker args(argc, argv, usage); args.next();) {
        const std::string& a = args.arg();
        if (a == "--reps") reps = unsigned(args.uint_value(1, 1'000'000));
        else if (a == "--batch") batch = args.uint_value(1);
        else if (a == "--limit") limit = args.uint_value(1);
        else if (a == "--threads") threads = unsigned(args.uint_value(1, 4096));
        else if (a == "--io") ios = bench::split_commas(args.value());
        else if (a == "--order") orders = bench::split_commas(args.value());
        else if (!a.empty() && a[0] == '-') usage("unknown option \"" + a + "\"");
        else if (folder.empty()) folder = a;
        else usage("more than one DATASET");
    }
    if (folder.empty()) usage("DATASET is required");
    for (const auto& m : ios)
        if (m != "mmap" && m != "pread" && m != "auto") usage("--io takes mmap, pread, auto, not \"" + m + "\"");
    for (const auto& o : orders)
        if (o != "random" && o != "sequential") usage("--order takes random, sequential, not \"" + o + "\"");
    try {
        // The probe reads through pread: a mapping would keep the pages it touched resident
        // (DONTNEED leaves mapped pages alone).
        shardpack::open_options probe_options;
        probe_options.io = shardpack::io_mode::pread;
        auto probe = shardpack::dataset::open(folder, probe_options);
        const std::size_t n = limit ? std::min(limit, probe.size()) : probe.size();
        const shardpack::schema_info info = probe.schema();
        if (!info.fixed_height) usage("the dataset needs a fixed image size (read_batch)");
        const std::size_t pixels = info.fixed_height * info.fixed_width;
        const bool seg = info.task == shardpack::task::segmentation;
        const std::size_t label_n = seg ? pixels * info.class_count : info.class_count;
        std::map<std::string, std::vector<std::size_t>> order_of;
        std::vector<std::size_t> perm(probe.size());
        std::iota(perm.begin(), perm.end(), std::size_t(0));
        std::mt19937_64 rng(1);
        std::shuffle(perm.begin(), perm.end(), rng);
        perm.resize(n);
        order_of["random"] = perm;
        std::vector<std::size_t> seq(n);
        std::iota(seq.begin(), seq.end(), std::size_t(0));
        order_of["sequential"] = seq;
        std::map<std::string, std::uint64_t> stored_bytes;
        for (const auto& [name, order] : order_of) {
            std::uint64_t b = 0;
            for (std::size_t i : order) {
                std::size_t k = 0;
                while (k + 1 < probe.shard_count() && probe.shard_first_record(k + 1) <= i) ++k;
                b += probe.shard(k).entry(i - probe.shard_first_record(k)).stored_size;
            }
            stored_bytes[name] = b;
        }

        probe = shardpack::dataset();  // closed before any eviction
        std::map<std::string, result> results;
        std::vector<double> resident_after_evict;
        std::vector<std::pair<std::string, std::string>> runs;
        for (const auto& o : orders)
            for (const auto& m : ios) runs.emplace_back(o, m);
        for (unsigned r = 0; r < reps; ++r) {
            for (std::size_t j = 0; j < runs.size(); ++j) {
                const auto& [order_name, io_name] = runs[(j + r) % runs.size()];
                const std::vector<std::size_t>& order = order_of[order_name];
                resident_after_evict.push_back(evict(folder));
                std::fprintf(stderr, "bench_cold_io: evicted, %.1f%% of the pages still resident\n",
                             100 * resident_after_evict.back());
                shardpack::open_options opts;
                opts.io = io_name == "mmap" ? shardpack::io_mode::mmap
                        : io_name == "pread" ? shardpack::io_mode::pread : shardpack::io_mode::automatic;
                for (const char* temp : {"cold", "warm"}) {
                    const auto t0 = bench::clock_type::now();
                    const auto ds = shardpack::dataset::open(folder, opts);
                    const std::size_t batches = (n + batch - 1) / batch;
                    auto work = [&](std::size_t first_batch, std::size_t last_batch) {
                        shardpack::read_context ctx;
                        std::vector<std::uint8_t> images(batch * pixels * info.channels), labels(batch * label_n);
                        shardpack::sample_buffers out;
                        out.image_u8 = images.data();
                        out.image_capacity = images.size();
                        out.label_u8 = labels.data();
                        out.label_capacity = labels.size();
                        for (std::size_t b = first_batch; b < last_batch; ++b) {
                            const std::size_t begin = b * batch, count = std::min(batch, n - begin);
                            ds.read_batch(order.data() + begin, count, out, ctx);
                        }
                    };
                    std::vector<std::thread> pool;
                    for (unsigned t = 0; t < threads; ++t)
                        pool.emplace_back(work, batches * t / threads, batches * (t + 1) / threads);
                    for (auto& th : pool) th.join();
                    const double s = bench::seconds_since(t0);
                    results[order_name + "." + io_name + "." + temp].seconds.push_back(s);
                    std::fprintf(stderr, "bench_cold_io: rep %u %s %s %s: %.3f s\n", r + 1, order_name.c_str(),
                                 io_name.c_str(), temp, s);
                }
            }
        }
        std::string json = "{\"dataset\": \"" + folder + "\", \"records\": " + std::to_string(n) +
                           ", \"batch\": " + std::to_string(batch) + ", \"threads\": " + std::to_string(threads) +
                           ", \"reps\": " + std::to_string(reps) + ", \"max_resident_after_evict\": " +
                           std::to_string(*std::max_element(resident_after_evict.begin(), resident_after_evict.end())) +
                           ", \"runs\": {";
        bool first = true;
        for (const auto& [key, res] : results) {
            const double med = bench::median(res.seconds);
            const std::string order_name = key.substr(0, key.find('.'));
            char buf[512];
            std::snprintf(buf, sizeof buf, "%s\"%s\": {\"seconds\": %.4f, \"samples_per_s\": %.1f, \"stored_mb_per_s\": %.1f, \"each\": [",
                          first ? "" : ", ", key.c_str(), med, double(n) / med,
                          double(stored_bytes[order_name]) / 1e6 / med);
            json += buf;
            for (std::size_t i = 0; i < res.seconds.size(); ++i) json += (i ? ", " : "") + std::to_string(res.seconds[i]);
            json += "]}";
            first = false;
        }
        json += "}}";
        std::printf("%s\n", json.c_str());
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cold_io: %s\n", e.what());
        return 1;
    }
    return 0;
}
