#include "remote/s3_storage.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>

#include "dataset/dataset_names.hpp"
#include "io/cache_folder.hpp"
#include "shardpack/detail/endian.hpp"
#include "shardpack/detail/format.hpp"
#include "shardpack/detail/hex.hpp"
#include "shardpack/detail/json.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "shardpack/reader.hpp"

namespace shardpack::remote {

namespace {

std::string env(const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(v) : std::string();
}

std::uint64_t env_bytes(const char* name, std::uint64_t fallback) {
    const std::string v = env(name);
    if (v.empty()) return fallback;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    std::uint64_t scale = 1;
    if (end && (*end == 'K' || *end == 'k')) scale = 1ull << 10, ++end;
    else if (end && (*end == 'M' || *end == 'm')) scale = 1ull << 20, ++end;
    else if (end && (*end == 'G' || *end == 'g')) scale = 1ull << 30, ++end;
    if (!end || *end || v[0] == '-' || end == v.c_str())
        throw error(std::string(name) + "=" + v + ": expected a byte count (a whole number, optionally with K, M or G)");
    return std::uint64_t(n) * scale;
}

// The XXH3-64 a shard's name carries (shard-NNNNN-<16 hex>.spk), or "".
std::string hash_in_name(const std::string& name) {
    const auto dash = name.rfind('-');
    const auto dot = name.rfind('.');
    if (dash == std::string::npos || dot == std::string::npos || dot < dash || dot - dash - 1 != 16) return {};
    return name.substr(dash + 1, 16);
}

}  // namespace

remote_options remote_options::from_environment() {
    remote_options o;
    o.cache_dir = env("SHARDPACK_CACHE_DIR");
    o.shard_cache_bytes = env_bytes("SHARDPACK_SHARD_CACHE_BYTES", o.shard_cache_bytes);
    o.merge_gap = env_bytes("SHARDPACK_S3_MERGE_GAP", o.merge_gap);
    o.max_request = std::max<std::uint64_t>(env_bytes("SHARDPACK_S3_MAX_REQUEST", o.max_request), 4096);
    o.buffer_bytes = std::max<std::uint64_t>(env_bytes("SHARDPACK_S3_BUFFER_BYTES", o.buffer_bytes), 1 << 20);
    return o;
}

class s3_source;

// What a GET fetched for: a shard's head or tail at open (released once the open parsed it),
// a small shard whole at open (its records are read from it too), or records.
enum class chunk_kind { metadata, whole_shard, records };

struct chunk {
    std::uint64_t offset = 0, length = 0;
    s3_pending pending;  // reset when evicted
    chunk_kind kind = chunk_kind::records;
};

struct s3_storage::impl {
    std::shared_ptr<s3_client> client;
    s3_location where;
    remote_options opts;
    std::shared_ptr<cache_folder> meta, shards;  // null: no disk cache

    mutable std::mutex m;
    std::map<std::string, std::uint64_t> sizes;  // from the last manifest read
    // Shards announced by will_open, their GETs in flight, not opened yet (at most
    // max_preopened: the oldest announcements are dropped first).
    std::map<std::string, std::shared_ptr<s3_source>> preopened;
    std::deque<std::string> preopened_order;
    static constexpr std::size_t max_preopened = 4096;
    std::deque<std::shared_ptr<chunk>> fifo;  // every chunk holding memory, oldest first
    std::uint64_t held = 0;
    remote_stats stats;

    // Adds c to the memory budget, evicting the oldest chunks beyond it. Caller holds m.
    void account(const std::shared_ptr<chunk>& c) {
        fifo.push_back(c);
        held += c->length;
        while (held > opts.buffer_bytes && fifo.size() > 1) {
            auto& old = fifo.front();
            held -= old->length;
            old->pending = s3_pending();
            fifo.pop_front();
        }
    }
};

class s3_source final : public byte_source {
public:
    s3_source(std::shared_ptr<s3_storage::impl> st, std::string name, std::uint64_t size)
        : st_(std::move(st)), name_(std::move(name)), key_(st_->where.key(name_)), size_(size) {}

    std::uint64_t size() const override { return size_; }
    std::string describe() const override { return st_->where.url(name_); }

