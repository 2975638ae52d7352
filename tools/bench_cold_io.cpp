// bench_cold_io: the reader's I/O modes (open_options::io) on a cold and a warm page cache.
//
//   bench_cold_io DATASET [--reps R] [--batch B] [--io mmap,pread,auto,stream,blocks]
//                         [--order random,sequential,preferred] [--limit N] [--threads T]
//                         [--epochs E] [--cache-bytes N] [--no-warm] [--max-seconds S] [--progress]
//   bench_cold_io --features      what this build's reader offers, as JSON (for scripts)
//
// For each rep, each order and each io mode (interleaved, in an order rotated by one each rep):
//   cold: every file of the dataset is evicted from the page cache (posix_fadvise DONTNEED on
//         each; the fraction still resident afterwards, measured with mincore, is reported), the
//         dataset is opened and one epoch (or the first --limit records) is read with read_batch
//         in batches of B (uint8 images and labels as stored) on T threads (default 1), each
//         thread a contiguous share of the batches;
//   warm: the same epoch again, at once (the pages the cold epoch read are now cached).
// "random" is a seeded permutation of the records (seed 1), "sequential" is 0..n-1, "preferred"
// the order the opened dataset prefers (dataset::preferred_order(), issue 29; the global order
// before the reader had it): the global shuffle of include/shardpack/order.hpp (seed 0), or the
// blocks order with blocks of ~4 MiB, each announced whole a window ahead (dataset::prefetch), as
// the torch Loader does.
// --epochs E: the cold run reads E epochs (epoch e's order for "preferred") from one open dataset,
// every file evicted again before each (not timed): a dataset larger than memory, with whatever
// the reader keeps in its own cache. --cache-bytes: open_options::cache_bytes (the reader's cache
// budget; needs the I/O engine). --no-warm: no warm epoch. --max-seconds S: an epoch stops after S
// seconds (its records_read then says how far it got; later epochs are not read). --progress:
// a line "bench_cold_io: progress EPOCH RECORDS SECONDS" on stderr after every batch (for a
// driver that stops a run that is too slow even for that).
// io modes and options this reader lacks (stream, blocks, cache_bytes before the I/O engine) are
// refused with exit 2; --features lists what is there.
// Output: one JSON line, per (order, io, cold|warm): median seconds, samples/s and stored MB/s
// (the records' stored bytes / s, MB = 1e6 bytes), and every rep's seconds; epochs after the
// first are "cold-epochE"; records_read (the fewest of any rep) where --max-seconds cut an epoch;
// io_chosen (dataset::io(), with the engine); peak_rss_kib (VmHWM). Logs on stderr.
// Exit 0; 1 on a read error; 2 on bad usage.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "bench_common.hpp"
#include "shardpack/order.hpp"
#include "shardpack/reader.hpp"

namespace {

namespace bench = shardpack::bench;

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr,
                 "bench_cold_io: %s\nusage: bench_cold_io DATASET [--reps R] [--batch B] "
                 "[--io mmap,pread,auto,stream,blocks] [--order random,sequential,preferred] [--limit N] [--threads T] "
                 "[--epochs E] [--cache-bytes N] [--no-warm] [--max-seconds S] [--progress]\n       bench_cold_io --features\n",
                 why.c_str());
    std::exit(2);
}

// The reader's I/O engine (issue 29), detected so that this tool builds before and after it.
template <class E, class = void>
struct has_stream : std::false_type {};
template <class E>
struct has_stream<E, std::void_t<decltype(E::stream)>> : std::true_type {};
template <class E, class = void>
struct has_blocks : std::false_type {};
template <class E>
struct has_blocks<E, std::void_t<decltype(E::blocks)>> : std::true_type {};
template <class O, class = void>
struct has_cache_bytes : std::false_type {};
template <class O>
struct has_cache_bytes<O, std::void_t<decltype(std::declval<O&>().cache_bytes)>> : std::true_type {};
template <class D, class = void>
struct has_preferred_order : std::false_type {};
template <class D>
struct has_preferred_order<D, std::void_t<decltype(std::declval<const D&>().preferred_order())>> : std::true_type {};
template <class D, class = void>
struct has_io : std::false_type {};
template <class D>
struct has_io<D, std::void_t<decltype(std::declval<const D&>().io())>> : std::true_type {};

// The io_mode named `name`; false when this reader has none of that name.
template <class E = shardpack::io_mode>
bool io_named(const std::string& name, E& out) {
    if (name == "mmap") out = E::mmap;
    else if (name == "pread") out = E::pread;
    else if (name == "auto") out = E::automatic;
    else if (name == "stream") {
        if constexpr (has_stream<E>::value) out = E::stream;
        else return false;
    } else if (name == "blocks") {
        if constexpr (has_blocks<E>::value) out = E::blocks;
        else return false;
    } else return false;
    return true;
}

template <class E>
std::string io_name_of(E m) {
    if (m == E::mmap) return "mmap";
    if (m == E::pread) return "pread";
    if (m == E::automatic) return "auto";
    if constexpr (has_stream<E>::value)
        if (m == E::stream) return "stream";
    if constexpr (has_blocks<E>::value)
        if (m == E::blocks) return "blocks";
    return "?";
}

