// The reader's own I/O engine: extents of shards (whole blocks of a few MiB, or a batch's merged
// record ranges) read by a few I/O threads, in the storage's order, into a bounded cache (the
// page cache for a local file, the engine's own memory for a remote one), ahead of the records
// that need them.
//
// Why: a cold disk serves one request per seek. Left to the kernel, a reader's 4 KiB page
// faults or WILLNEED hints are carried out in pieces of max(read-ahead, largest request): 128
// KiB on most disks, NFS and FUSE mounts, so a shuffled epoch seeks for every record. The engine
// asks for what it wants itself, in large reads, sorted by (shard, offset) among those in flight
// (one sweep of the head, then around again: C-SCAN), so the speed no longer depends on
// read_ahead_kb, fadvise/madvise being honoured, or fault-around.
//
// What comes first: extents a read waits for or a prefetch asked for ("wanted now") before
// the stream's background queue, where the storage serves a jump as fast as the next block (an
// SSD, NFS, object storage): a batch of a global shuffle then starts as soon as its own records
// are there, not after most of the stream. Where a jump costs more (a disk head's seek), the
// queue is read in order only. The engine tells the two apart by timing its own reads: after a
// few blocks read in order, a wanted-now extent elsewhere is read out of order (twice, 4 reads
// apart; then every 32 reads while jumps are dear), and what it took beyond a read in order of as
// many bytes is the jump's cost: cheap up to 2 ms. A disk head's seek (4-15 ms) is dear; an SSD's
// or NFS's jump (~0.1 ms) is not. Noise (a loaded CPU delaying the I/O thread) errs towards
// dear, which is reading in order: what the engine did before it timed anything.
//
// Two uses (open_options::io, see reader.hpp's I/O):
//   stream: every block of every shard is queued when the shard is opened; the threads read
//           them in file order, sequentially, while the reader serves records in any order
//           from what has arrived (a read of a block not there yet waits for it). The cache
//           holds the whole dataset: later epochs read from memory.
//   blocks: extents are read when dataset::prefetch (or read_batch, for its own batch) asks
//           for them, and kept least recently used first within cache_bytes.
// A read of bytes no extent holds or awaits (a shard's header and index at open) is read
// directly and not kept.
//
// Where the bytes stay (settings::keep_bytes): a remote source's extents are kept in the
// engine's memory. A local file's are not: the engine reads them (sequentially, into one
// scratch buffer a thread) to bring them into the page cache, and a read of an arrived extent
// is a pread the page cache serves. Why: the kernel keeps what a buffered read brought in
// anyway, so a copy in the reader's memory doubled the memory, and filling fresh anonymous
// memory costs CPU (zeroed pages, faults; ~1 s a GB on a 2-core VM, most of a CPU-bound cold
// epoch's overhead) that the page cache's reclaimed pages do not.
//
// Memory: ready and in-flight extents count against cache_bytes (also those the page cache
// keeps: the count is what the engine assumes is there); a prefetch that would exceed it, after
// evicting every extent not in use, is dropped (the read then reads directly). A read copies out
// of the cache under no lock (an extent is freed by the last reader holding it).
#pragma once
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "error.hpp"
#include "storage.hpp"

namespace shardpack::detail {

class io_engine {
public:
    struct settings {
        std::uint64_t cache_bytes = std::uint64_t(1) << 30;
        std::uint64_t block_bytes = std::uint64_t(4) << 20;  // stream: the size of each read
        unsigned threads = 1;  // one disk head: more threads interleave their requests (a seek each)
        bool keep_bytes = true;  // false: the page cache keeps what was read (a local file), see above
        double cheap_jump_seconds = 0.002;  // a jump costing at most this more than a read in order is cheap
    };
    struct counters {
        std::uint64_t extent_reads = 0, extent_bytes = 0;  // extents read by the I/O threads
        std::uint64_t direct_reads = 0, direct_bytes = 0;  // reads no extent covered
        std::uint64_t hits = 0, waits = 0;                 // reads served from the cache; of them, waited
        std::uint64_t jumps = 0;  // extents that did not start where the last read ended (a seek on a disk)
        std::uint64_t evicted_bytes = 0, dropped_hints = 0;
        std::uint64_t cached_bytes = 0, peak_cached_bytes = 0;
        std::uint64_t held_bytes = 0, peak_held_bytes = 0;  // of them, in the engine's memory
    };