    void read_at(std::uint64_t offset, std::size_t length, void* dst) const override {
        if (offset > size_ || length > size_ - offset)
            throw error(describe() + ": read of " + std::to_string(length) + " bytes at " + std::to_string(offset) +
                        " runs past the end (" + std::to_string(size_) + " bytes)");
        if (length == 0) return;
        if (local_copy(offset, length, dst)) return;
        // The chunks that hold the range, possibly several side by side.
        std::vector<std::pair<s3_pending, std::uint64_t>> parts;  // pending, chunk offset
        std::vector<std::shared_ptr<chunk>> used;
        {
            std::lock_guard<std::mutex> lock(st_->m);
            st_->stats.bytes_delivered += length;
            std::vector<std::shared_ptr<chunk>> over;
            for (std::size_t i = 0; i < chunks_.size();) {
                const auto& c = chunks_[i];
                if (!c->pending.valid()) {  // evicted
                    chunks_.erase(chunks_.begin() + std::ptrdiff_t(i));
                    continue;
                }
                if (c->offset < offset + length && c->offset + c->length > offset) over.push_back(c);
                ++i;
            }
            std::sort(over.begin(), over.end(), [](const auto& a, const auto& b) { return a->offset < b->offset; });
            std::uint64_t at = offset;
            for (const auto& c : over) {
                if (at >= offset + length) break;
                if (c->offset > at || c->offset + c->length <= at) continue;
                parts.push_back({c->pending, c->offset});
                used.push_back(c);
                at = c->offset + c->length;
            }
            if (at < offset + length) parts.clear();  // a hole: fetched below, whole
        }
        const bool meta = is_metadata(offset, length);
        if (!parts.empty()) {
            std::uint64_t at = offset;
            auto* out = static_cast<unsigned char*>(dst);
            for (auto& [p, base] : parts) {
                const auto& body = p.wait();
                const std::uint64_t n = std::min<std::uint64_t>(base + body.size(), offset + length) - at;
                std::memcpy(out + (at - offset), body.data() + (at - base), static_cast<std::size_t>(n));
                at += n;
            }
            if (meta) {
                learn(offset, out, length);
                store_metadata(offset, length, out);
                release_metadata_chunks(used);
            }
            return;
        }
        if (meta && load_metadata(offset, length, static_cast<unsigned char*>(dst))) {
            learn(offset, static_cast<unsigned char*>(dst), length);
            return;
        }
        const auto body = st_->client->get_range(st_->where.bucket, key_, offset, length, size_);
        {
            std::lock_guard<std::mutex> lock(st_->m);
            if (meta) ++st_->stats.metadata_gets, st_->stats.metadata_bytes += length;
            else ++st_->stats.range_gets, st_->stats.range_bytes += length;
        }
        std::memcpy(dst, body.data(), length);
        if (meta) {
            learn(offset, body.data(), length);
            store_metadata(offset, length, body.data());
        }
    }

    void prefetch(const byte_range* ranges, std::size_t count) const override {
        if (count == 0) return;
        if (whole_shard_wanted()) {
            start_download();
            return;
        }
        std::vector<byte_range> merged;
        {
            // Ranges a fetched (or fetching) range already holds are not asked for again: with
            // the blocks order the next batches of a window read what the first one brought.
            // (The reader merged its ranges already: only the parts no chunk holds remain.)
            std::lock_guard<std::mutex> lock(st_->m);
            std::vector<byte_range> held;
            for (const auto& c : chunks_)
                if (c->pending.valid()) held.push_back({c->offset, c->length});
            std::sort(held.begin(), held.end(), [](const byte_range& a, const byte_range& b) { return a.offset < b.offset; });
            for (std::size_t i = 0; i < count; ++i) {
                std::uint64_t at = ranges[i].offset;
                const std::uint64_t end = ranges[i].offset + ranges[i].length;
                for (const byte_range& h : held) {
                    if (h.offset + h.length <= at) continue;
                    if (h.offset >= end) break;
                    if (h.offset > at) merged.push_back({at, h.offset - at});
                    at = std::max(at, h.offset + h.length);
                    if (at >= end) break;
                }
                if (at < end) merged.push_back({at, end - at});
            }
        }
        std::sort(merged.begin(), merged.end(), [](const byte_range& a, const byte_range& b) { return a.offset < b.offset; });
        // Merge ranges closer than merge_gap, up to max_request bytes per GET.
        std::vector<byte_range> gets;
        for (const byte_range& r : merged) {
            if (r.length == 0 || r.offset >= size_) continue;
            const std::uint64_t end = std::min(r.offset + r.length, size_);
            if (!gets.empty()) {
                byte_range& last = gets.back();
                const std::uint64_t last_end = last.offset + last.length;
                if (r.offset <= last_end + st_->opts.merge_gap && std::max(end, last_end) - last.offset <= st_->opts.max_request) {
                    last.length = std::max(end, last_end) - last.offset;
                    continue;
                }
            }
            // A range longer than max_request (a whole window of blocks in one shard) is
            // fetched as several GETs of max_request bytes, concurrently.
            for (std::uint64_t at = r.offset; at < end; at += st_->opts.max_request)
                gets.push_back({at, std::min(st_->opts.max_request, end - at)});
        }
        std::lock_guard<std::mutex> lock(st_->m);
        for (const byte_range& g : gets) {
            bool covered = false;
            for (const auto& c : chunks_)
                if (c->pending.valid() && g.offset >= c->offset && g.offset + g.length <= c->offset + c->length) covered = true;
            if (covered) continue;
            add_chunk(g.offset, g.length, chunk_kind::records);
        }
    }