// The mode the opened dataset chose ("" before the engine).
template <class D>
std::string chosen_io(const D& ds) {
    if constexpr (has_io<D>::value) return io_name_of(ds.io());
    else return "";
}

// Whether the dataset prefers the blocks order (never before the engine).
template <class D>
bool prefers_blocks(const D& ds) {
    if constexpr (has_preferred_order<D>::value) {
        const auto p = ds.preferred_order();
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, shardpack::order_kind>) return p == shardpack::order_kind::blocks;
        else return std::string(p) == "blocks";
    } else {
        return false;
    }
}

// The bytes of all shards (what the Python package calls data_bytes).
template <class D>
std::uint64_t shard_bytes_total(const D& ds) {
    std::uint64_t bytes = 0;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) bytes += ds.shard_bytes(k);
    return bytes;
}

// The blocks order's block and window: the reader's (dataset::blocks_layout, sized to its
// cache), or, in a reader before it, ~4 MiB blocks and the default window.
template <class D, class = void>
struct has_blocks_layout : std::false_type {};
template <class D>
struct has_blocks_layout<D, std::void_t<decltype(std::declval<const D&>().blocks_layout())>> : std::true_type {};
template <class D>
void set_blocks_layout(const D& ds, shardpack::order_options& oo) {
    if constexpr (has_blocks_layout<D>::value) {
        const auto l = ds.blocks_layout();
        oo.block = l.block;
        oo.window = l.window;
    } else {
        oo.block = std::max<std::size_t>(1, std::size_t((4ull << 20) * ds.size() / std::max<std::uint64_t>(1, shard_bytes_total(ds))));
    }
}

template <class O>
bool set_cache_bytes(O& o, std::uint64_t bytes) {
    if constexpr (has_cache_bytes<O>::value) {
        o.cache_bytes = static_cast<decltype(o.cache_bytes)>(bytes);
        return true;
    } else {
        return bytes == 0;
    }
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
    std::size_t records_read = SIZE_MAX;  // the fewest any rep read (when --max-seconds cut one)
};


}  // namespace

