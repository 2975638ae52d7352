// The reader's own I/O engine (detail/io_engine.hpp) and io_mode::automatic's choice: stream and
// blocks deliver the bytes mmap delivers through every read path, from many threads; the engine
// reads each byte of a streamed dataset once and stays within its cache; automatic picks mmap
// for resident data, stream for cold data that fits the cache and blocks (saying so once) for
// cold data that does not; a shard truncated under a streaming reader is an error naming it; a
// local folder's extents stay in the page cache (the engine holds no copy), and begin_epoch
// reads a streamed dataset again when the page cache dropped it.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <functional>
#include <mutex>
#include <filesystem>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "shardpack/order.hpp"
#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

open_options with(io_mode mode, std::uint64_t cache_bytes = 0) {
    open_options o;
    o.io = mode;
    o.cache_bytes = cache_bytes;
    return o;
}

// Record i as every path delivers it: at(), read(), read_into() with a random crop and flips.
std::string everything(const dataset& ds, std::size_t i, read_context& ctx) {
    std::string out;
    const sample a = ds.at(i);
    out += std::string(a.key());
    out.append(reinterpret_cast<const char*>(a.image().data()), a.image().bytes());
    if (ds.schema().task == task::segmentation) {
        const auto l = a.label();
        out.append(reinterpret_cast<const char*>(l.data()), l.bytes());
    }
    out += std::to_string(a.class_id());
    const sample r = ds.read(i, ctx);
    out.append(reinterpret_cast<const char*>(r.image().data()), r.image().bytes());
    augmentation aug;
    aug.height = 8;
    aug.width = 12;
    aug.position = crop_position::random;
    aug.hflip = flip_mode::random;
    aug.seed = 3;
    std::vector<std::uint8_t> img(std::size_t(8) * 12 * ds.schema().channels);
    sample_buffers b;
    b.image_u8 = img.data();
    b.image_capacity = img.size();
    b.augment = &aug;
    ds.read_into(i, b, ctx);
    out.append(reinterpret_cast<const char*>(img.data()), img.size());
    return out;
}

std::uint64_t data_bytes(const dataset& ds) {
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) total += ds.shard_bytes(k);
    return total;
}

std::vector<std::string> shard_paths(const dataset& ds, const std::string& dir) {
    std::vector<std::string> paths;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) paths.push_back(dir + "/" + ds.shard_name(k));
    return paths;
}

// Drops these files from the page cache (written and fsynced: clean pages go; no mapping of
// them may be open). False when the file system keeps them (tmpfs).
bool evict(const std::vector<std::string>& paths) {
    for (const auto& p : paths) {
        const int fd = ::open(p.c_str(), O_RDONLY);
        if (fd < 0) return false;
        ::fdatasync(fd);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
    std::uint64_t bytes = 0;
    double resident = 0;
    for (const auto& p : paths) resident = std::max(resident, detail::resident_share(p, bytes));
    return resident < 0.5;
}

// Every codec, segmentation and classification: 24x16 records in several shards of 8 KiB.
struct variant {
    bool seg;
    record_codec codec;
};
const variant every_codec[] = {{true, record_codec::zstd}, {true, record_codec::zstd_record},
                               {true, record_codec::none}, {false, record_codec::zstd_record}};
synthetic_options write_variant(const temp_dir& dir, variant v, std::uint32_t records) {
    synthetic_options o;
    o.records = records;
    o.width = 24;
    o.height = 16;
    o.segmentation = v.seg;
    o.codec = v.codec;
    o.shard_size = 8 * 1024;
    write_synthetic(dir.str(), o);
    return o;
}

}  // namespace

