// dataset::open: the manifest and its shard list or binary shard table, every check open() makes,
// the retry when a rebuild replaced manifest.json meanwhile, the bound on open shards; and
// dataset::shard and dataset::rank_share.
// Part of reader.hpp, which includes it after the declarations it uses: include
// <shardpack/reader.hpp>, not this file.
#pragma once
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dataset_state.hpp"
#include "error.hpp"
#include "format.hpp"
#include "json.hpp"
#include "shard_file.hpp"
#include "shard_table.hpp"
#include "storage.hpp"

namespace shardpack {

namespace detail {
// What tells one manifest.json from the next: a rebuild renames a new file over it.
struct file_identity {
    bool exists = false;
    std::uint64_t device = 0, inode = 0, size = 0;
    std::int64_t mtime_ns = 0;
    bool operator==(const file_identity& o) const {
        return exists == o.exists && device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
    }
};
inline file_identity identify_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino), std::uint64_t(st.st_size),
            std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

// The manifest's content_hash against the hashes in its shards' names (spec 13.2, 14.A.7): 8
// bytes hashed a shard, so that a content_hash changed in transit is an error naming the
// manifest, not a wrong identity. Not checked without one, or when a name is not
// shard-NNNNN-<hash>.spk with its own number (the reader does not require that form).
inline void check_content_hash(const dataset_state& st, const json& manifest) {
    const json* given = manifest.find("content_hash");
    if (!given || !given->is_string()) return;
    std::vector<unsigned char> hashes(8 * st.shard_count());
    for (std::size_t k = 0; k < st.shard_count(); ++k) {
        std::uint64_t h = st.names_from_hashes ? st.shard_hash[k] : 0;
        if (!st.names_from_hashes) {
            const std::string name = st.name(k);
            if (name.size() < 20 || !parse_hex16(name.substr(name.size() - 20, 16), h) || name != shard_file_name(k, h)) return;
        }
        store_u64(hashes.data() + 8 * k, h);
    }
    const std::string computed = hex16(XXH3_64bits(hashes.data(), hashes.size()));
    if (given->as_string() != computed)
        throw error(std::string(manifest_file_name) + ": content_hash \"" + given->as_string() +
                    "\" is not the content hash of the shards it names (" + computed + "): the manifest is damaged");
}
}  // namespace detail

// A rebuild publishing while open() reads can remove a shard the manifest it read names (the
// shards of the manifest before the previous one). The failure then concerns a dataset that is
// no longer current: when manifest.json has been replaced since the attempt began, it opens the
// current one (up to 8 attempts in all).
namespace detail {
// The storage of an s3:// URL, when a remote library registered one (src/remote/s3_storage.cpp,
// shardpack::remote::enable_s3_urls()): this header itself reads only local folders.
using url_storage_opener = std::shared_ptr<const storage> (*)(const std::string& url);
inline url_storage_opener& s3_storage_opener() {
    static url_storage_opener opener = nullptr;
    return opener;
}
}  // namespace detail

inline open_options dataset::with_storage(const std::string& folder, const open_options& options) {
    open_options resolved = options;
    if (!resolved.storage && folder.rfind("s3://", 0) == 0) {
        if (!detail::s3_storage_opener())
            throw error(folder + ": s3:// URLs are read by shardpack's remote library (src/remote/, libcurl): link it and "
                                 "call shardpack::remote::enable_s3_urls(), or pass open_options::storage");
        resolved.storage = detail::s3_storage_opener()(folder);
    }
    if (!resolved.storage)  // automatic starts mapped; plan_io reopens the folder with pread when cold
        resolved.storage = std::make_shared<detail::local_storage>(
            folder, options.io == io_mode::automatic || options.io == io_mode::mmap ? io_mode::mmap : io_mode::pread);
    return resolved;
}

inline dataset dataset::open_from_manifest(const std::string& folder, detail::json manifest, const open_options& options) {
    const open_options resolved = with_storage(folder, options);
    return open_parsed(folder, resolved, resolved.storage->version_of(manifest_file_name), std::move(manifest));
}

inline dataset dataset::open(const std::string& folder, const open_options& options) {
    const open_options resolved = with_storage(folder, options);
    const storage& store = *resolved.storage;
    // A reader slower than the rebuilds (a slow file system, many shards) can see the manifest
    // replaced more than once while it opens; it tries again while each failure coincides with
    // a new manifest, a bounded number of times.
    constexpr int max_attempts = 8;
    std::string before = store.version_of(manifest_file_name);
    for (int attempt = 1;; ++attempt) {
        try {
            return open_once(folder, resolved, before);
        } catch (const error&) {
            const std::string after = store.version_of(manifest_file_name);
            if (attempt == max_attempts || after.empty() || after == before) throw;
            before = after;
        }
    }
}