    // Starts the GETs an open will read (once per source): nothing when the disk cache holds
    // the head and the tail; a shard small enough that its record area would be merged into
    // one request with them (at most 2 * speculative + merge_gap bytes) in one GET, whole, its
    // records then read from it too; else its head and its tail, at once.
    void start_open(std::uint64_t speculative) const {
        const std::uint64_t n = std::min(speculative, size_);
        if (n == 0) return;
        std::lock_guard<std::mutex> lock(st_->m);
        if (open_started_) return;
        open_started_ = true;
        bool cached[2] = {false, false};
        const std::uint64_t at[2] = {0, size_ - n};
        for (int i = 0; i < 2; ++i) {
            cached[i] = st_->meta && st_->meta->holds(metadata_name(at[i], n));
        }
        if (cached[0] && cached[1]) return;
        if (!whole_shard_wanted() && size_ <= 2 * speculative + st_->opts.merge_gap) {
            add_chunk(0, size_, chunk_kind::whole_shard);
            return;
        }
        for (int i = 0; i < 2; ++i) {
            if (!cached[i]) add_chunk(at[i], n, chunk_kind::metadata);
            if (n == size_) break;
        }
    }

private:
    std::shared_ptr<s3_storage::impl> st_;
    std::string name_, key_;
    std::uint64_t size_;
    mutable std::vector<std::shared_ptr<chunk>> chunks_;  // guarded by st_->m
    mutable std::uint64_t index_offset_ = UINT64_MAX;      // from the trailer, once seen (guarded by st_->m)
    mutable bool open_started_ = false;                    // start_open ran (guarded by st_->m)
    // Whole-shard cache (guarded by dl_m_):
    mutable std::mutex dl_m_;
    mutable std::vector<s3_pending> parts_;
    mutable bool download_failed_ = false;
    mutable bool cache_looked_ = false;             // the cache was asked for this shard
    mutable std::shared_ptr<cached_file> cached_;   // the shard's cached copy, checked
    mutable std::string cache_damage_;              // a cached copy that failed its check (removed), for messages

    // Heads and tails are read once by the shard's parse (and kept by it, and on disk): their
    // memory goes back to the budget at once.
    void release_metadata_chunks(const std::vector<std::shared_ptr<chunk>>& used) const {
        std::lock_guard<std::mutex> lock(st_->m);
        for (auto& c : used)
            if (c->kind == chunk_kind::metadata && c->pending.valid()) {
                c->pending = s3_pending();
                st_->held -= std::min(st_->held, c->length);
                c->length = 0;
            }
    }

    // Caller holds st_->m.
    void add_chunk(std::uint64_t off, std::uint64_t len, chunk_kind kind) const {
        auto c = std::make_shared<chunk>();
        c->offset = off;
        c->length = len;
        c->kind = kind;
        c->pending = st_->client->get_range_async(st_->where.bucket, key_, off, len, size_);
        remote_stats& s = st_->stats;
        if (kind == chunk_kind::metadata) ++s.metadata_gets, s.metadata_bytes += len;
        else if (kind == chunk_kind::whole_shard) ++s.shard_gets, s.shard_get_bytes += len;
        else ++s.range_gets, s.range_bytes += len;
        chunks_.push_back(c);
        st_->account(c);
    }

    bool is_metadata(std::uint64_t offset, std::uint64_t length) const {
        std::lock_guard<std::mutex> lock(st_->m);
        return offset == 0 || offset + length == size_ || (index_offset_ != UINT64_MAX && offset >= index_offset_);
    }