int main(int argc, char** argv) {
    std::string folder;
    unsigned reps = 3, threads = 1, epochs = 1;
    std::size_t batch = 64, limit = 0;
    std::uint64_t cache_bytes = 0;
    bool warm = true, progress = false;
    double max_seconds = 0;
    std::vector<std::string> ios{"mmap", "pread"}, orders{"random", "sequential"};
    for (bench::arg_walker args(argc, argv, usage); args.next();) {
        const std::string& a = args.arg();
        if (a == "--features") {
            shardpack::open_options probe_o;
            std::string list;
            for (const char* m : {"mmap", "pread", "auto", "stream", "blocks"}) {
                shardpack::io_mode x{};
                if (io_named(m, x)) list += std::string(list.empty() ? "" : ", ") + "\"" + m + "\"";
            }
            std::printf("{\"io\": [%s], \"cache_bytes\": %s, \"preferred_order\": %s}\n", list.c_str(),
                        set_cache_bytes(probe_o, 1) ? "true" : "false",
                        has_preferred_order<shardpack::dataset>::value ? "true" : "false");
            return 0;
        }
        if (a == "--reps") reps = unsigned(args.uint_value(1, 1'000'000));
        else if (a == "--epochs") epochs = unsigned(args.uint_value(1, 1000));
        else if (a == "--cache-bytes") cache_bytes = args.uint_value(1);
        else if (a == "--no-warm") warm = false;
        else if (a == "--progress") progress = true;
        else if (a == "--max-seconds") max_seconds = args.seconds_value();
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
    for (const auto& m : ios) {
        shardpack::io_mode x{};
        if (!io_named(m, x))
            usage(m == "stream" || m == "blocks" ? "--io " + m + " is not available in this reader (no I/O engine)"
                                                 : "--io takes mmap, pread, auto, stream, blocks, not \"" + m + "\"");
    }
    for (const auto& o : orders)
        if (o != "random" && o != "sequential" && o != "preferred")
            usage("--order takes random, sequential, preferred, not \"" + o + "\"");
    {
        shardpack::open_options probe_o;
        if (!set_cache_bytes(probe_o, cache_bytes)) usage("--cache-bytes is not available in this reader (no I/O engine)");
    }
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
        order_of["preferred"] = seq;  // its bytes: every record once, as the others (the order itself: per epoch, below)
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
        std::string io_chosen;
        std::vector<std::pair<std::string, std::string>> runs;
        for (const auto& o : orders)
            for (const auto& m : ios) runs.emplace_back(o, m);
        std::vector<std::string> temps{"cold"};
        if (warm) temps.push_back("warm");
        for (unsigned r = 0; r < reps; ++r) {
            for (std::size_t j = 0; j < runs.size(); ++j) {
                const auto& [order_name, io_name] = runs[(j + r) % runs.size()];
                resident_after_evict.push_back(evict(folder));
                std::fprintf(stderr, "bench_cold_io: evicted, %.1f%% of the pages still resident\n",
                             100 * resident_after_evict.back());
                shardpack::open_options opts;
                io_named(io_name, opts.io);
                set_cache_bytes(opts, cache_bytes);
                for (const std::string& temp : temps) {
                    auto t0 = bench::clock_type::now();
                    const auto ds = shardpack::dataset::open(folder, opts);
                    io_chosen = chosen_io(ds);
                    const unsigned passes = temp == "cold" ? epochs : 1;
                    for (unsigned e = 0; e < passes; ++e) {
                        if (e > 0) {  // evicted again, untimed: a dataset larger than memory
                            evict(folder);
                            t0 = bench::clock_type::now();
                        }
                        ds.begin_epoch();  // as the Python adapters do: a dropped stream is read again
                        std::vector<std::size_t> order = order_of[order_name];
                        const bool blocks = order_name == "preferred" && prefers_blocks(ds);
                        shardpack::order_options oo;
                        std::vector<std::uint64_t> block_starts{0, n};
                        if (order_name == "preferred") {
                            if (blocks) {
                                oo.kind = shardpack::order_kind::blocks;
                                oo.shard_starts = shardpack::shard_starts_of(ds);
                                set_blocks_layout(ds, oo);
                                block_starts = shardpack::order_blocks(ds.size(), oo.block, oo.shard_starts);
                            }
                            const auto o = shardpack::epoch_order(ds.size(), 0, e, 0, 1, false, oo);
                            order.assign(o.begin(), o.begin() + std::ptrdiff_t(n));
                        }
                        const std::size_t batches = (n + batch - 1) / batch;
                        std::atomic<std::size_t> read{0};
                        auto work = [&](std::size_t first_batch, std::size_t last_batch) {
                            shardpack::read_context ctx;
                            std::vector<std::uint8_t> images(batch * pixels * info.channels), labels(batch * label_n);
                            shardpack::sample_buffers out;
                            out.image_u8 = images.data();
                            out.image_capacity = images.size();
                            out.label_u8 = labels.data();
                            out.label_capacity = labels.size();
                            std::vector<std::uint64_t> mine;
                            for (std::size_t b = first_batch; b < last_batch; ++b)
                                for (std::size_t k = b * batch; k < std::min(n, (b + 1) * batch); ++k) mine.push_back(order[k]);
                            shardpack::block_read_ahead ahead(mine, block_starts,
                                                              shardpack::records_per_window(block_starts, oo.window));
                            for (std::size_t b = first_batch; b < last_batch; ++b) {
                                if (max_seconds > 0 && bench::seconds_since(t0) > max_seconds) break;
                                const std::size_t begin = b * batch, count = std::min(batch, n - begin);
                                if (blocks) {
                                    const auto& wanted = ahead.before(begin - first_batch * batch);
                                    if (!wanted.empty()) ds.prefetch(wanted.data(), wanted.size());
                                }
                                ds.read_batch(order.data() + begin, count, out, ctx);
                                read += count;
                                if (progress)
                                    std::fprintf(stderr, "bench_cold_io: progress %u %zu %.4f\n", e + 1, read.load(),
                                                 bench::seconds_since(t0));
                            }
                        };
                        std::vector<std::thread> pool;
                        for (unsigned t = 0; t < threads; ++t)
                            pool.emplace_back(work, batches * t / threads, batches * (t + 1) / threads);
                        for (auto& th : pool) th.join();
                        const double s = bench::seconds_since(t0);
                        const std::string key = order_name + "." + io_name + "." + temp +
                                                (e > 0 ? "-epoch" + std::to_string(e + 1) : std::string());
                        results[key].seconds.push_back(s);
                        if (read < n) results[key].records_read = std::min(results[key].records_read, read.load());
                        std::fprintf(stderr, "bench_cold_io: rep %u %s %s %s: %.3f s (%zu of %zu records; io %s)\n",
                                     r + 1, order_name.c_str(), io_name.c_str(), key.c_str(), s, read.load(), n,
                                     io_chosen.empty() ? "-" : io_chosen.c_str());
                        if (read < n) break;  // cut by --max-seconds: later epochs are not read
                    }
                }
            }
        }
        std::string json = "{\"dataset\": \"" + folder + "\", \"records\": " + std::to_string(n) +
                           ", \"batch\": " + std::to_string(batch) + ", \"threads\": " + std::to_string(threads) +
                           ", \"reps\": " + std::to_string(reps) + ", \"max_resident_after_evict\": " +
                           std::to_string(*std::max_element(resident_after_evict.begin(), resident_after_evict.end())) +
                           ", \"epochs\": " + std::to_string(epochs) + ", \"cache_bytes\": " + std::to_string(cache_bytes) +
                           ", \"io_chosen\": \"" + io_chosen + "\", \"peak_rss_kib\": " +
                           std::to_string(bench::process_status_kb("VmHWM")) + ", \"runs\": {";
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
            json += "]";
            if (res.records_read != SIZE_MAX) json += ", \"records_read\": " + std::to_string(res.records_read);
            json += "}";
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