inline dataset dataset::open_once(const std::string& folder, const open_options& options,
                                  const std::string& manifest_version) {
    using namespace detail;
    json manifest;
    {
        // The storage's errors name the file.
        const std::string manifest_text = options.storage->read_small_file(manifest_file_name, manifest_max_bytes);
        try {
            manifest = json::parse(manifest_text, manifest_max_values);
        } catch (const error& e) {
            throw error(folder + "/" + manifest_file_name + ": " + e.what());
        }
    }
    return open_parsed(folder, options, manifest_version, std::move(manifest));
}

namespace detail {
// The manifest's "format" and "format_version": this reader reads its own major version.
inline void check_manifest_format(const json& m) {
    if (m.string_at("format") != "shardpack") throw error("not a shardpack manifest");
    const std::string& version = m.string_at("format_version");
    if (version.rfind(std::to_string(version_major) + ".", 0) != 0) {
        const std::string shown = json::quoted(version);  // escaped, without its quotes
        throw error("format version " + shown.substr(1, shown.size() - 2) +
                    " is not supported by this reader (it reads major version " + std::to_string(version_major) + ")");
    }
}

// Room for n shards in the vectors both shard listings below fill.
inline void reserve_shards(dataset_state& st, std::size_t n) {
    st.shard_hash.reserve(n);
    st.shard_bytes.reserve(n);
    st.index_hash.reserve(n);
    st.index_hash_listed.reserve(n);
    st.first_record.reserve(n + 1);
}

// Format 1.2: the shards are listed in a binary table (spec 13.8), checked whole against the
// manifest's size and XXH3-64 before any entry is used. Returns the records in all shards.
inline std::uint64_t list_shards_from_table(const json& table, const storage& store, dataset_state& st) {
    std::string file, hash_text;
    std::uint64_t bytes = 0;
    try {
        file = table.string_at("file");
        bytes = table.u64_at("bytes");
        hash_text = table.string_at("xxh3");
    } catch (const error& e) {
        const std::string what = e.what();
        throw error("\"shard_table\": " + (what.rfind("JSON: ", 0) == 0 ? what.substr(6) : what));
    }
    if (!plain_file_name(file)) throw error("shard table name " + json::quoted(file) + " is not a plain file name");
    std::uint64_t hash = 0;
    if (!parse_hex16(hash_text, hash)) throw error("shard_table: \"xxh3\" is not 16 lowercase hex digits");
    if (bytes > shard_table_max_bytes)
        throw error(file + ": the manifest says " + std::to_string(bytes) + " bytes, more than a shard table may have (" +
                    std::to_string(shard_table_max_bytes) + ")");
    std::string bytes_read;
    try {
        bytes_read = store.read_small_file(file, shard_table_max_bytes);
    } catch (const error& e) {
        throw error(std::string(e.what()) + " (the manifest's shard table)");
    }
    const auto* p = reinterpret_cast<const unsigned char*>(bytes_read.data());
    if (bytes_read.size() != bytes)
        throw error(file + ": the shard table is " + std::to_string(bytes_read.size()) + " bytes, the manifest says " +
                    std::to_string(bytes) + " (truncated, or not the table this manifest names)");
    const std::uint64_t h = XXH3_64bits(p, bytes_read.size());
    if (h != hash)
        throw error(file + ": the shard table's XXH3-64 is " + hex16(h) + ", the manifest says " + hex16(hash) +
                    ": it is damaged");
    std::vector<shard_table_entry> entries;
    try {
        entries = decode_shard_table(p, bytes_read.size());
    } catch (const error& e) {
        throw error(file + ": " + e.what());
    }
    bytes_read = std::string();
    st.names_from_hashes = true;
    reserve_shards(st, entries.size());
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < entries.size(); ++k) {
        try {
            check_shard_entry(entries[k].records, entries[k].bytes, total);
        } catch (const error& e) {
            const std::string name = shard_file_name(k, entries[k].hash);
            throw error(file + ": " + shard_entry_error(k, &name, e).what());
        }
        st.shard_hash.push_back(entries[k].hash);
        st.shard_bytes.push_back(entries[k].bytes);
        st.index_hash.push_back(entries[k].index_hash);
        st.index_hash_listed.push_back(entries[k].has_index_hash);
        st.first_record.push_back(total);
        total += entries[k].records;
    }
    return total;
}

