// bench_remote: reading a dataset from S3-compatible object storage against reading the same
// dataset from local disk, for the global shuffle and the locality-aware (blocks) order.
//
//   bench_remote --local DIR --url s3://BUCKET/PREFIX [--batch 256] [--batches 0] [--rounds 3]
//                [--block-bytes 2097152] [--global-merge-gap 65536] [--seed 0]
//   bench_remote --first-batch --url s3://BUCKET/PREFIX [--batch 256] [--rounds 3]
//
// The server comes from the AWS_* variables (scripts/bench.sh starts SeaweedFS on 127.0.0.1).
// Each measurement reads `batches` batches of `batch` records (0: every whole batch of the
// epoch) with dataset::read_batch into uint8 buffers (image and one-hot label), from the start
// of the epoch's order, a different seed in each round (as an epoch of training reads it: the
// GETs per MB then include no block fetched whole at the measurement's edges only to be read in
// part); remote measurements open a fresh storage (so no range fetched by an earlier
// measurement is reused) whose disk cache of heads and indexes is warm (as on a node that
// opened the dataset before). A round runs the four modes in an order rotated by one; the
// JSON gives per-mode medians of samples/s, and for remote modes GETs per batch, GETs per MB
// delivered and bytes fetched per byte delivered (record bytes the reader asked for; GETs and
// bytes of every kind: records, whole small shards, heads and tails). The global shuffle is
// read from the server with --global-merge-gap (SHARDPACK_S3_MERGE_GAP's setting for
// scattered reads), the blocks order with the storage's default (1 MiB), blocks of
// --block-bytes stored bytes, windows of 16 blocks; in the blocks order, locally and from the
// server, whole blocks are announced ahead with shardpack::block_read_ahead (those the current
// batch and the next touch), as the torch Loader does. The range buffer must hold about two
// windows of blocks (a window's blocks are all read until its end, and the next window's all
// start at its beginning): remote_bench.sh sets it.
//
// --first-batch: the time from dataset::open to the end of the first batch (blocks order, the
// same read-ahead), with an empty disk cache (a fresh folder each round): the cold start of a
// training job on a new node; with the GETs it took.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
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
    std::string local, url;
    std::size_t batch = 256, batches = 0, rounds = 3;
    std::uint64_t block_bytes = 2 << 20, seed = 0;
    std::uint64_t global_merge_gap = 64 << 10;
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

struct run_result {
    double samples_per_s = 0;
    double gets_per_batch = 0, gets_per_mb = 0, fetched_per_delivered = 0;
};

// Reads `batches` batches from position `start` of the plan's order (start + batches * batch
// stays within the order: the caller picks it so).
run_result run_mode(const dataset& ds, const epoch_plan& plan, std::size_t start, const args_t& a,
                    const remote::s3_storage* st) {
    buffers b(ds, a.batch);
    read_context ctx;
    const auto& order = plan.order;
    const std::size_t batch = std::min(a.batch, order.size());
    const std::size_t batches = a.batches ? a.batches : order.size() / batch;
    const auto ahead = plan.read_ahead(batch);
    const remote::remote_stats before = st ? st->stats() : remote::remote_stats{};
    const auto t0 = clock_type::now();
    std::size_t done = 0;
    for (std::size_t k = 0; k < batches; ++k) {
        const std::size_t at = std::min(start + k * batch, order.size() - batch);
        if (ahead) {
            const auto& records = ahead->before(at);
            if (!records.empty()) ds.prefetch(records.data(), records.size(), ctx);
        }
        ds.read_batch(order.data() + at, batch, b.out, ctx);
        done += batch;
    }
    run_result r;
    r.samples_per_s = double(done) / std::chrono::duration<double>(clock_type::now() - t0).count();
    if (st) {
        const remote::remote_stats s = st->stats();
        const double gets = double(all_gets(s) - all_gets(before));
        const double delivered = double(s.bytes_delivered - before.bytes_delivered);
        r.gets_per_batch = gets / double(batches);
        r.gets_per_mb = delivered > 0 ? gets / (delivered / double(1 << 20)) : 0;
        r.fetched_per_delivered = delivered > 0 ? double(all_get_bytes(s) - all_get_bytes(before)) / delivered : 0;
    }
    return r;
}