TEST_CASE("stream and blocks deliver what mmap delivers, through every read path and codec", "[engine]") {
    for (const variant v : every_codec) {
        temp_dir dir("engine");
        write_variant(dir, v, 60);
        const dataset mapped = dataset::open(dir.str(), with(io_mode::mmap));
        const dataset streamed = dataset::open(dir.str(), with(io_mode::stream));
        // A cache of a few KiB: blocks evicts all the time and drops hints it cannot hold.
        const dataset blocks = dataset::open(dir.str(), with(io_mode::blocks, 6 * 1024));
        REQUIRE(streamed.io() == io_mode::stream);
        REQUIRE(blocks.io() == io_mode::blocks);
        REQUIRE(std::string(blocks.preferred_order()) == "blocks");
        REQUIRE(std::string(streamed.preferred_order()) == "global");
        REQUIRE(mapped.shard_count() > 2);
        read_context c1, c2, c3;
        const auto order = permutation(mapped.size(), 7, 0);
        for (const auto i : order) {
            const std::string want = everything(mapped, i, c1);
            REQUIRE(everything(streamed, i, c2) == want);
            REQUIRE(everything(blocks, i, c3) == want);
        }
        // Blocks: a batch's read-ahead, then the batch, from the cache.
        std::vector<std::size_t> batch(order.begin(), order.begin() + 20);
        blocks.prefetch(batch.data(), batch.size());
        for (const auto i : batch) REQUIRE(everything(blocks, i, c3) == everything(mapped, i, c1));
        const auto s = streamed.io_counters();
        CHECK(s.extent_bytes == data_bytes(streamed));  // every byte once, in extents
        CHECK(s.peak_cached_bytes <= streamed.cache_bytes());
        const auto b = blocks.io_counters();
        CHECK(b.peak_cached_bytes <= 6 * 1024);
        // A local folder's extents stay in the page cache: the reader holds no copy of them.
        CHECK(s.peak_held_bytes == 0);
        CHECK(b.peak_held_bytes == 0);
    }
}

TEST_CASE("begin_epoch: what the page cache dropped is read again in large reads, a stream before the epoch",
          "[engine][epoch]") {
    temp_dir dir("engine-epoch");
    synthetic_options o;
    o.records = 200;
    o.width = 32;
    o.height = 24;
    o.shard_size = 48 * 1024;
    write_synthetic(dir.str(), o);
    const dataset ds = dataset::open(dir.str(), with(io_mode::stream));
    const auto paths = shard_paths(ds, dir.str());
    const std::uint64_t total = data_bytes(ds);
    const dataset right = dataset::open(dir.str(), with(io_mode::pread));
    read_context ctx, rctx;
    const auto epoch = [&](std::uint64_t e) {
        for (const auto i : permutation(ds.size(), 5, e)) REQUIRE(everything(ds, i, ctx) == everything(right, i, rctx));
    };
    epoch(0);
    REQUIRE(ds.io_counters().extent_bytes == total);
    CHECK_FALSE(ds.begin_epoch());  // all there: nothing to read
    epoch(1);
    CHECK(ds.io_counters().extent_bytes == total);
    if (!evict(paths)) SHARDPACK_SKIP("the file system keeps evicted pages (tmpfs?): no dropped pages to test here");
    CHECK(ds.begin_epoch());  // dropped: queued again, whole
    epoch(2);
    const auto c = ds.io_counters();
    CHECK(c.extent_bytes == 2 * total);
    CHECK(c.peak_cached_bytes <= total);
    // A reader that does not stream has nothing to queue at an epoch ...
    CHECK_FALSE(right.begin_epoch());
    // ... but one that reads blocks reads the last epoch's blocks again when the next wants them,
    // whole, instead of its records one by one from a page cache that dropped them.
    const dataset blocks = dataset::open(dir.str(), with(io_mode::blocks, total * 2));
    std::vector<std::size_t> all(blocks.size());
    std::iota(all.begin(), all.end(), std::size_t(0));
    const auto blocks_epoch = [&] {
        blocks.prefetch(all.data(), all.size());
        for (const auto i : all) REQUIRE(everything(blocks, i, ctx) == everything(right, i, rctx));
    };
    blocks_epoch();
    const auto b0 = blocks.io_counters();
    REQUIRE(evict(paths));
    CHECK_FALSE(blocks.begin_epoch());
    blocks_epoch();
    const auto b1 = blocks.io_counters();
    CHECK(b1.extent_bytes == 2 * b0.extent_bytes);
    CHECK(b1.direct_bytes == b0.direct_bytes);
}

TEST_CASE("the engine serves many threads at once, each byte read once", "[engine][threads]") {
    temp_dir dir("engine-mt");
    synthetic_options o;
    o.records = 400;
    o.width = 32;
    o.height = 24;
    o.shard_size = 64 * 1024;
    write_synthetic(dir.str(), o);
    const dataset mapped = dataset::open(dir.str(), with(io_mode::mmap));
    open_options so = with(io_mode::stream);
    so.io_threads = 3;  // more than one reader thread of the engine, sweeping in turn
    const dataset streamed = dataset::open(dir.str(), so);
    std::atomic<int> wrong{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            read_context a, b;
            const auto order = permutation(mapped.size(), 100 + t, 0);
            for (const auto i : order)
                if (everything(streamed, i, a) != everything(mapped, i, b)) ++wrong;
        });
    for (auto& t : threads) t.join();
    REQUIRE(wrong == 0);
    CHECK(streamed.io_counters().extent_bytes == data_bytes(streamed));
}

