// The decoded copy (dataset::keep_decoded): every record of a streamed dataset, decoded in the
// reader's memory as the stream brings its bytes in, by one thread that follows the stream in
// file order. read_batch then copies out of it: no read, no checksum, no zstd.
//
// Why: a cold epoch of a streamed dataset in a global shuffle cannot hand out its first batch
// before the stream has brought most of the dataset in, and then decodes every batch after it,
// while the CPU idled during the stream (7,000 112x112 records on a hard disk: 0.10 s of
// decoding after a 0.65 s stream). Decoding while the disk reads moves that work under the
// stream, and later epochs read from memory as a preloaded array would. It costs the records'
// decoded size in this process (and filling fresh memory costs about what the decoding saved on
// a cold first epoch, measured), so nothing asks for it by default: a reader that reads every
// record each epoch does, where the stored and decoded bytes together fit cache_bytes.
//
// Thread safety: a record is claimed by its first put, then published once (its bytes and
// layout, then its state, released); find() acquires the state, and the record is never changed
// or freed before the copy is. (Not at idle priority: a SCHED_IDLE thread preempted
// while it holds the I/O engine's lock stalls the stream; measured, the cold epoch got slower.)
// Errors: the thread stops at the first record it cannot read (damaged, truncated, closed):
// that record and those after it are read the ordinary way, whose error names it.
#pragma once
#include <sys/mman.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "format.hpp"

namespace shardpack::detail {

class decoded_copy {
public:
    struct record {
        const unsigned char* bytes = nullptr;  // the decoded record (header, key, fields, image, label)
        record_layout layout;
    };

    // `sizes`: every record's decoded size, in dataset order. Reserves their sum in one mapping
    // (pages are touched only as records are decoded into it); throws std::bad_alloc when the
    // mapping fails.
    explicit decoded_copy(const std::vector<std::uint64_t>& sizes)
        : records_(sizes.size()), offsets_(sizes.size()), state_(new std::atomic<unsigned char>[sizes.size()]) {
        for (std::size_t i = 0; i < sizes.size(); ++i) {
            offsets_[i] = bytes_;
            bytes_ += sizes[i];
            state_[i].store(empty, std::memory_order_relaxed);
        }
        if (bytes_) {
            void* p = ::mmap(nullptr, static_cast<std::size_t>(bytes_), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) throw std::bad_alloc();
            arena_ = static_cast<unsigned char*>(p);
            // Small pages, no MADV_HUGEPAGE: see shardpack_ext.cpp's block_cache (a VM's huge
            // pages come from memory its host took back: 2-5x the cost of small ones on first use).
        }
    }
    ~decoded_copy() {
        stopping_.store(true);
        if (thread_.joinable()) thread_.join();
        if (arena_) ::munmap(arena_, static_cast<std::size_t>(bytes_));
    }
    decoded_copy(const decoded_copy&) = delete;
    decoded_copy& operator=(const decoded_copy&) = delete;

    // Record i, or null when it is not decoded (yet).
    const record* find(std::size_t i) const {
        return i < records_.size() && state_[i].load(std::memory_order_acquire) == ready ? &records_[i] : nullptr;
    }
    // Whether record i is there or being put.
    bool has(std::size_t i) const { return state_[i].load(std::memory_order_acquire) != empty; }
    // Record i's decoded bytes (its decoded size, as given at construction) and layout: by the
    // copy's thread, or by a read that decoded a whole record first. The first put of a record
    // claims it; another one returns.
    void put(std::size_t i, const unsigned char* bytes, const record_layout& layout) {
        if (i >= records_.size()) return;
        const std::uint64_t size = (i + 1 < offsets_.size() ? offsets_[i + 1] : bytes_) - offsets_[i];
        if (layout.total_bytes != size) return;  // not what the index said: read the ordinary way
        unsigned char expected = empty;
        if (!state_[i].compare_exchange_strong(expected, writing)) return;
        std::memcpy(arena_ + offsets_[i], bytes, static_cast<std::size_t>(size));
        records_[i].bytes = arena_ + offsets_[i];
        records_[i].layout = layout;
        state_[i].store(ready, std::memory_order_release);
        if (count_.fetch_add(1) + 1 == records_.size()) complete_.store(true);
    }
    // Every record is there: the dataset's stored bytes are needed no more.
    bool complete() const { return complete_.load(); }
    std::size_t count() const { return count_.load(); }

    // Runs fill(stop flag) on the copy's thread, the first time only (the first read or
    // prefetch: opening a dataset to look at it decodes nothing).
    template <class Fill>
    void start(Fill&& fill) {
        if (started_.load(std::memory_order_acquire)) return;
        std::lock_guard<std::mutex> lock(start_mutex_);
        if (started_.load()) return;
        thread_ = std::thread([this, f = std::forward<Fill>(fill)]() mutable { f(stopping_); });
        started_.store(true, std::memory_order_release);
    }

private:
    std::vector<record> records_;
    std::vector<std::uint64_t> offsets_;
    enum : unsigned char { empty, writing, ready };
    std::unique_ptr<std::atomic<unsigned char>[]> state_;
    std::uint64_t bytes_ = 0;
    unsigned char* arena_ = nullptr;
    std::atomic<std::size_t> count_{0};
    std::atomic<bool> complete_{false}, started_{false}, stopping_{false};
    std::mutex start_mutex_;
    std::thread thread_;
};

}  // namespace shardpack::detail
