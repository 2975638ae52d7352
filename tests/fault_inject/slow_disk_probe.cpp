// slow_disk_probe --dataset DIR ORDER [BLOCK WINDOW]: reads a shardpack dataset through the reader
// (dataset::open with io_mode::pread) in ORDER (sequential, global or blocks) as
// shardpack.torch.Loader does: batches of 64, each announced with dataset::prefetch first (as
// read_batch does), and with the blocks order, every block of the next window prefetched whole
// before the window's first record.
// slow_disk_probe FILE RECORD_BYTES ORDER [BLOCK WINDOW]: reads FILE as records of RECORD_BYTES
// bytes, one pread each, in ORDER (sequential, global, blocks, or reread: sequential twice, or
// evict: sequential, posix_fadvise DONTNEED, sequential again, or mmap: maps FILE and reads it),
// under the slow-disk shim (tests/fault_inject/slow_disk.c, LD_PRELOAD), and prints the shim's
// statistics as JSON: {"reads", "seeks", "bytes", "charged_us", "mmaps", "wall_us"}.
// With the blocks order it reads ahead like shardpack.torch.Loader: before the records of a
// window are read, posix_fadvise(WILLNEED) of each block the window needs, whole.
// For tests/test_slow_disk.cpp. Exit 3 when the shim is not loaded.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "shardpack/order.hpp"
#include "shardpack/reader.hpp"

using stats_fn = void (*)(long long*);

void print_stats(stats_fn stats, std::chrono::steady_clock::time_point start) {
    const auto wall = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start);
    long long s[6];
    stats(s);
    std::printf("{\"reads\": %lld, \"seeks\": %lld, \"bytes\": %lld, \"charged_us\": %lld, \"mmaps\": %lld, "
                "\"wall_us\": %lld}\n",
                s[0], s[1], s[2], s[3], s[4], static_cast<long long>(wall.count()));
}