    // Learns where the index starts from a read that holds the trailer.
    void learn(std::uint64_t offset, const unsigned char* bytes, std::uint64_t length) const {
        if (offset + length != size_ || length < detail::trailer_size) return;
        const unsigned char* t = bytes + length - detail::trailer_size;
        if (std::memcmp(t + 32, detail::trailer_magic, 8) != 0) return;
        std::lock_guard<std::mutex> lock(st_->m);
        index_offset_ = detail::load_u64(t);
    }

    // The metadata cache's name for a range of this shard.
    std::string metadata_name(std::uint64_t offset, std::uint64_t length) const {
        return name_ + "." + std::to_string(offset) + "-" + std::to_string(length);
    }

    bool load_metadata(std::uint64_t offset, std::uint64_t length, unsigned char* dst) const {
        if (!st_->meta) return false;
        // The bytes, then their XXH3-64: a damaged file is ignored (the range is fetched).
        const auto text = st_->meta->read(metadata_name(offset, length), length + 8);
        if (!text) return false;
        const auto* p = reinterpret_cast<const unsigned char*>(text->data());
        if (detail::load_u64(p + length) != XXH3_64bits(p, length)) return false;
        std::memcpy(dst, p, length);
        std::lock_guard<std::mutex> lock(st_->m);
        ++st_->stats.metadata_cache_hits;
        return true;
    }

    void store_metadata(std::uint64_t offset, std::uint64_t length, const unsigned char* bytes) const {
        if (!st_->meta || hash_in_name(name_).empty()) return;  // only content-named shards
        unsigned char sum[8];
        detail::store_u64(sum, XXH3_64bits(bytes, length));
        st_->meta->add(metadata_name(offset, length), {{bytes, std::size_t(length)}, {sum, 8}});
    }

    // ---- whole-shard cache
    bool whole_shard_wanted() const {
        return st_->shards && st_->opts.shard_cache_bytes >= size_ && !hash_in_name(name_).empty();
    }

    // The cached copy when the cache wrote one and it is still right (checked whole against the
    // hash in its name before any of its bytes is used); else the download starts. A copy that
    // fails the check is removed and the shard fetched again, once.
    void start_download() const {
        std::lock_guard<std::mutex> lock(dl_m_);
        if (cached_ || !parts_.empty() || download_failed_) return;
        if (!cache_looked_) {
            cache_looked_ = true;
            if (auto copy = st_->shards->open_listed(name_)) {
                std::string why;
                try {
                    const std::string h = detail::hex16(copy->xxh3());
                    if (copy->size() != size_) why = std::to_string(copy->size()) + " bytes, the manifest says " + std::to_string(size_);
                    else if (h != hash_in_name(name_)) why = "its bytes hash to " + h + ", its name says " + hash_in_name(name_);
                } catch (const std::exception& e) {
                    why = e.what();
                }
                if (why.empty()) {
                    copy->touch();  // recently used
                    cached_ = std::move(copy);
                    std::lock_guard<std::mutex> l2(st_->m);
                    ++st_->stats.shard_cache_hits;
                    return;
                }
                st_->shards->remove_listed(name_);
                cache_damage_ = copy->path() + " (" + why + ")";
            }
        }
        for (std::uint64_t off = 0; off < size_; off += st_->opts.max_request)
            parts_.push_back(st_->client->get_range_async(st_->where.bucket, key_, off,
                                                          std::min(st_->opts.max_request, size_ - off), size_));
        std::lock_guard<std::mutex> l2(st_->m);
        ++st_->stats.shard_downloads;
        st_->stats.range_gets += parts_.size();
        st_->stats.range_bytes += size_;
    }