// The manifest's "shards" array (formats before 1.2, and small datasets). Returns the records in
// all shards.
inline std::uint64_t list_shards_from_manifest(const json::array_t& shards, dataset_state& st) {
    if (shards.empty()) throw error("\"shards\": lists no shards");
    reserve_shards(st, shards.size());
    st.name_end.reserve(shards.size());
    st.shard_hash_problem.reserve(shards.size());
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < shards.size(); ++k) {
        const json& e = shards[k];
        const std::string* name = nullptr;  // in errors once known
        std::uint64_t records = 0, bytes = 0, index_hash = 0;
        bool index_hash_listed = false;
        try {
            name = &e.string_at("file");
            if (!plain_file_name(*name)) throw error("not a plain file name (empty, holding '/' or NUL, or starting with '.')");
            records = e.u64_at("records");
            const std::uint64_t first = e.u64_at("first_record");
            bytes = e.u64_at("bytes");
            check_shard_entry(records, bytes, total);
            if (first != total)
                throw error("the manifest lists it as starting at record " + std::to_string(first) + ", after " +
                            std::to_string(total) + " records in the shards before it");
            // 1.6: absent from an older writer's manifest (then not checked); a value that
            // is there but malformed is damage.
            if (const json* ix = e.find("index_xxh3")) {
                if (!ix->is_string() || !parse_hex16(ix->as_string(), index_hash))
                    throw error("\"index_xxh3\": expected 16 lowercase hex digits");
                index_hash_listed = true;
            }
        } catch (const error& x) {
            throw shard_entry_error(k, name, x);
        }
        st.names += *name;
        st.name_end.push_back(st.names.size());
        st.shard_bytes.push_back(bytes);
        st.index_hash.push_back(index_hash);
        st.index_hash_listed.push_back(index_hash_listed);
        st.first_record.push_back(total);
        // Not needed to read (verify checks it): kept compactly, with what is wrong with it.
        const json* x = e.is_object() ? e.find("xxh3") : nullptr;
        std::uint64_t hash = 0;
        st.shard_hash_problem.push_back(!x ? 1 : !x->is_string() ? 2 : parse_hex16(x->as_string(), hash) ? 0 : 3);
        st.shard_hash.push_back(hash);
        total += records;
    }
    st.names.shrink_to_fit();
    return total;
}
}  // namespace detail

inline dataset dataset::open_parsed(const std::string& folder, const open_options& options, const std::string& manifest_version,
                                    detail::json manifest) {
    using namespace detail;
    auto st = std::make_shared<dataset_state>();
    st->path = folder;
    st->store = options.storage;
    st->verify = options.verify_checksums;
    st->manifest_version = manifest_version;
    st->manifest = std::move(manifest);
    const json& m = st->manifest;
    try {
        check_manifest_format(m);
        const json* table = m.find("shard_table");
        const json* list = m.find("shards");
        if (table && list)
            throw error("has both \"shards\" and \"shard_table\"; a manifest lists its shards in one of them");
        // The storage given: plan_io below may reopen a local folder with another mode.
        const std::uint64_t total = table ? list_shards_from_table(*table, *st->store, *st)
                                          : list_shards_from_manifest(m.array_at("shards"), *st);
        st->first_record.push_back(total);
        if (const std::uint64_t records = m.u64_at("records"); total != records)
            throw error("the shards hold " + std::to_string(total) + " records, the manifest says " + std::to_string(records));
        check_content_hash(*st, m);
        // The dataset keeps the manifest without its shard list (~0.8 KB a shard as a JSON
        // tree): the vectors above hold what readers need.
        if (list) {
            json kept = json::object();
            for (const auto& member : m.as_object())
                if (member.first != "shards") kept.set(member.first, member.second);
            st->manifest = std::move(kept);
        }
        plan_io(folder, options, *st);
        open_shards(options, *st);
    } catch (const error& e) {
        throw error(folder + ": " + e.what());
    }
    dataset ds;
    ds.s_ = std::move(st);
    return ds;
}