int read_dataset(const std::string& folder, const std::string& order_name, const char* block_arg,
                 const char* window_arg, stats_fn stats) {
    try {
        shardpack::open_options open;
        open.io = shardpack::io_mode::pread;
        const auto ds = shardpack::dataset::open(folder, open);
        const auto start = std::chrono::steady_clock::now();
        shardpack::order_options o;
        o.shuffle = order_name != "sequential";
        o.kind = order_name == "blocks" ? shardpack::order_kind::blocks : shardpack::order_kind::global;
        o.block = std::strtoull(block_arg, nullptr, 10);
        o.window = std::strtoull(window_arg, nullptr, 10);
        o.shard_starts = shardpack::shard_starts_of(ds);
        const auto order = shardpack::full_order(ds.size(), 1, 0, o);
        const auto starts = shardpack::order_blocks(ds.size(), o.block, o.shard_starts);
        std::vector<char> fetched(starts.size(), 0);
        shardpack::read_context ctx;
        std::uint64_t asked = 0;
        const std::uint64_t ahead = static_cast<std::uint64_t>(o.block) * o.window;
        const std::size_t batch = 64;
        for (std::size_t p = 0; p < order.size(); p += batch) {
            if (o.kind == shardpack::order_kind::blocks && o.shuffle && p + batch > asked) {
                std::vector<std::size_t> wanted;
                const std::uint64_t end = std::min<std::uint64_t>(order.size(), p + batch + ahead);
                for (std::uint64_t q = asked; q < end; ++q) {
                    const auto b = static_cast<std::size_t>(
                        std::upper_bound(starts.begin(), starts.end(), order[q]) - starts.begin() - 1);
                    if (fetched[b]) continue;
                    fetched[b] = 1;
                    for (std::uint64_t i = starts[b]; i < starts[b + 1]; ++i) wanted.push_back(i);
                }
                std::sort(wanted.begin(), wanted.end());
                ds.prefetch(wanted.data(), wanted.size());
                asked = end;
            }
            const std::size_t count = std::min(batch, order.size() - p);
            std::vector<std::size_t> indices(order.begin() + static_cast<std::ptrdiff_t>(p),
                                             order.begin() + static_cast<std::ptrdiff_t>(p + count));
            ds.prefetch(indices.data(), indices.size());
            for (const auto i : indices) {
                const shardpack::sample s = ds.read(i, ctx);
                (void)s.image().size();
            }
        }
        print_stats(stats, start);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "slow_disk_probe: %s\n", e.what());
        return 1;
    }
}

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: slow_disk_probe FILE RECORD_BYTES ORDER [BLOCK WINDOW]\n");
        return 2;
    }
    const auto stats = reinterpret_cast<stats_fn>(dlsym(RTLD_DEFAULT, "shardpack_slow_disk_stats"));
    if (!stats) {
        std::fprintf(stderr, "slow_disk_probe: the slow-disk shim is not loaded (LD_PRELOAD)\n");
        return 3;
    }
    if (std::string(argv[1]) == "--dataset") return read_dataset(argv[2], argv[3], argc > 4 ? argv[4] : "16",
                                                                 argc > 5 ? argv[5] : "4", stats);
    const std::string path = argv[1], order_name = argv[3];
    const std::uint64_t record = std::strtoull(argv[2], nullptr, 10);
    const std::size_t block = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 64;
    const std::size_t window = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 4;
    const int fd = ::open(path.c_str(), O_RDONLY);
    struct stat st {};
    if (fd < 0 || ::fstat(fd, &st) != 0 || record == 0) {
        std::fprintf(stderr, "slow_disk_probe: cannot open %s\n", path.c_str());
        return 1;
    }
    const std::uint64_t n = static_cast<std::uint64_t>(st.st_size) / record;
    std::vector<char> buffer(record);
    const auto start = std::chrono::steady_clock::now();
    auto read_record = [&](std::uint64_t i) {
        if (::pread(fd, buffer.data(), record, static_cast<off_t>(i * record)) != static_cast<ssize_t>(record)) {
            std::fprintf(stderr, "slow_disk_probe: short read\n");
            std::exit(1);
        }
    };
    auto sequential = [&] {
        for (std::uint64_t i = 0; i < n; ++i) read_record(i);
    };
    if (order_name == "sequential") {
        sequential();
    } else if (order_name == "reread") {
        sequential();
        sequential();
    } else if (order_name == "evict") {
        sequential();
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        sequential();
    } else if (order_name == "mmap") {
        void* p = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) return 1;
        unsigned sum = 0;
        for (std::uint64_t b = 0; b < static_cast<std::uint64_t>(st.st_size); b += 4096) sum += static_cast<unsigned char*>(p)[b];
        ::munmap(p, static_cast<std::size_t>(st.st_size));
        if (sum == 12345678) std::puts("");  // keeps the reads
    } else if (order_name == "global" || order_name == "blocks") {
        shardpack::order_options o;
        o.kind = order_name == "global" ? shardpack::order_kind::global : shardpack::order_kind::blocks;
        o.block = block;
        o.window = window;
        const auto order = shardpack::full_order(n, 1, 0, o);
        const auto starts = shardpack::order_blocks(n, block, {});
        std::vector<char> fetched(starts.size(), 0);
        std::uint64_t asked = 0;
        const std::uint64_t ahead = static_cast<std::uint64_t>(block) * window;
        for (std::uint64_t p = 0; p < n; ++p) {
            if (o.kind == shardpack::order_kind::blocks && p >= asked) {
                // Read ahead: the blocks positions [p, p + ahead) need, whole, in disk order.
                std::set<std::size_t> wanted;
                const std::uint64_t end = std::min(n, p + ahead);
                for (std::uint64_t q = p; q < end; ++q) {
                    const auto b = static_cast<std::size_t>(
                        std::upper_bound(starts.begin(), starts.end(), order[q]) - starts.begin() - 1);
                    if (!fetched[b]) wanted.insert(b);
                }
                for (const auto b : wanted) {
                    fetched[b] = 1;
                    ::posix_fadvise(fd, static_cast<off_t>(starts[b] * record),
                                    static_cast<off_t>((starts[b + 1] - starts[b]) * record), POSIX_FADV_WILLNEED);
                }
                asked = end;
            }
            read_record(order[p]);
        }
    } else {
        std::fprintf(stderr, "slow_disk_probe: unknown order %s\n", order_name.c_str());
        return 2;
    }
    print_stats(stats, start);
    ::close(fd);
    return 0;
}