    explicit io_engine(settings s) : settings_(s) {
        if (settings_.threads == 0) settings_.threads = 1;
        if (settings_.block_bytes == 0) settings_.block_bytes = std::uint64_t(4) << 20;
    }
    ~io_engine() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stopping_ = true;
        }
        queued_cv_.notify_all();
        for (auto& t : threads_) t.join();
    }
    io_engine(const io_engine&) = delete;
    io_engine& operator=(const io_engine&) = delete;

    const settings& config() const { return settings_; }

    // A new source; its id orders it after every source added before (file order for the
    // shards of a dataset, which are opened by number).
    std::uint32_t add(std::shared_ptr<byte_source> inner) {
        std::lock_guard<std::mutex> lock(mutex_);
        const std::uint32_t id = next_id_++;
        sources_[id].inner = std::move(inner);
        return id;
    }
    // The source is closed: its extents go (those being read are dropped when they arrive).
    void forget(std::uint32_t id) {
        std::vector<std::shared_ptr<extent>> freed;  // freed outside the lock
        std::lock_guard<std::mutex> lock(mutex_);
        auto s = sources_.find(id);
        if (s == sources_.end()) return;
        for (auto& [offset, e] : s->second.extents) {
            if (e->state == extent::queued) {
                queue_.erase(queue_key(*e));
                wanted_now_.erase(queue_key(*e));
                e->state = extent::failed;  // nobody can wait for it: the source is gone
                e->failure = s->second.inner->describe() + ": closed while its read was queued";
            }
            if (e->state == extent::ready) lru_.erase(e->lru);
            if (e->state != extent::reading) used_ -= e->length;  // a read in flight subtracts itself
            e->orphan = true;
            freed.push_back(std::move(e));
        }
        sources_.erase(s);
        note_used();
        arrived_cv_.notify_all();
    }

    // Queues the whole of source `id` in blocks of block_bytes (stream). The threads start
    // with the first read or prefetch, not here: opening a dataset to look at it reads nothing.
    void want_all(std::uint32_t id) {
        std::uint64_t size = 0;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            auto s = sources_.find(id);
            if (s == sources_.end()) return;
            size = s->second.inner->size();
        }
        std::vector<byte_range> blocks;
        for (std::uint64_t o = 0; o < size; o += settings_.block_bytes)
            blocks.push_back({o, std::min(settings_.block_bytes, size - o)});
        want(id, blocks.data(), blocks.size(), false, false);
    }

    // Forgets every arrived extent the page cache keeps (keep_bytes false), which may have
    // dropped them since (dataset::begin_epoch): a later want reads them again instead of
    // leaving their records to reads of the kernel's read-ahead. `again`: and queues each source
    // whole again (stream).
    void forget_arrived(bool again) {
        std::vector<std::uint32_t> ids;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            for (auto& [id, src] : sources_) {
                for (auto it = src.extents.begin(); it != src.extents.end();) {
                    extent& e = *it->second;
                    if (e.state != extent::ready || e.bytes) {
                        ++it;
                        continue;
                    }
                    lru_.erase(e.lru);
                    used_ -= e.length;
                    e.orphan = true;  // a reader holding it still reads through the page cache
                    it = src.extents.erase(it);
                }
                ids.push_back(id);
            }
            note_used();
        }
        if (again)
            for (const std::uint32_t id : ids) want_all(id);
    }

    // Queues the parts of these ranges (sorted, not overlapping) that no extent holds or awaits;
    // `now`: they (and those of them queued already) are wanted now, not in the background.
    void want(std::uint32_t id, const byte_range* ranges, std::size_t count, bool start = true, bool now = true) {
        std::vector<std::shared_ptr<extent>> evicted;  // freed outside the lock
        {
            std::lock_guard<std::mutex> lock(mutex_);
            if (start) start_threads();
            auto s = sources_.find(id);
            if (s == sources_.end()) return;
            source& src = s->second;
            bool full = false;  // the cache is full: the rest is dropped; what was queued is read (and the threads told)
            for (std::size_t i = 0; i < count && !full; ++i) {
                const std::uint64_t end = std::min(ranges[i].offset + ranges[i].length, src.inner->size());
                std::uint64_t pos = ranges[i].offset;
                while (pos < end) {
                    auto next = src.extents.upper_bound(pos);
                    if (next != src.extents.begin()) {
                        auto prev = std::prev(next);
                        if (prev->first + prev->second->length > pos) {  // held or awaited already
                            if (now) want_now(*prev->second);
                            pos = prev->first + prev->second->length;
                            continue;
                        }
                    }
                    const std::uint64_t gap_end = next == src.extents.end() ? end : std::min(end, next->first);
                    const std::uint64_t length = gap_end - pos;
                    if (!make_room(length, evicted)) {
                        ++counters_.dropped_hints;
                        full = true;
                        break;
                    }
                    auto e = std::make_shared<extent>();
                    e->source = id;
                    e->offset = pos;
                    e->length = length;
                    src.extents.emplace(pos, e);
                    queue_.emplace(queue_key(*e), e);
                    if (now) want_now(*e);
                    used_ += length;
                    note_used();
                    pos = gap_end;
                }
            }
        }
        queued_cv_.notify_all();
    }

    // Reads [offset, offset + length) of source `id`: from extents held or awaited (waiting for
    // them), the rest directly from the source.
    void read(std::uint32_t id, std::uint64_t offset, std::size_t length, void* dst) {
        auto* out = static_cast<unsigned char*>(dst);
        const std::uint64_t end = offset + length;
        std::uint64_t pos = offset;
        std::unique_lock<std::mutex> lock(mutex_);
        auto s = sources_.find(id);
        if (s == sources_.end()) throw error("the I/O engine has no source " + std::to_string(id));
        const std::shared_ptr<byte_source> inner = s->second.inner;
        while (pos < end) {
            source& src = sources_.at(id);
            auto next = src.extents.upper_bound(pos);
            std::shared_ptr<extent> e;
            if (next != src.extents.begin()) {
                auto prev = std::prev(next);
                if (prev->first + prev->second->length > pos) e = prev->second;
            }
            if (!e) {
                const std::uint64_t gap_end = next == src.extents.end() ? end : std::min(end, next->first);
                ++counters_.direct_reads;
                counters_.direct_bytes += gap_end - pos;
                lock.unlock();
                inner->read_at(pos, static_cast<std::size_t>(gap_end - pos), out + (pos - offset));
                lock.lock();
                pos = gap_end;
                continue;
            }
            ++counters_.hits;
            if (e->state == extent::queued || e->state == extent::reading) {
                start_threads();
                queued_cv_.notify_all();  // whoever queued it told the threads; told again, a lost wake-up cannot stall a read
                ++counters_.waits;
                want_now(*e);
                arrived_cv_.wait(lock, [&] { return e->state == extent::ready || e->state == extent::failed; });
            }
            if (e->state == extent::failed) throw error(e->failure);
            if (!e->orphan) lru_.splice(lru_.begin(), lru_, e->lru);  // most recently used first
            const std::uint64_t stop = std::min(end, e->offset + e->length);
            lock.unlock();
            if (e->bytes)
                std::memcpy(out + (pos - offset), e->bytes.get() + (pos - e->offset), static_cast<std::size_t>(stop - pos));
            else  // arrived in the page cache (keep_bytes false)
                inner->read_at(pos, static_cast<std::size_t>(stop - pos), out + (pos - offset));
            lock.lock();
            pos = stop;
        }
    }

    counters stats() const {
        std::lock_guard<std::mutex> lock(mutex_);
        return counters_;
    }