    // Waits for the download (if any), checks the whole object against its name's hash and
    // keeps it on disk. True when the bytes can be read from the local copy.
    bool local_copy(std::uint64_t offset, std::size_t length, void* dst) const {
        if (!whole_shard_wanted() || is_metadata(offset, length)) return false;
        start_download();
        std::lock_guard<std::mutex> lock(dl_m_);
        if (download_failed_) return false;
        if (!cached_) {
            std::vector<std::vector<unsigned char>> bodies;
            try {
                for (auto& p : parts_) bodies.push_back(p.wait());
            } catch (const error&) {
                parts_.clear();
                download_failed_ = true;  // reads go range by range, and report their own errors
                return false;
            }
            parts_.clear();
            XXH3_state_t h;
            XXH3_64bits_reset(&h);
            for (const auto& b : bodies) XXH3_64bits_update(&h, b.data(), b.size());
            const std::string got = detail::hex16(XXH3_64bits_digest(&h));
            if (got != hash_in_name(name_)) {
                if (!cache_damage_.empty())
                    throw error(describe() + ": the cached copy " + cache_damage_ +
                                " failed its check and was removed; fetched again, the object's bytes hash to " + got +
                                " too, not to the XXH3 in its name: it is damaged on the server");
                throw error(describe() + ": the object's bytes hash to " + got +
                            ", not to the XXH3 in its name: it is damaged on the server");
            }
            cache_folder::pieces pieces;
            for (const auto& b : bodies) pieces.push_back({b.data(), b.size()});
            if (st_->shards->add_listed(name_, pieces, st_->opts.shard_cache_bytes)) cached_ = st_->shards->open_listed(name_);
            if (!cached_) {  // the cache could not be written: this read from memory, the next ones by range
                download_failed_ = true;
                std::uint64_t at = 0;
                for (const auto& b : bodies) {
                    const std::uint64_t lo = std::max<std::uint64_t>(at, offset), hi = std::min<std::uint64_t>(at + b.size(), offset + length);
                    if (lo < hi) std::memcpy(static_cast<unsigned char*>(dst) + (lo - offset), b.data() + (lo - at), std::size_t(hi - lo));
                    at += b.size();
                }
                return true;
            }
        }
        try {
            cached_->read_at(offset, length, dst);
        } catch (const std::exception& e) {
            throw error(describe() + ": " + e.what());
        }
        std::lock_guard<std::mutex> l2(st_->m);
        st_->stats.bytes_delivered += length;
        return true;
    }
};

s3_storage::s3_storage(std::shared_ptr<s3_client> client, s3_location where, remote_options options)
    : impl_(std::make_shared<impl>()) {
    impl_->client = std::move(client);
    impl_->where = std::move(where);
    impl_->opts = options;
    std::string dir = options.cache_dir;
    if (dir.empty()) {
        if (!env("XDG_CACHE_HOME").empty()) dir = env("XDG_CACHE_HOME") + "/shardpack";
        else if (!env("HOME").empty()) dir = env("HOME") + "/.cache/shardpack";
    }
    if (!dir.empty() && dir != "off") {
        // Folders of the cache's own (io/cache_folder.hpp): a folder there that the cache did
        // not make, or a link, is an error, never written to or emptied.
        try {
            impl_->meta = cache_folder::claim(dir + "/meta");
            if (options.shard_cache_bytes > 0) impl_->shards = cache_folder::claim(dir + "/shards");
        } catch (const std::exception& e) {
            throw error(std::string("the object-storage disk cache (SHARDPACK_CACHE_DIR): ") + e.what());
        }
    }
}

s3_storage::~s3_storage() {
    std::lock_guard<std::mutex> lock(impl_->m);
    impl_->preopened.clear();  // they hold the impl
}

// What shard_file reads first from the head and from the tail of an unmapped source
// (include/shardpack/detail/shard_file.hpp: speculative_read): the disk cache and the GETs
// started ahead of an open are for those exact ranges.
constexpr std::uint64_t open_read_bytes = 64 * 1024;

bool s3_storage::opens_shards_lazily() const { return true; }

void s3_storage::will_open(const std::string* names, std::size_t count) const {
    std::vector<std::shared_ptr<s3_source>> started;
    {
        std::lock_guard<std::mutex> lock(impl_->m);
        for (std::size_t i = 0; i < count; ++i) {
            if (impl_->preopened.count(names[i])) continue;
            const auto size = impl_->sizes.find(names[i]);
            if (size == impl_->sizes.end() || size->second == 0) continue;  // open() asks the server
            auto src = std::make_shared<s3_source>(impl_, names[i], size->second);
            impl_->preopened[names[i]] = src;
            impl_->preopened_order.push_back(names[i]);
            started.push_back(std::move(src));
        }
        while (impl_->preopened_order.size() > impl::max_preopened) {
            impl_->preopened.erase(impl_->preopened_order.front());
            impl_->preopened_order.pop_front();
        }
    }
    for (const auto& src : started) src->start_open(open_read_bytes);
}

std::string s3_storage::read_small_file(const std::string& name, std::uint64_t max_bytes) const {
    bool found = false;
    std::vector<unsigned char> body;
    body = impl_->client->get_object(impl_->where.bucket, impl_->where.key(name), max_bytes, &found);
    if (!found) throw error(impl_->where.url(name) + ": no such object");
    std::string text(body.begin(), body.end());
    const bool table = name.size() > 4 && name.compare(name.size() - 4, 4, ".spt") == 0;  // format 1.2's shard table
    if (name != manifest_file_name && !table) return text;
    // The shards' sizes, so that opening one needs no HEAD request, from the manifest's
    // "shards" or from the binary shard table the reader asks for next when the manifest names
    // one. (Nothing of the shards is fetched now: each is opened when first read, see will_open.)
    try {
        std::vector<std::pair<std::string, std::uint64_t>> files;
        if (table) {
            const auto entries = detail::decode_shard_table(reinterpret_cast<const unsigned char*>(text.data()), text.size());
            for (std::size_t k = 0; k < entries.size(); ++k)
                files.emplace_back(detail::shard_file_name(k, entries[k].hash), entries[k].bytes);
        } else {
            const detail::json m = detail::json::parse(text, detail::manifest_max_values);
            if (m.find("shard_table")) return text;
            for (const auto& e : m.at("shards").as_array()) files.emplace_back(e.at("file").as_string(), e.at("bytes").as_u64());
        }
        std::lock_guard<std::mutex> lock(impl_->m);
        impl_->sizes.clear();
        impl_->preopened.clear();
        impl_->preopened_order.clear();
        for (const auto& [file, bytes] : files) impl_->sizes[file] = bytes;
    } catch (const error&) {
        return text;  // the reader reports what is wrong with it
    }
    return text;
}

std::shared_ptr<byte_source> s3_storage::open(const std::string& name) const {
    std::uint64_t size = 0;
    {
        std::lock_guard<std::mutex> lock(impl_->m);
        const auto it = impl_->preopened.find(name);
        if (it != impl_->preopened.end()) {
            auto src = it->second;
            impl_->preopened.erase(it);
            impl_->preopened_order.erase(std::find(impl_->preopened_order.begin(), impl_->preopened_order.end(), name));
            return src;
        }
        const auto s = impl_->sizes.find(name);
        if (s != impl_->sizes.end()) size = s->second;
    }
    if (size == 0) {
        bool found = false;
        const s3_object_info info = impl_->client->head_object(impl_->where.bucket, impl_->where.key(name), &found);
        if (!found) throw error(impl_->where.url(name) + ": no such object");
        size = info.size;
    }
    // The head and the tail (or the whole small shard) at once, rather than one after the other.
    auto src = std::make_shared<s3_source>(impl_, name, size);
    src->start_open(open_read_bytes);
    return src;
}

std::string s3_storage::version_of(const std::string& name) const {
    bool found = false;
    try {
        const s3_object_info info = impl_->client->head_object(impl_->where.bucket, impl_->where.key(name), &found);
        if (!found) return {};
        return info.etag + ":" + std::to_string(info.size);
    } catch (const error&) {
        return {};  // cannot tell: open() does not retry
    }
}

std::string s3_storage::describe() const { return impl_->where.url(); }

std::vector<std::string> s3_storage::list_names() const {
    const std::string prefix = impl_->where.prefix.empty() ? "" : impl_->where.prefix + "/";
    std::vector<std::string> names;
    for (const auto& o : impl_->client->list_objects(impl_->where.bucket, prefix))
        if (o.key.find('/', prefix.size()) == std::string::npos) names.push_back(o.key.substr(prefix.size()));
    return names;
}

remote_stats s3_storage::stats() const {
    std::lock_guard<std::mutex> lock(impl_->m);
    return impl_->stats;
}

s3_client& s3_storage::client() const { return *impl_->client; }
const s3_location& s3_storage::location() const { return impl_->where; }

std::shared_ptr<s3_storage> open_s3_storage(std::shared_ptr<s3_client> client, const std::string& url,
                                            const remote_options& options) {
    return std::make_shared<s3_storage>(std::move(client), parse_s3_url(url), options);
}

std::shared_ptr<s3_storage> open_s3_storage(const std::string& url, const remote_options& options) {
    const s3_location where = parse_s3_url(url);  // a bad URL is reported before the credentials
    return std::make_shared<s3_storage>(shared_client(), where, options);
}

namespace {
std::shared_ptr<const shardpack::storage> open_url(const std::string& url) { return open_s3_storage(url); }
// Linked in with this file: dataset::open then takes s3:// URLs.
const bool s3_urls_enabled = (enable_s3_urls(), true);
}  // namespace

void enable_s3_urls() { detail::s3_storage_opener() = &open_url; }

}  // namespace shardpack::remote