TEST_CASE("automatic: mmap when resident, stream when cold and it fits, blocks (said once) when not", "[engine][auto]") {
    temp_dir dir("engine-auto");
    synthetic_options o;
    o.records = 300;
    o.width = 32;
    o.height = 24;
    o.shard_size = 48 * 1024;
    write_synthetic(dir.str(), o);
    std::vector<std::string> paths;
    std::uint64_t total = 0;
    {
        // Just written: in the page cache.
        const dataset warm = dataset::open(dir.str());
        REQUIRE(warm.io() == io_mode::mmap);
        REQUIRE(warm.shard(0).bytes() != nullptr);
        REQUIRE(std::string(warm.preferred_order()) == "global");
        paths = shard_paths(warm, dir.str());
        total = data_bytes(warm);
    }
    if (!evict(paths)) SHARDPACK_SKIP("the file system keeps evicted pages (tmpfs?): no cold reads to test here");
    {
        const dataset cold = dataset::open(dir.str(), with(io_mode::automatic, total * 2));
        REQUIRE(cold.io() == io_mode::stream);
        REQUIRE(cold.shard(0).bytes() == nullptr);
        REQUIRE(std::string(cold.preferred_order()) == "global");
        read_context ctx;
        for (std::size_t i = 0; i < cold.size(); ++i) (void)cold.read(i, ctx);
        CHECK(cold.io_counters().extent_bytes == total);
    }
    REQUIRE(evict(paths));
    std::vector<std::string> said;
    open_options small = with(io_mode::automatic, total / 2);
    small.log = [&said](const std::string& m) { said.push_back(m); };
    const dataset big = dataset::open(dir.str(), small);
    REQUIRE(big.io() == io_mode::blocks);
    REQUIRE(std::string(big.preferred_order()) == "blocks");
    REQUIRE(said.size() == 1);
    CHECK(said[0].find("blocks order") != std::string::npos);
    CHECK(said[0].find("cache_bytes") != std::string::npos);
    // An epoch in the blocks order, each window's blocks fetched ahead as the loaders do.
    order_options oo;
    oo.kind = order_kind::blocks;
    oo.block = 40;
    oo.window = 2;
    oo.shard_starts = shard_starts_of(big);
    const auto order = epoch_order(big.size(), 1, 0, 0, 1, false, oo);
    const dataset warm = dataset::open(dir.str(), with(io_mode::pread));  // what is right, to compare
    read_context ctx, mctx;
    for (std::size_t p = 0; p < order.size(); p += 40) {
        std::vector<std::size_t> next(order.begin() + p, order.begin() + std::min(order.size(), p + 40));
        big.prefetch(next.data(), next.size());
        for (const auto i : next) REQUIRE(everything(big, i, ctx) == everything(warm, i, mctx));
    }
    const auto c = big.io_counters();
    CHECK(c.peak_cached_bytes <= total / 2);
    CHECK(c.extent_reads > 0);
}

TEST_CASE("a shard truncated under a streaming reader is an error naming it, never a hang", "[engine][damage]") {
    temp_dir dir("engine-trunc");
    synthetic_options o;
    o.records = 200;
    o.width = 32;
    o.height = 24;
    o.codec = record_codec::none;
    o.shard_size = 1 << 30;  // one shard
    write_synthetic(dir.str(), o);
    const dataset ds = dataset::open(dir.str(), with(io_mode::stream));
    const std::string shard = dir / ds.shard_name(0);
    // Truncated in place (cp over it, rsync --inplace): the open descriptor sees the new size.
    REQUIRE(::truncate(shard.c_str(), static_cast<off_t>(ds.shard_bytes(0) / 2)) == 0);
    read_context ctx;
    std::string message;
    try {
        for (std::size_t i = 0; i < ds.size(); ++i) (void)ds.read(ds.size() - 1 - i, ctx);
    } catch (const error& e) {
        message = e.what();
    }
    REQUIRE(message.find(ds.shard_name(0)) != std::string::npos);
    CHECK(message.find("truncated") != std::string::npos);
}