std::shared_ptr<remote::s3_storage> fresh_storage(const std::string& url, const std::string& cache,
                                                 std::uint64_t merge_gap = 0) {
    remote::remote_options ro = remote::remote_options::from_environment();
    ro.cache_dir = cache;
    if (merge_gap) ro.merge_gap = merge_gap;
    return remote::open_s3_storage(url, ro);
}

dataset open_with(const std::string& url, const std::shared_ptr<remote::s3_storage>& st) {
    open_options o;
    o.storage = st;
    return dataset::open(url, o);
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
            else if (k == "--global-merge-gap") a.global_merge_gap = std::stoull(value());
            else if (k == "--seed") a.seed = std::stoull(value());
            else if (k == "--first-batch") a.first_batch = true;
            else throw std::runtime_error("unknown option " + k);
        }
        if (a.url.empty() || (!a.first_batch && a.local.empty()) || a.batch == 0 || a.rounds == 0)
            throw std::runtime_error("needs --url and --local (or --first-batch), and counts of at least 1");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_remote: %s\nusage: bench_remote --local DIR --url s3://B/P [--batch N] [--batches N] "
                             "[--rounds N] [--block-bytes N] [--global-merge-gap N] [--seed N] | --first-batch --url s3://B/P\n", e.what());
        return 2;
    }
    try {
        if (a.first_batch) return first_batch(a);
        const dataset local = dataset::open(a.local);
        const std::string cache = std::filesystem::temp_directory_path().string() + "/bench_remote_warm_" + std::to_string(::getpid());
        { const dataset warm = open_with(a.url, fresh_storage(a.url, cache)); (void)warm; }  // heads and indexes on disk
        const char* names[4] = {"local_global", "local_blocks", "remote_global", "remote_blocks"};
        std::vector<run_result> results[4];
        for (std::size_t r = 0; r < a.rounds; ++r) {
            for (int m0 = 0; m0 < 4; ++m0) {
                const int m = int((std::size_t(m0) + r) % 4);
                const bool blocks = m % 2 == 1, remote = m >= 2;
                const epoch_plan plan = make_order(local, blocks, a.seed + r, a.block_bytes);
                const std::size_t start = 0;
                if (remote) {
                    // The global shuffle reads with small merges (its records are scattered:
                    // what a large range brings along is rarely read); the blocks order with the
                    // default (its neighbours are read by the next batches of the window).
                    auto st = fresh_storage(a.url, cache, blocks ? 0 : a.global_merge_gap);
                    const dataset ds = open_with(a.url, st);
                    results[m].push_back(run_mode(ds, plan, start, a, st.get()));
                } else {
                    results[m].push_back(run_mode(local, plan, start, a, nullptr));
                }
            }
        }
        std::filesystem::remove_all(cache);
        std::printf("{\"tool\":\"bench_remote\",\"records\":%zu,\"shards\":%zu,\"batch\":%zu,\"batches\":%zu,\"rounds\":%zu,"
                    "\"block_bytes\":%llu,\"global_merge_gap\":%llu,\"buffer_bytes\":%llu,\"modes\":{",
                    local.size(), local.shard_count(), a.batch, a.batches ? a.batches : local.size() / std::min(a.batch, local.size()), a.rounds, (unsigned long long)a.block_bytes,
                    (unsigned long long)a.global_merge_gap,
                    (unsigned long long)remote::remote_options::from_environment().buffer_bytes);
        for (int m = 0; m < 4; ++m) {
            std::vector<double> sps, gpb, gpm, fpd;
            for (const auto& x : results[m]) {
                sps.push_back(x.samples_per_s);
                gpb.push_back(x.gets_per_batch);
                gpm.push_back(x.gets_per_mb);
                fpd.push_back(x.fetched_per_delivered);
            }
            std::string each;
            for (double x : sps) each += (each.empty() ? "" : ",") + std::to_string(x);
            std::printf("%s\"%s\":{\"samples_per_s\":%.1f,\"gets_per_batch\":%.2f,\"gets_per_mb_delivered\":%.3f,"
                        "\"bytes_fetched_per_byte_delivered\":%.3f,\"samples_per_s_rounds\":[%s]}",
                        m ? "," : "", names[m], bench::median(sps), bench::median(gpb), bench::median(gpm), bench::median(fpd), each.c_str());
        }
        std::printf("}}\n");
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_remote: %s\n", e.what());
        return 1;
    }
    return 0;
}