// Shard 0 gives the schema; with no more shards than may be open at once, every shard is opened
// and checked now (a damaged dataset is refused at open); else, or when the storage's opens cost
// requests (object storage) and max_open_shards is automatic, each is opened and checked when
// first read.
inline void dataset::open_shards(const open_options& options, detail::dataset_state& st) {
    using namespace detail;
    const std::size_t count = st.shard_count();
    open_options planned = options;
    planned.storage = st.store;
    const std::size_t limit = resolve_max_open_shards(planned);
    const storage& store = *st.store;  // plan_io may have reopened the folder with pread
    st.shards.init(count, limit, count <= limit && !(options.max_open_shards == 0 && store.opens_shards_lazily()));
    auto first = st.open_shard(0);
    st.schema_bytes = first->schema_bytes();
    if (st.shards.eager()) {
        st.shards.set_eager(0, first);
        constexpr std::size_t announce = 64;  // shards whose opens the storage may start ahead
        std::vector<std::string> next;
        for (std::size_t k = 1; k < count; ++k) {
            if (k % announce == 1) {
                next.clear();
                for (std::size_t j = k; j < std::min(count, k + announce); ++j) next.push_back(st.name(j));
                store.will_open(next.data(), next.size());
            }
            st.shards.set_eager(k, st.open_shard(k));
        }
    } else {
        st.shards.get(0, [&first](std::size_t) { return first; });
    }
    st.schema = first->schema();
    st.info = to_info(st.schema);
    for (const auto& c : first->classes()) st.classes.push_back({c.name, c.has_color, c.r, c.g, c.b});
}

namespace detail {
// The automatic cache budget: half the memory available at open (the other half is for the
// page cache, the model and the batches), at least 64 MiB; 1 GiB where it cannot be read.
inline std::uint64_t automatic_cache_bytes() {
    const std::uint64_t available = available_memory();
    if (available == 0) return std::uint64_t(1) << 30;
    return std::max<std::uint64_t>(available / 2, std::uint64_t(64) << 20);
}
inline std::string megabytes(std::uint64_t bytes) {
    return bytes < 1000000 ? std::to_string((bytes + 500) / 1000) + " kB" : std::to_string((bytes + 500000) / 1000000) + " MB";
}
}  // namespace detail

namespace detail {
// Whether the page cache holds the dataset: at least 90% of a sample of up to 64 shards (mincore).
inline bool resident(const local_storage& local, const dataset_state& st) {
    constexpr std::size_t sample = 64;
    constexpr double share = 0.9;
    const std::size_t count = st.shard_count();
    std::vector<std::string> names;
    for (std::size_t j = 0; j < std::min(sample, count); ++j) names.push_back(st.name(j * count / std::min(sample, count)));
    return local.resident_share(names) >= share;
}
}  // namespace detail

inline bool dataset::begin_epoch() const {
    const auto* local = dynamic_cast<const detail::local_storage*>(s_->store.get());
    if (!local || !s_->engine) return false;
    if (s_->io == io_mode::blocks) {  // the page cache may have dropped the last epoch's blocks: read them again when wanted
        s_->engine->forget_arrived(false);
        return false;
    }
    const detail::decoded_copy* copy = s_->decoded.load(std::memory_order_acquire);
    if ((copy && copy->complete() && s_->schema.fields.empty()) || detail::resident(*local, *s_)) return false;
    s_->engine->forget_arrived(true);
    return true;
}