TEST_CASE("a mapped shard truncated under the reader is an error naming it, not a SIGBUS", "[engine][damage][mmap]") {
    // Catch installs a SIGBUS handler of its own at each test case; the reader puts its own back
    // at the first guarded read more than 100 ms after it last looked (mapped_guard.hpp).
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    for (const record_codec codec : {record_codec::none, record_codec::zstd, record_codec::zstd_record}) {
        temp_dir dir("mmap-trunc");
        synthetic_options o;
        o.records = 200;
        o.width = 64;
        o.height = 48;
        o.codec = codec;
        o.shard_size = 1 << 30;  // one shard
        write_synthetic(dir.str(), o);
        const dataset ds = dataset::open(dir.str(), with(io_mode::mmap));
        REQUIRE(ds.shard(0).bytes() != nullptr);
        const std::string shard = dir / ds.shard_name(0);
        // Truncated in place, as cp over it or rsync --inplace do: the mapping's tail pages go.
        REQUIRE(::truncate(shard.c_str(), static_cast<off_t>(ds.shard_bytes(0) / 3)) == 0);
        read_context ctx;
        const std::size_t last = ds.size() - 1;
        const auto names_it = [&](const std::string& what, const std::function<void()>& read) {
            INFO(what);
            std::string message;
            try {
                read();
            } catch (const error& e) {
                message = e.what();
            }
            CHECK(message.find(ds.shard_name(0)) != std::string::npos);
            CHECK(message.find("truncated") != std::string::npos);
        };
        names_it("read", [&] { (void)ds.read(last, ctx); });
        names_it("at", [&] { (void)ds.at(last); });
        std::vector<std::uint8_t> img(std::size_t(64) * 48 * 3);
        sample_buffers b;
        b.image_u8 = img.data();
        b.image_capacity = img.size();
        names_it("read_into", [&] { ds.read_into(last, b, ctx); });
        const std::size_t idx[1] = {last};
        names_it("read_batch", [&] { ds.read_batch(idx, 1, b, ctx); });
        // And the process goes on: a second truncation fault is caught as well.
        names_it("read again", [&] { (void)ds.read(last - 1, ctx); });
    }
}

TEST_CASE("blocks_layout: 4 MiB blocks in windows of 16, fewer and smaller where three windows would not fit the cache",
          "[engine][order]") {
    temp_dir dir("engine-layout");
    synthetic_options o;
    o.records = 300;
    o.width = 32;
    o.height = 24;
    o.shard_size = 48 * 1024;
    write_synthetic(dir.str(), o);
    const dataset mapped = dataset::open(dir.str(), with(io_mode::mmap));
    const std::uint64_t total = data_bytes(mapped);
    const double per_record = double(total) / double(mapped.size());
    const auto records_in = [&](double bytes) { return std::size_t(std::nearbyint(bytes / per_record)); };
    // Without the engine's cache: the page cache holds what is read ahead.
    auto l = mapped.blocks_layout();
    CHECK(l.window == 16);
    CHECK(l.block == records_in(4 << 20));
    constexpr std::uint64_t MiB = 1 << 20;
    struct want_t {
        std::uint64_t cache;
        std::size_t window;
        double block_bytes;
    };
    for (const want_t w : {want_t{1024 * MiB, 16, 4.0 * MiB}, want_t{192 * MiB, 16, 4.0 * MiB}, want_t{48 * MiB, 4, 4.0 * MiB},
                           want_t{24 * MiB, 2, 4.0 * MiB}, want_t{12 * MiB, 2, 2.0 * MiB}, want_t{MiB, 2, 256.0 * 1024}}) {
        const dataset ds = dataset::open(dir.str(), with(io_mode::blocks, w.cache));
        l = ds.blocks_layout();
        INFO("cache " << w.cache / MiB << " MiB: block " << l.block << " records, window " << l.window);
        CHECK(l.window == w.window);
        CHECK(l.block == records_in(w.block_bytes));
        if (w.cache >= 3 * 2 * (256 << 10))  // three windows fit, down to the smallest block
            CHECK(3.0 * double(l.window) * double(l.block) * per_record <= double(w.cache) * 1.01);
    }
}

