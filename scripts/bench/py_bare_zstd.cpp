// The floor of the Python reading benchmark's uint8 target, loaded into the benchmark's own
// process (ctypes) so that it is measured in the same process as the Loader, epoch for epoch:
// bare ZSTD_decompressDCtx of a batch's stored frames into one reused buffer per thread (no
// checksum, no conversion, no output arrays), the batch split over the threads in contiguous
// parts as the extension splits it, on threads kept from call to call as the extension keeps
// its pool (a thread started per batch waited for a core on a loaded machine: up to 5x slower
// epochs, which made the floor too easy). Each record is decoded by tools/bare_zstd.hpp's
// bare_decode, the floor tools/bench_read measures against.
//
// Built by scripts/bench.sh (c++ -O2 -shared -fPIC -Iinclude -Itools ... -lzstd); used by
// py_read_bench.py run (the sp_zstd_u8 methods). C interface:
//   void* bare_open(const char* dataset, char* error, size_t error_size)   NULL on failure
//   int bare_read(void* h, const int64_t* indices, size_t n, size_t threads)  0, or -1
//   uint64_t bare_sink(void* h)   a byte of every result folded in (nothing optimised away)
//   void bare_close(void* h)
#include <zstd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bare_zstd.hpp"  // tools/: the floor bench_read measures against, the same code
#include "shardpack/reader.hpp"

namespace {

namespace d = shardpack::detail;

using stored_record = shardpack::bench::stored_frames;
using shardpack::bench::bare_decode;

struct worker {
    std::unique_ptr<ZSTD_DCtx, d::dctx_deleter> dctx{ZSTD_createDCtx()};
    std::vector<unsigned char> buffer;
    std::uint64_t sink = 0;
};

// Threads 1.. of a call's parts (the calling thread does part 0), started once, woken per call.
class part_pool {
public:
    ~part_pool() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        for (auto& t : threads_) t.join();
    }
    // Runs part(0) .. part(parts - 1), part 0 on this thread, and returns when all are done.
    void run(std::size_t parts, const std::function<void(std::size_t)>& part) {
        while (threads_.size() + 1 < parts) {
            const std::size_t id = threads_.size() + 1;
            threads_.emplace_back([this, id] { serve(id); });
        }
        {
            std::lock_guard<std::mutex> lock(mutex_);
            part_ = &part;
            parts_ = parts;
            pending_ = parts - 1;
            ++generation_;
        }
        wake_.notify_all();
        part(0);
        std::unique_lock<std::mutex> lock(mutex_);
        done_.wait(lock, [this] { return pending_ == 0; });
    }

private:
    void serve(std::size_t id) {
        std::uint64_t seen = 0;
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
            if (stop_) return;
            seen = generation_;
            if (id >= parts_) continue;
            const auto* part = part_;
            lock.unlock();
            (*part)(id);
            lock.lock();
            if (--pending_ == 0) done_.notify_all();
        }
    }
    std::mutex mutex_;
    std::condition_variable wake_, done_;
    const std::function<void(std::size_t)>* part_ = nullptr;
    std::size_t parts_ = 0, pending_ = 0;
    std::uint64_t generation_ = 0;
    bool stop_ = false;
    std::vector<std::thread> threads_;
};

struct handle {
    shardpack::dataset ds;
    std::vector<stored_record> records;
    std::vector<worker> workers;
    std::size_t max_decoded = 0;
    std::unique_ptr<part_pool> pool = std::make_unique<part_pool>();  // last: its threads stop first
};


}  // namespace

extern "C" {

void* bare_open(const char* path, char* error, std::size_t error_size) {
    try {
        shardpack::open_options o;
        o.io = shardpack::io_mode::mmap;
        o.max_open_shards = shardpack::open_options::all_shards;  // pointers into every shard
        auto h = std::make_unique<handle>(handle{shardpack::dataset::open(path, o), {}, {}, 0, std::make_unique<part_pool>()});
        for (std::size_t k = 0; k < h->ds.shard_count(); ++k) {
            const auto& shard = h->ds.shard(k);
            for (std::size_t i = 0; i < shard.record_count(); ++i) {
                const auto e = shard.entry(i);
                h->records.push_back({shard.bytes() + e.offset, std::size_t(e.stored_size), std::size_t(e.decoded_size), e.codec});
                h->max_decoded = std::max(h->max_decoded, std::size_t(e.decoded_size));
            }
        }
        return h.release();
    } catch (const std::exception& e) {
        std::snprintf(error, error_size, "%s", e.what());
        return nullptr;
    }
}

int bare_read(void* hp, const std::int64_t* indices, std::size_t n, std::size_t threads) {
    handle& h = *static_cast<handle*>(hp);
    const std::size_t parts = std::max<std::size_t>(1, std::min(threads, n));
    while (h.workers.size() < parts) {
        h.workers.emplace_back();
        h.workers.back().buffer.resize(h.max_decoded);
    }
    const d::schema_record schema = h.ds.shard(0).schema();
    std::atomic<bool> failed{false};
    const std::function<void(std::size_t)> part = [&](std::size_t p) {
        worker& w = h.workers[p];
        try {
            for (std::size_t j = n * p / parts; j < n * (p + 1) / parts; ++j) {
                const std::int64_t i = indices[j];
                if (i < 0 || std::size_t(i) >= h.records.size()) throw std::runtime_error("index out of range");
                bare_decode(w.dctx.get(), h.records[std::size_t(i)], schema, w.buffer.data(), std::size_t(i));
                w.sink += w.buffer[w.buffer.size() / 2];
            }
        } catch (const std::exception&) {
            failed = true;
        }
    };
    h.pool->run(parts, part);
    return failed ? -1 : 0;
}

std::uint64_t bare_sink(void* hp) {
    std::uint64_t s = 0;
    for (const auto& w : static_cast<handle*>(hp)->workers) s += w.sink;
    return s;
}

void bare_close(void* hp) { delete static_cast<handle*>(hp); }

}  // extern "C"