// io_mode::automatic's choice (reader.hpp, I/O), and the engine for stream and blocks. Asked at
// open, of what open can see: whether the shards are in the page cache (a sample of up to 64
// shards, mincore), and the dataset's size against cache_bytes.
inline void dataset::plan_io(const std::string& folder, const open_options& options, detail::dataset_state& st) {
    using namespace detail;
    const auto* local = dynamic_cast<const local_storage*>(st.store.get());
    std::uint64_t total = 0;
    for (const std::uint64_t b : st.shard_bytes) total += b;
    const std::uint64_t budget = options.cache_bytes ? options.cache_bytes : automatic_cache_bytes();
    io_mode mode = options.io;
    if (mode == io_mode::automatic) {
        if (local) {
            // Resident: the page cache serves mapped reads at memory speed, with no copy.
            mode = resident(*local, st) ? io_mode::mmap : total <= budget ? io_mode::stream : io_mode::blocks;
        } else {
            mode = total <= budget ? io_mode::stream : io_mode::blocks;
        }
        if (mode == io_mode::blocks) {
            const std::string message =
                folder + ": " + megabytes(total) + " is more than the reader's cache (" + megabytes(budget) +
                (options.cache_bytes ? ", cache_bytes" : ", half the memory available") + ") and not in the page cache: reading it in blocks of 4 MiB, a block per seek, "
                "in the blocks order (a global shuffle would seek for every record). To choose: order=\"global\", "
                "io=\"stream\"|\"blocks\"|\"mmap\"|\"pread\", cache_bytes=N (Python); open_options::io, cache_bytes (C++)";
            if (options.log) {
                options.log(message);
            } else {
                static std::atomic<bool> said{false};
                if (!said.exchange(true)) std::fprintf(stderr, "shardpack: %s\n", message.c_str());
            }
        }
    }
    st.io = mode;
    if (local && (mode == io_mode::mmap || mode == io_mode::pread) && local->mode() != mode)
        st.store = std::make_shared<local_storage>(local->folder(), mode);
    if (mode != io_mode::stream && mode != io_mode::blocks) {
        if (!local) st.io = io_mode::pread;  // remote storage read as the storage reads
        return;
    }
    if (local && local->mode() != io_mode::pread) st.store = std::make_shared<local_storage>(local->folder(), io_mode::pread);
    io_engine::settings s;
    s.cache_bytes = budget;
    s.threads = options.io_threads ? options.io_threads : local ? 1u : 4u;
    s.keep_bytes = !local;  // a local folder's page cache keeps what the engine read (io_engine.hpp)
    st.engine = std::make_shared<io_engine>(s);
}

inline dataset::blocks_layout_t dataset::blocks_layout() const {
    constexpr std::uint64_t block_bytes = std::uint64_t(4) << 20, min_block_bytes = std::uint64_t(256) << 10;
    constexpr std::size_t window = 16;
    std::uint64_t total = 0;
    for (const std::uint64_t b : s_->shard_bytes) total += b;
    std::uint64_t bytes = block_bytes;
    std::size_t w = window;
    if (const std::uint64_t cache = cache_bytes()) {
        // Three windows in the cache: the one being read, the one read ahead, and room for the
        // LRU's stragglers (records straddle blocks).
        w = static_cast<std::size_t>(std::min<std::uint64_t>(window, cache / (3 * block_bytes)));
        if (w < 2) {
            w = 2;
            bytes = std::max(min_block_bytes, cache / (3 * 2));
        }
    }
    const std::size_t n = size();
    const std::size_t block =
        n == 0 || total == 0 ? 1 : std::max<std::size_t>(1, static_cast<std::size_t>(std::nearbyint(double(bytes) * double(n) / double(total))));  // half to even, as Python's round
    return {block, w};
}

inline shard_ref dataset::shard(std::size_t k) const {
    checked_shard(k);
    if (s_->shards.eager()) return shard_ref(s_->shards.eager_ptr(k));
    return shard_ref(s_->pin(k).hold);
}

namespace detail {
// The automatic bound on open shards: mappings count against vm.max_map_count (65,530 by
// default, shared with the rest of the process), descriptors against the open-file limit
// (often 1,024), so pread keeps at most half of the latter.
inline std::size_t automatic_max_open_shards(io_mode mode) {
    constexpr std::size_t mapped_limit = 4096;
    if (mode != io_mode::pread) return mapped_limit;
    struct rlimit rl {};
    std::size_t files = 1024;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) files = static_cast<std::size_t>(rl.rlim_cur);
    return std::max<std::size_t>(16, std::min(mapped_limit, files / 2));
}
}  // namespace detail

inline std::size_t dataset::resolve_max_open_shards(const open_options& options) {
    if (options.max_open_shards) return options.max_open_shards;
    const auto* local = dynamic_cast<const detail::local_storage*>(options.storage.get());
    return detail::automatic_max_open_shards(local ? local->mode() : io_mode::mmap);
}
inline rank_share dataset::rank_share(std::size_t rank, std::size_t world, rank_share_policy policy) const {
    if (world == 0 || rank >= world)
        throw error("rank_share: rank " + std::to_string(rank) + " is not below world size " + std::to_string(world));
    const std::size_t n = size();
    if (n == 0) return {0, 0, 1};
    switch (policy) {
        case rank_share_policy::pad: {
            const std::size_t per = (n + world - 1) / world;
            return {rank * per, per, n};
        }
        case rank_share_policy::drop: {
            const std::size_t per = n / world;
            return {rank * per, per, n};
        }
        case rank_share_policy::uneven: break;
    }
    const std::size_t base = n / world, extra = n % world;
    return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0), n};
}

}  // namespace shardpack