namespace {
// Bytes in memory, as a source for the engine itself.
class memory_source final : public byte_source {
public:
    explicit memory_source(std::size_t size) : bytes_(size) {
        for (std::size_t i = 0; i < size; ++i) bytes_[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
    }
    std::uint64_t size() const override { return bytes_.size(); }
    void read_at(std::uint64_t offset, std::size_t length, void* dst) const override {
        std::memcpy(dst, bytes_.data() + offset, length);
    }
    std::string describe() const override { return "memory"; }
    const std::vector<unsigned char>& bytes() const { return bytes_; }

private:
    std::vector<unsigned char> bytes_;
};
}  // namespace

TEST_CASE("a read-ahead larger than the cache keeps what it queued coming: no read waits forever", "[engine][cache]") {
    // Before: want() returned at the first range that did not fit without waking the I/O
    // thread, asleep since the last read, so a read of a range queued before it waited forever
    // (a Loader over io "blocks" with a cache of a few MiB stalled in its first epoch).
    constexpr std::uint64_t block = 64 << 10;
    detail::io_engine::settings s;
    s.cache_bytes = 3 * block;
    detail::io_engine engine(s);
    const auto src = std::make_shared<memory_source>(8 * block);
    const std::uint32_t id = engine.add(src);
    std::vector<unsigned char> got(block);
    const byte_range first{0, block};
    engine.want(id, &first, 1);
    engine.read(id, 0, block, got.data());  // the I/O thread has read it and sleeps again
    REQUIRE(std::memcmp(got.data(), src->bytes().data(), block) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    std::vector<byte_range> ahead;
    for (std::uint64_t b = 1; b < 8; ++b) ahead.push_back({b * block, block});
    engine.want(id, ahead.data(), ahead.size());  // three fit (the first is evicted); the rest is dropped
    CHECK(engine.stats().dropped_hints == 1);
    std::atomic<bool> done{false};
    std::thread reader([&] {
        engine.read(id, block, block, got.data());
        done = true;
    });
    for (int k = 0; k < 500 && !done; ++k) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!done) {
        std::fprintf(stderr, "FAILED: the read of a queued extent still waits after 5 s\n");
        std::_Exit(1);  // the reader thread can neither finish nor be stopped
    }
    reader.join();
    CHECK(std::memcmp(got.data(), src->bytes().data() + block, block) == 0);
    // Later blocks that were dropped are read directly, and right.
    engine.read(id, 6 * block, block, got.data());
    CHECK(std::memcmp(got.data(), src->bytes().data() + 6 * block, block) == 0);
    CHECK(engine.stats().direct_reads >= 1);
}

TEST_CASE("keep_bytes: a remote source's extents are held in memory, a local one's read through to the page cache",
          "[engine][memory]") {
    constexpr std::uint64_t block = 64 << 10;
    for (const bool keep : {true, false}) {
        detail::io_engine::settings s;
        s.cache_bytes = 16 * block;
        s.block_bytes = block;
        s.keep_bytes = keep;
        detail::io_engine engine(s);
        const auto src = std::make_shared<memory_source>(5 * block + 123);
        const std::uint32_t id = engine.add(src);
        engine.want_all(id);
        // Reads across extents' edges, each compared with the source's bytes.
        std::vector<unsigned char> got(2 * block);
        for (const std::uint64_t at : {std::uint64_t(0), block - 7, 3 * block + 5, 5 * block - 100}) {
            const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(got.size(), src->size() - at));
            engine.read(id, at, n, got.data());
            REQUIRE(std::memcmp(got.data(), src->bytes().data() + at, n) == 0);
        }
        const auto c = engine.stats();
        CHECK(c.extent_bytes == src->size());
        CHECK(c.direct_reads == 0);  // every byte came through an extent
        CHECK(c.peak_cached_bytes == src->size());
        CHECK(c.peak_held_bytes == (keep ? src->size() : 0));
    }
}

namespace {
// A storage whose reads take `read_ms`, and `seek_ms` more where a read does not start where the
// last one ended (a disk head); it logs the offsets it was asked for.
class timed_source final : public byte_source {
public:
    timed_source(std::size_t size, int read_ms, int seek_ms) : size_(size), read_ms_(read_ms), seek_ms_(seek_ms) {}
    std::uint64_t size() const override { return size_; }
    void read_at(std::uint64_t offset, std::size_t length, void* dst) const override {
        int ms = read_ms_;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (offset != end_) ms += seek_ms_;
            end_ = offset + length;
            log_.push_back(offset);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        for (std::size_t i = 0; i < length; ++i) static_cast<unsigned char*>(dst)[i] = static_cast<unsigned char>((offset + i) * 7);
    }
    std::string describe() const override { return "timed"; }
    std::vector<std::uint64_t> log() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return log_;
    }

private:
    std::size_t size_;
    int read_ms_, seek_ms_;
    mutable std::mutex mutex_;
    mutable std::uint64_t end_ = 0;
    mutable std::vector<std::uint64_t> log_;
};
}  // namespace