private:
    struct extent {
        enum status { queued, reading, ready, failed };
        std::uint32_t source = 0;
        std::uint64_t offset = 0, length = 0;
        status state = queued;
        bool wanted_now = false, orphan = false;
        std::unique_ptr<unsigned char[]> bytes;
        std::string failure;
        std::list<extent*>::iterator lru;  // valid while ready and not orphaned
    };
    struct source {
        std::shared_ptr<byte_source> inner;
        std::map<std::uint64_t, std::shared_ptr<extent>> extents;  // by offset, not overlapping
    };
    using key = std::pair<std::uint32_t, std::uint64_t>;  // (source, offset): the storage's order
    static key queue_key(const extent& e) { return {e.source, e.offset}; }

    // Frees ready extents no reader holds, least recently used first, until `length` more
    // bytes fit in cache_bytes. False when they cannot.
    bool make_room(std::uint64_t length, std::vector<std::shared_ptr<extent>>& evicted) {
        while (used_ + length > settings_.cache_bytes && !lru_.empty()) {
            extent* victim = lru_.back();
            lru_.pop_back();
            auto& extents = sources_.at(victim->source).extents;
            auto it = extents.find(victim->offset);
            used_ -= victim->length;
            counters_.evicted_bytes += victim->length;
            victim->orphan = true;
            evicted.push_back(std::move(it->second));
            extents.erase(it);
        }
        return used_ + length <= settings_.cache_bytes;
    }
    void want_now(extent& e) {  // under the lock
        if (e.state != extent::queued || e.wanted_now) return;
        e.wanted_now = true;
        wanted_now_.insert(queue_key(e));
    }

    // The next extent to read: one wanted now where jumps are cheap (or due a probe), else the
    // next at or after where the last read ended (around again at the end: C-SCAN).
    std::map<key, std::shared_ptr<extent>>::iterator next_extent() {
        if (!wanted_now_.empty() && (jumps_cheap() || jump_probe_due())) {
            auto w = wanted_now_.lower_bound(head_);
            if (w == wanted_now_.end()) w = wanted_now_.begin();
            return queue_.find(*w);
        }
        auto it = queue_.lower_bound(head_);
        return it == queue_.end() ? queue_.begin() : it;
    }
    // The engine's reads, timed (the recent ones count most): seconds a byte of the reads that
    // went on from where the last ended; for jumps, the seconds beyond such a read of as many bytes.
    struct read_times {
        double per_byte = 0, extra = 0;
        unsigned reads = 0;
        static double mix(double old, double now, unsigned n) { return n == 0 ? now : 0.75 * old + 0.25 * now; }
    };
    void note_read(bool in_order, double seconds, std::uint64_t bytes) {
        if (in_order || in_order_.reads == 0) {
            in_order_.per_byte = read_times::mix(in_order_.per_byte, seconds / double(std::max<std::uint64_t>(bytes, 1)), in_order_.reads);
            ++in_order_.reads;
            if (in_order) return;
        }
        jumps_.extra = read_times::mix(jumps_.extra, seconds - in_order_.per_byte * double(bytes), jumps_.reads);
        ++jumps_.reads;
    }
    bool jumps_cheap() const { return jumps_.reads >= 2 && jumps_.extra <= settings_.cheap_jump_seconds; }
    bool jump_probe_due() const { return in_order_.reads >= 2 && reads_since_jump_ >= (jumps_.reads < 2 ? 4u : 32u); }

    void note_used() {
        counters_.cached_bytes = used_;
        counters_.peak_cached_bytes = std::max(counters_.peak_cached_bytes, used_);
        if (settings_.keep_bytes) {
            counters_.held_bytes = used_;
            counters_.peak_held_bytes = counters_.peak_cached_bytes;
        }
    }

    void start_threads() {  // under the lock; the threads start with the first read or want
        if (!threads_.empty()) return;
        for (unsigned t = 0; t < settings_.threads; ++t) threads_.emplace_back([this] { run(); });
    }

    void run() {
        std::unique_ptr<unsigned char[]> scratch;  // keep_bytes false: what a read lands in, then drops
        std::unique_lock<std::mutex> lock(mutex_);
        for (;;) {
            queued_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (stopping_) return;
            auto it = next_extent();
            std::shared_ptr<extent> e = std::move(it->second);
            queue_.erase(it);
            wanted_now_.erase(queue_key(*e));
            e->state = extent::reading;
            const bool in_order = queue_key(*e) == head_;
            head_ = {e->source, e->offset + e->length};
            const std::shared_ptr<byte_source> inner = sources_.at(e->source).inner;
            lock.unlock();
            std::unique_ptr<unsigned char[]> bytes;
            std::string failure;
            const auto started = std::chrono::steady_clock::now();
            try {
                if (settings_.keep_bytes) {
                    bytes.reset(new unsigned char[static_cast<std::size_t>(e->length)]);
                    inner->read_at(e->offset, static_cast<std::size_t>(e->length), bytes.get());
                } else {
                    if (!scratch) scratch.reset(new unsigned char[static_cast<std::size_t>(settings_.block_bytes)]);
                    for (std::uint64_t o = 0; o < e->length; o += settings_.block_bytes)
                        inner->read_at(e->offset + o, static_cast<std::size_t>(std::min(settings_.block_bytes, e->length - o)),
                                       scratch.get());
                }
            } catch (const std::exception& ex) {
                failure = ex.what();
            }
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
            lock.lock();
            if (failure.empty()) {
                note_read(in_order, seconds, e->length);
                reads_since_jump_ = in_order ? reads_since_jump_ + 1 : 0;
                if (!in_order) ++counters_.jumps;
            }
            if (e->orphan) {
                used_ -= e->length;  // forgotten while being read: kept only by its readers
                e->bytes = std::move(bytes);
                e->failure = failure;
                e->state = failure.empty() ? extent::ready : extent::failed;
            } else if (failure.empty()) {
                e->bytes = std::move(bytes);
                e->state = extent::ready;
                lru_.push_front(e.get());
                e->lru = lru_.begin();
                ++counters_.extent_reads;
                counters_.extent_bytes += e->length;
            } else {
                // The waiting readers get the error; the extent goes, so a later read tries again.
                e->failure = failure;
                e->state = extent::failed;
                used_ -= e->length;
                sources_.at(e->source).extents.erase(e->offset);
            }
            note_used();
            arrived_cv_.notify_all();
        }
    }

    settings settings_;
    mutable std::mutex mutex_;
    std::condition_variable queued_cv_, arrived_cv_;
    std::map<std::uint32_t, source> sources_;
    std::map<key, std::shared_ptr<extent>> queue_;
    std::set<key> wanted_now_;  // of queue_, those a read waits for or a prefetch asked for
    read_times in_order_, jumps_;
    unsigned reads_since_jump_ = 0;
    std::list<extent*> lru_;  // ready extents, most recently used first
    key head_{0, 0};
    std::uint64_t used_ = 0;
    std::uint32_t next_id_ = 0;
    bool stopping_ = false;
    counters counters_;
    std::vector<std::thread> threads_;
};

