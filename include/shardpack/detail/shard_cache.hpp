// The open shards of a dataset (dataset_state::shards) and the pin that keeps one open while
// a read or a sample uses it. A dataset of at most open_options::max_open_shards shards keeps
// them all open (eager); a larger one opens each on first use (lazy), see reader.hpp's MANY SHARDS.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "shard_file.hpp"

namespace shardpack::detail {

// The open shards of a dataset: all of them (eager), or at most `limit` at once, opened on
// first use and closed least recently used first (lazy). Thread-safe: a shard being opened by
// one thread is waited for by the others that need it; opening runs outside the lock.
class shard_cache {
public:
    using file_ptr = std::shared_ptr<const shard_file>;

    void init(std::size_t count, std::size_t limit, bool eager) {
        slots_.assign(count, nullptr);
        eager_ = eager;
        limit_ = limit;
        if (!eager) {
            opening_.assign(count, 0);
            prev_.assign(count + 1, std::uint32_t(count));  // count: the list's head/tail sentinel
            next_.assign(count + 1, std::uint32_t(count));
        }
    }
    bool eager() const { return eager_; }
    std::size_t limit() const { return limit_; }
    // Eager caches only: the shard, open since open().
    const shard_file* eager_at(std::size_t k) const { return slots_[k].get(); }
    const file_ptr& eager_ptr(std::size_t k) const { return slots_[k]; }
    void set_eager(std::size_t k, file_ptr f) { slots_[k] = std::move(f); }

    bool is_open(std::size_t k) const {
        if (eager_) return true;
        std::lock_guard<std::mutex> lock(mutex_);
        return slots_[k] != nullptr;
    }

    std::size_t open_count() const {
        if (eager_) return slots_.size();
        std::lock_guard<std::mutex> lock(mutex_);
        return open_;
    }

    // The shard k, opened with open(k) when it is not open.
    template <class Open>
    file_ptr get(std::size_t k, Open&& open) const {
        if (eager_) return slots_[k];
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            if (slots_[k]) {
                unlink(k);
                push_front(k);
                return slots_[k];
            }
            if (!opening_[k]) break;
            opened_.wait(lock);
        }
        opening_[k] = 1;
        lock.unlock();
        file_ptr f;
        try {
            f = open(k);
        } catch (...) {
            lock.lock();
            opening_[k] = 0;
            opened_.notify_all();
            throw;
        }
        std::vector<file_ptr> closing;  // closed (unmapped) after the lock is released
        lock.lock();
        slots_[k] = f;
        opening_[k] = 0;
        push_front(k);
        ++open_;
        while (open_ > limit_) {
            const std::uint32_t last = prev_[slots_.size()];
            unlink(last);
            closing.push_back(std::move(slots_[last]));
            slots_[last] = nullptr;
            --open_;
        }
        opened_.notify_all();
        lock.unlock();
        return f;  // `closing` is destroyed here, without the lock
    }

private:
    // Both lists are indexed by shard; the entry at slots_.size() is the sentinel.
    void unlink(std::size_t k) const {
        next_[prev_[k]] = next_[k];
        prev_[next_[k]] = prev_[k];
    }
    void push_front(std::size_t k) const {
        const std::size_t head = slots_.size();
        next_[k] = next_[head];
        prev_[k] = std::uint32_t(head);
        prev_[next_[head]] = std::uint32_t(k);
        next_[head] = std::uint32_t(k);
    }

    mutable std::vector<file_ptr> slots_;
    bool eager_ = true;
    std::size_t limit_ = 0;
    mutable std::mutex mutex_;
    mutable std::condition_variable opened_;
    mutable std::vector<unsigned char> opening_;
    mutable std::vector<std::uint32_t> prev_, next_;  // most recently used first
    mutable std::size_t open_ = 0;
};

// A shard in use: `file` stays valid while the pin lives (a lazy cache may close the shard
// meanwhile; the pin's reference keeps it open).
struct shard_pin {
    std::shared_ptr<const shard_file> hold;  // empty for an eager cache: the dataset keeps it
    const shard_file* file = nullptr;
    const shard_file* operator->() const { return file; }
    const shard_file& operator*() const { return *file; }
};

}  // namespace shardpack::detail
