// bench_remote: reading a dataset from S3-compatible object storage against reading the same
// dataset from local disk: the reader's default (io_mode::automatic: the I/O engine over the S3
// byte sources) beside io_mode::pread (the S3 storage's own range prefetch and buffer), first
// and second epoch.
//
//   bench_remote --way WAY --local DIR --url s3://BUCKET/PREFIX [--batch 256] [--batches 0]
//                [--threads 2] [--block-bytes 2097152] [--cache-bytes 0] [--seed 0]
//   bench_remote --first-batch --url s3://BUCKET/PREFIX [--batch 256] [--rounds 3]
//
// One way per process (its peak RSS is the way's): prints one JSON line with each epoch's
// seconds (the first from dataset::open, the open included: the engine starts at open),
// samples/s, MB/s (of the uint8 tensors delivered: image and one-hot label), GETs and bytes fetched, the
// io_mode chosen, and the process's peak RSS. WAY:
//   local         DIR evicted from the page cache (posix_fadvise DONTNEED on every file), opened
//                 with the defaults: epoch 1 (cold) and 2 on that handle; then a fresh open
//                 (the files now resident: mmap) and one epoch: "local warm";
//   auto          the server, the defaults (io_mode::automatic, cache_bytes from --cache-bytes,
//                 0: half the available memory), the dataset's preferred order;
//   pread         the server, io_mode::pread (the storage's range prefetch and buffer), the
//                 global shuffle (the default order before the engine);
//   pread-blocks  the server, io_mode::pread, the blocks order with whole blocks announced
//                 ahead (the recipe that was fastest before the engine).
// Each epoch reads `batches` batches of `batch` records (0: every whole batch) with
// dataset::read_batch into uint8 buffers (image and one-hot label), each batch split between
// `threads` threads (one read_context each; as the torch Loader's threads). The order: a global
// shuffle, or the blocks order (blocks of --block-bytes stored bytes, windows of 16 blocks) with
// the blocks the current batch and the next touch announced ahead with dataset::prefetch
// (shardpack::block_read_ahead, as the torch Loader does); a new seed each epoch. Remote ways
// open a fresh storage whose disk cache of heads and indexes is warm (as on a node that opened
// the dataset before); the server comes from the AWS_* variables (remote_bench.sh starts
// SeaweedFS on 127.0.0.1).
//
// --first-batch: the time from dataset::open to the end of the first batch (blocks order, the
// same read-ahead), with an empty disk cache (a fresh folder each round): the cold start of a
// training job on a new node; with the GETs it took.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <future>
#include <sys/resource.h>
#include <unistd.h>
#include <memory>
#include <string>
#include <vector>

#include "remote/s3_storage.hpp"
#include "bench_common.hpp"
#include "shardpack/order.hpp"
#include "shardpack/reader.hpp"

using namespace shardpack;
using shardpack::bench::clock_type;
namespace bench = shardpack::bench;