TEST_CASE("a stream serves what a read waits for first where jumps are cheap, and stays in order where they seek",
          "[engine][schedule]") {
    // A global shuffle's first batch needs records from all over a streamed dataset: on an SSD,
    // NFS or object storage the engine fetches them first; on a disk head it keeps the sweep.
    constexpr std::uint64_t block = 4096;
    constexpr std::uint64_t blocks = 48;
    for (const bool seeks : {false, true}) {
        detail::io_engine::settings s;
        s.block_bytes = block;
        s.cache_bytes = blocks * block;
        s.keep_bytes = false;
        s.cheap_jump_seconds = 0.03;  // the sleeps of a loaded machine (a sanitizer run) wake late by ms
        detail::io_engine engine(s);
        const auto src = std::make_shared<timed_source>(blocks * block, 50, seeks ? 150 : 0);
        const std::uint32_t id = engine.add(src);
        engine.want_all(id);
        std::vector<unsigned char> got(block);
        // Wanted now: block 40 (a read waits for it), then blocks 20 and 30 together (a prefetch,
        // then reads); each is read right (bytes (offset * 7) mod 256).
        const auto check = [&](std::uint64_t b) {
            engine.read(id, b * block, block, got.data());
            for (std::uint64_t i = 0; i < block; i += 997) REQUIRE(got[i] == static_cast<unsigned char>((b * block + i) * 7));
        };
        check(40);
        const byte_range wanted[] = {{20 * block, block}, {30 * block, block}};
        engine.want(id, wanted, 2);
        check(30);
        check(20);
        const auto log = src->log();
        const auto at = [&](std::uint64_t b) {
            return std::size_t(std::find(log.begin(), log.end(), b * block) - log.begin());
        };
        INFO("seeks " << seeks << ", reads before block 40: " << at(40) << ", 20: " << at(20) << ", 30: " << at(30));
        // Blocks 40 and 20 are the probes in both: after a few blocks read in order, a wanted
        // block is read out of order, twice, 4 reads apart (20: the first wanted after the end).
        CHECK(at(40) <= 6);
        CHECK(at(20) <= at(40) + 7);
        if (!seeks) {
            CHECK(at(30) <= at(20) + 2);  // jumps cost what reads in order did: wanted blocks first
        } else {
            CHECK(at(30) >= at(20) + 8);  // the probes' seeks made jumps dear: 30 waited for the sweep from 21
            CHECK(engine.stats().jumps <= 4);
        }
    }
}