// A shard read through the engine: what the engine holds or awaits comes from its cache,
// the rest from `inner` (a pread file, a remote object).
class engine_source final : public byte_source {
public:
    engine_source(std::shared_ptr<io_engine> engine, std::shared_ptr<byte_source> inner)
        : engine_(std::move(engine)), inner_(std::move(inner)), id_(engine_->add(inner_)) {
        // The page cache keeps the extents (a local file): no kernel read-ahead on this file, so
        // that a record's read of an arrived extent does not set off the kernel's own reads
        // (128 KiB at a time, wherever the record is: seeks between the engine's) and the
        // engine's reads bring in what they ask for, no more.
        if (!engine_->config().keep_bytes) inner_->advise(access_pattern::random);
    }
    ~engine_source() override { engine_->forget(id_); }
    engine_source(const engine_source&) = delete;
    engine_source& operator=(const engine_source&) = delete;

    std::uint64_t size() const override { return inner_->size(); }
    void read_at(std::uint64_t offset, std::size_t length, void* dst) const override {
        if (offset > size() || length > size() - offset)
            throw error(describe() + ": read of " + std::to_string(length) + " bytes at " + std::to_string(offset) +
                        " runs past the end (" + std::to_string(size()) + " bytes)");
        engine_->read(id_, offset, length, dst);
    }
    void prefetch(const byte_range* ranges, std::size_t count) const override { engine_->want(id_, ranges, count); }
    // Queues the whole shard (io_mode::stream), after its header and index were read directly.
    void stream() const { engine_->want_all(id_); }
    // The engine decides what is read when: no kernel hints.
    void advise(access_pattern) const override {}
    std::string describe() const override { return inner_->describe(); }
    const std::shared_ptr<byte_source>& inner() const { return inner_; }

private:
    std::shared_ptr<io_engine> engine_;
    std::shared_ptr<byte_source> inner_;
    std::uint32_t id_;
};

}  // namespace shardpack::detail