namespace {

struct args_t {
    std::string local, url, way;
    std::size_t batch = 256, batches = 0, rounds = 3, threads = 2;
    std::uint64_t block_bytes = 2 << 20, seed = 0, cache_bytes = 0;
    bool first_batch = false;
};

struct epoch_plan {
    std::vector<std::size_t> order;
    std::vector<std::uint64_t> block_starts;  // blocks order only
    std::size_t window_records = 0;
    // The read-ahead of whole blocks (blocks order), or null.
    std::unique_ptr<block_read_ahead> read_ahead(std::size_t batch) const {
        if (block_starts.empty()) return nullptr;
        return std::make_unique<block_read_ahead>(std::vector<std::uint64_t>(order.begin(), order.end()), block_starts,
                                                  batch + std::min(batch, window_records));
    }
};

epoch_plan make_order(const dataset& ds, bool blocks, std::uint64_t seed, std::uint64_t block_bytes) {
    order_options o;
    o.kind = blocks ? order_kind::blocks : order_kind::global;
    o.shard_starts = shard_starts_of(ds);
    // A block of about block_bytes stored bytes (the mean record of shard 0 sets the count).
    const auto& s0 = ds.shard(0);
    const std::uint64_t mean = std::max<std::uint64_t>(1, s0.index_offset() / std::max<std::size_t>(1, s0.record_count()));
    o.block = std::size_t(std::max<std::uint64_t>(1, block_bytes / mean));
    const auto order = full_order(ds.size(), seed, 0, o);
    epoch_plan plan;
    plan.order.assign(order.begin(), order.end());
    if (blocks) {
        plan.block_starts = order_blocks(ds.size(), o.block, o.shard_starts);
        plan.window_records = records_per_window(plan.block_starts, o.window);
    }
    return plan;
}

// Every GET of a storage and its bytes, whatever it fetched.
std::uint64_t all_gets(const remote::remote_stats& s) { return s.range_gets + s.metadata_gets + s.shard_gets; }
std::uint64_t all_get_bytes(const remote::remote_stats& s) { return s.range_bytes + s.metadata_bytes + s.shard_get_bytes; }

struct buffers {
    std::vector<std::uint8_t> image, label;
    sample_buffers out;
    buffers(const dataset& ds, std::size_t batch) {
        const auto& s = ds.schema();
        const std::size_t pixels = s.fixed_height * s.fixed_width;
        image.resize(batch * pixels * s.channels);
        label.resize(batch * (s.task == task::classification ? s.class_count : pixels * s.class_count));
        out.image_u8 = image.data();
        out.image_capacity = image.size();
        out.label_u8 = label.data();
        out.label_capacity = label.size();
    }
};

// The uint8 tensors of one record as read here: the image and the one-hot label (per pixel for
// segmentation).
std::size_t record_bytes(const dataset& ds) {
    const buffers one(ds, 1);
    return one.image.size() + one.label.size();
}

struct epoch_result {
    double seconds = 0, samples_per_s = 0, mb_per_s = 0;
    std::uint64_t gets = 0, fetched_bytes = 0;
};

// The dataset's shard bytes (what a whole epoch reads once, stored).
std::uint64_t dataset_bytes(const dataset& ds) {
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) total += ds.shard_bytes(k);
    return total;
}

// Reads `batches` batches of the plan's order from its start, each batch split between
// a.threads threads; t0: when the epoch's clock started (before open for a first epoch).
epoch_result run_epoch(const dataset& ds, const epoch_plan& plan, const args_t& a, const remote::s3_storage* st,
                       clock_type::time_point t0) {
    const std::size_t parts = std::max<std::size_t>(1, a.threads);
    std::vector<buffers> b;
    std::vector<read_context> ctx(parts);
    const std::size_t batch = std::min(a.batch, plan.order.size());
    for (std::size_t p = 0; p < parts; ++p) b.emplace_back(ds, (batch + parts - 1) / parts);
    const auto& order = plan.order;
    const std::size_t batches = a.batches ? std::min(a.batches, order.size() / batch) : order.size() / batch;
    const auto ahead = plan.read_ahead(batch);
    const remote::remote_stats before = st ? st->stats() : remote::remote_stats{};
    std::size_t done = 0;
    for (std::size_t k = 0; k < batches; ++k) {
        const std::size_t at = k * batch;
        if (ahead) {
            const auto& records = ahead->before(at);
            if (!records.empty()) ds.prefetch(records.data(), records.size(), ctx[0]);
        }
        const std::size_t each = (batch + parts - 1) / parts;
        std::vector<std::future<void>> others;
        for (std::size_t p = 1; p < parts && p * each < batch; ++p)
            others.push_back(std::async(std::launch::async, [&, p] {
                ds.read_batch(order.data() + at + p * each, std::min(each, batch - p * each), b[p].out, ctx[p]);
            }));
        ds.read_batch(order.data() + at, std::min(each, batch), b[0].out, ctx[0]);
        for (auto& f : others) f.get();
        done += batch;
    }
    epoch_result r;
    r.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
    r.samples_per_s = double(done) / r.seconds;
    r.mb_per_s = double(done) * double(record_bytes(ds)) / r.seconds / 1e6;
    if (st) {
        const remote::remote_stats s = st->stats();
        r.gets = all_gets(s) - all_gets(before);
        r.fetched_bytes = all_get_bytes(s) - all_get_bytes(before);
    }
    return r;
}

// Every file of the folder evicted from the page cache (after fdatasync: dirty pages stay).
void evict(const std::string& folder) {
    for (const auto& e : std::filesystem::directory_iterator(folder)) {
        if (!e.is_regular_file()) continue;
        const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0) continue;
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
}