TEST_CASE("keep_decoded: a streamed dataset decoded as it arrives, reads from the copy bit for bit the mapped ones",
          "[engine][decoded]") {
    for (const variant v : every_codec) {
        temp_dir dir("engine-decoded");
        const synthetic_options o = write_variant(dir, v, 80);
        const dataset mapped = dataset::open(dir.str(), with(io_mode::mmap));
        const dataset streamed = dataset::open(dir.str(), with(io_mode::stream));
        // Not kept: not streamed, or the stored and decoded bytes together over the cache.
        CHECK_FALSE(mapped.keep_decoded());
        CHECK_FALSE(dataset::open(dir.str(), with(io_mode::blocks)).keep_decoded());
        CHECK_FALSE(dataset::open(dir.str(), with(io_mode::stream, data_bytes(mapped) + 1)).keep_decoded());
        CHECK(streamed.decoded_count() == 0);
        // What the copy takes: raw records their stored bytes (less than the shards, which hold
        // headers and indexes too); unknown (0) where shards are opened lazily.
        CHECK(streamed.decoded_bytes() == mapped.decoded_bytes());
        CHECK(mapped.decoded_bytes() >= std::uint64_t(o.records) * o.width * o.height);
        if (v.codec == record_codec::none) CHECK(mapped.decoded_bytes() < data_bytes(mapped));
        open_options lazy = with(io_mode::pread);
        lazy.max_open_shards = 1;
        REQUIRE(mapped.shard_count() > 1);
        CHECK(dataset::open(dir.str(), lazy).decoded_bytes() == 0);
        REQUIRE(streamed.keep_decoded());
        REQUIRE(streamed.keep_decoded());  // asked twice: one copy
        CHECK(streamed.decoded_count() == 0);  // nothing is decoded before the first read
        read_context c1, c2;
        // The first epoch races the copy's thread: some records come from it, some are read.
        for (const auto i : permutation(mapped.size(), 7, 0)) REQUIRE(everything(streamed, i, c2) == everything(mapped, i, c1));
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (streamed.decoded_count() < streamed.size() && std::chrono::steady_clock::now() < deadline)
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        REQUIRE(streamed.decoded_count() == streamed.size());
        // Every record from the copy: single reads and a cropped, flipped batch.
        for (const auto i : permutation(mapped.size(), 7, 1)) REQUIRE(everything(streamed, i, c2) == everything(mapped, i, c1));
        const auto order = permutation(mapped.size(), 3, 2);
        augmentation aug;
        aug.height = 10;
        aug.width = 14;
        aug.position = crop_position::random;
        aug.hflip = flip_mode::random;
        aug.vflip = flip_mode::random;
        aug.seed = 11;
        const std::size_t per = std::size_t(aug.height) * aug.width;
        const auto batch = [&](const dataset& ds, std::vector<float>& img, std::vector<float>& lab, std::vector<std::int32_t>& ids) {
            img.assign(order.size() * per * ds.schema().channels, -1.f);
            lab.assign(order.size() * per * ds.schema().class_count, -1.f);
            ids.assign(order.size(), -1);
            sample_buffers b;
            b.image_f32 = img.data();
            b.image_capacity = img.size();
            if (ds.schema().task == task::segmentation) {
                b.label_f32 = lab.data();
                b.label_capacity = lab.size();
            } else {
                b.class_id = ids.data();
            }
            b.augment = &aug;
            read_context ctx;
            ds.read_batch(order.data(), order.size(), b, ctx);
        };
        std::vector<float> i1, l1, i2, l2;
        std::vector<std::int32_t> d1, d2;
        batch(mapped, i1, l1, d1);
        batch(streamed, i2, l2, d2);
        CHECK(i1 == i2);
        CHECK(l1 == l2);
        CHECK(d1 == d2);
        // Complete: an epoch streams nothing again, even where the page cache dropped the shards.
        const std::uint64_t read_before = streamed.io_counters().extent_bytes;
        (void)evict(shard_paths(streamed, dir.str()));
        CHECK_FALSE(streamed.begin_epoch());
        for (const auto i : order) {
            sample_buffers b;
            std::vector<std::uint8_t> img(std::size_t(o.width) * o.height * streamed.schema().channels);
            b.image_u8 = img.data();
            b.image_capacity = img.size();
            streamed.read_into(i, b, c2);
            const sample want = mapped.at(i);
            REQUIRE(std::memcmp(img.data(), want.image().data(), img.size()) == 0);
        }
        CHECK(streamed.io_counters().extent_bytes == read_before);
    }
}

TEST_CASE("keep_decoded over a shard truncated under the reader: the copy stops, the read names the shard",
          "[engine][decoded][damage]") {
    temp_dir dir("engine-decoded-trunc");
    synthetic_options o;
    o.records = 200;
    o.width = 32;
    o.height = 24;
    o.codec = record_codec::none;
    o.shard_size = 1 << 30;  // one shard
    write_synthetic(dir.str(), o);
    const dataset ds = dataset::open(dir.str(), with(io_mode::stream));
    REQUIRE(ds.keep_decoded());
    const std::string shard = dir / ds.shard_name(0);
    REQUIRE(::truncate(shard.c_str(), static_cast<off_t>(ds.shard_bytes(0) / 2)) == 0);
    std::vector<std::uint8_t> img(std::size_t(o.width) * o.height * ds.schema().channels);
    sample_buffers b;
    b.image_u8 = img.data();
    b.image_capacity = img.size();
    read_context ctx;
    std::string message;
    try {
        ds.read_into(ds.size() - 1, b, ctx);
    } catch (const error& e) {
        message = e.what();
    }
    REQUIRE(message.find(ds.shard_name(0)) != std::string::npos);
    CHECK(ds.decoded_count() < ds.size());
}