std::shared_ptr<remote::s3_storage> fresh_storage(const std::string& url, const std::string& cache,
                                                 std::uint64_t merge_gap = 0) {
    remote::remote_options ro = remote::remote_options::from_environment();
    ro.cache_dir = cache;
    if (merge_gap) ro.merge_gap = merge_gap;
    return remote::open_s3_storage(url, ro);
}

dataset open_with(const std::string& url, const std::shared_ptr<remote::s3_storage>& st, io_mode io = io_mode::automatic,
                  std::uint64_t cache_bytes = 0) {
    open_options o;
    o.storage = st;
    o.io = io;
    o.cache_bytes = cache_bytes;
    return dataset::open(url, o);
}

std::string epoch_json(const char* name, const epoch_result& r) {
    char line[512];
    std::snprintf(line, sizeof line,
                  "\"%s\":{\"seconds\":%.3f,\"samples_per_s\":%.1f,\"mb_per_s\":%.1f,\"gets\":%llu,\"fetched_bytes\":%llu}",
                  name, r.seconds, r.samples_per_s, r.mb_per_s, (unsigned long long)r.gets, (unsigned long long)r.fetched_bytes);
    return line;
}

// One way (see the top of the file), printed as one JSON line.
int run_way(const args_t& a) {
    const bool local_way = a.way == "local";
    const bool blocks_order = a.way == "pread-blocks";
    if (!local_way && a.way != "auto" && a.way != "pread" && !blocks_order)
        throw std::runtime_error("unknown way " + a.way + " (local, auto, pread, pread-blocks)");
    std::string epochs, io1, io2;
    std::size_t records = 0, shards = 0;
    std::uint64_t bytes = 0;
    std::size_t record_size = 0;
    if (local_way) {
        evict(a.local);
        const auto t0 = clock_type::now();
        {
            const dataset ds = dataset::open(a.local);
            const bool blocks = std::string(ds.preferred_order()) == "blocks";
            const epoch_result e1 = run_epoch(ds, make_order(ds, blocks, a.seed, a.block_bytes), a, nullptr, t0);
            const epoch_result e2 = run_epoch(ds, make_order(ds, blocks, a.seed + 1, a.block_bytes), a, nullptr, clock_type::now());
            epochs = epoch_json("epoch1", e1) + "," + epoch_json("epoch2", e2);
            io1 = io_mode_name(ds.io());
            records = ds.size(), shards = ds.shard_count(), bytes = dataset_bytes(ds), record_size = record_bytes(ds);
        }
        const auto t1 = clock_type::now();
        const dataset warm = dataset::open(a.local);
        const bool blocks = std::string(warm.preferred_order()) == "blocks";
        const epoch_result w = run_epoch(warm, make_order(warm, blocks, a.seed + 2, a.block_bytes), a, nullptr, t1);
        epochs += "," + epoch_json("warm", w);
        io2 = io_mode_name(warm.io());
    } else {
        const std::string cache = std::filesystem::temp_directory_path().string() + "/bench_remote_warm_" + std::to_string(::getpid());
        std::filesystem::remove_all(cache);
        { const dataset warm = open_with(a.url, fresh_storage(a.url, cache)); (void)warm; }  // heads and indexes on disk
        const io_mode io = a.way == "auto" ? io_mode::automatic : io_mode::pread;
        const auto t0 = clock_type::now();
        auto st = fresh_storage(a.url, cache);
        const dataset ds = open_with(a.url, st, io, a.cache_bytes);
        const bool blocks = blocks_order || std::string(ds.preferred_order()) == "blocks";
        const epoch_result e1 = run_epoch(ds, make_order(ds, blocks, a.seed, a.block_bytes), a, st.get(), t0);
        const epoch_result e2 = run_epoch(ds, make_order(ds, blocks, a.seed + 1, a.block_bytes), a, st.get(), clock_type::now());
        epochs = epoch_json("epoch1", e1) + "," + epoch_json("epoch2", e2);
        io1 = io_mode_name(ds.io());
        io2 = blocks ? "blocks" : "global";
        records = ds.size(), shards = ds.shard_count(), bytes = dataset_bytes(ds), record_size = record_bytes(ds);
        std::filesystem::remove_all(cache);
    }
    struct rusage ru {};
    ::getrusage(RUSAGE_SELF, &ru);
    std::printf("{\"tool\":\"bench_remote\",\"way\":\"%s\",\"io\":\"%s\",\"%s\":\"%s\",\"records\":%zu,\"shards\":%zu,"
                "\"dataset_bytes\":%llu,\"record_bytes\":%zu,\"batch\":%zu,\"threads\":%zu,\"cache_bytes\":%llu,\"buffer_bytes\":%llu,"
                "\"peak_rss_kb\":%ld,%s}\n",
                a.way.c_str(), io1.c_str(), local_way ? "warm_io" : "order", io2.c_str(), records, shards,
                (unsigned long long)bytes, record_size, a.batch, a.threads, (unsigned long long)a.cache_bytes,
                (unsigned long long)remote::remote_options::from_environment().buffer_bytes, long(ru.ru_maxrss), epochs.c_str());
    return 0;
}

int first_batch(const args_t& a) {
    std::vector<double> open_s, total_s, gets;
    std::size_t shards = 0;
    const std::string base = std::filesystem::temp_directory_path().string() + "/bench_remote_cold_" + std::to_string(::getpid());
    for (std::size_t r = 0; r < a.rounds; ++r) {
        const std::string cache = base + "_" + std::to_string(r);
        std::filesystem::remove_all(cache);
        const auto t0 = clock_type::now();
        auto st = fresh_storage(a.url, cache);
        const dataset ds = open_with(a.url, st);
        const auto t1 = clock_type::now();
        const epoch_plan plan = make_order(ds, true, a.seed + r, a.block_bytes);
        buffers b(ds, a.batch);
        read_context ctx;
        const std::size_t batch = std::min(a.batch, plan.order.size());
        const auto ahead = plan.read_ahead(batch);
        const auto& records = ahead->before(0);
        ds.prefetch(records.data(), records.size(), ctx);
        ds.read_batch(plan.order.data(), batch, b.out, ctx);
        const auto t2 = clock_type::now();
        open_s.push_back(std::chrono::duration<double>(t1 - t0).count());
        total_s.push_back(std::chrono::duration<double>(t2 - t0).count());
        gets.push_back(double(all_gets(st->stats())));
        shards = ds.shard_count();
        std::filesystem::remove_all(cache);
    }
    std::printf("{\"tool\":\"bench_remote\",\"mode\":\"first_batch\",\"shards\":%zu,\"batch\":%zu,\"rounds\":%zu,"
                "\"open_s_median\":%.4f,\"open_to_first_batch_s_median\":%.4f,\"open_to_first_batch_s_max\":%.4f,"
                "\"gets_median\":%.0f}\n",
                shards, a.batch, a.rounds, bench::median(open_s), bench::median(total_s), *std::max_element(total_s.begin(), total_s.end()),
                bench::median(gets));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    args_t a;
    try {
        for (int i = 1; i < argc; ++i) {
            const std::string k = argv[i];
            auto value = [&]() -> std::string {
                if (i + 1 >= argc) throw std::runtime_error(k + " needs a value");
                return argv[++i];
            };
            if (k == "--local") a.local = value();
            else if (k == "--url") a.url = value();
            else if (k == "--batch") a.batch = std::stoul(value());
            else if (k == "--batches") a.batches = std::stoul(value());
            else if (k == "--rounds") a.rounds = std::stoul(value());
            else if (k == "--block-bytes") a.block_bytes = std::stoull(value());
            else if (k == "--cache-bytes") a.cache_bytes = std::stoull(value());
            else if (k == "--threads") a.threads = std::stoul(value());
            else if (k == "--way") a.way = value();
            else if (k == "--seed") a.seed = std::stoull(value());
            else if (k == "--first-batch") a.first_batch = true;
            else throw std::runtime_error("unknown option " + k);
        }
        if (a.url.empty() || (!a.first_batch && (a.local.empty() || a.way.empty())) || a.batch == 0 || a.rounds == 0)
            throw std::runtime_error("needs --url, --way and --local (or --first-batch), and counts of at least 1");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_remote: %s\nusage: bench_remote --way local|auto|pread|pread-blocks --local DIR --url s3://B/P "
                             "[--batch N] [--batches N] [--threads N] [--block-bytes N] [--cache-bytes N] [--seed N] | "
                             "--first-batch --url s3://B/P [--batch N] [--rounds N]\n", e.what());
        return 2;
    }
    try {
        if (a.first_batch) return first_batch(a);
        return run_way(a);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_remote: %s\n", e.what());
        return 1;
    }
    return 0;
}
