// What every copy of a dataset handle shares (dataset_state): the manifest's shard table, the
// open shards, the schema; and the bounds on reading manifest.json.
// Part of reader.hpp, which includes it after the declarations it uses: include
// <shardpack/reader.hpp>, not this file.
#pragma once
#include <zstd.h>

#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "decoded_copy.hpp"
#include "foreground_rows.hpp"
#include "format.hpp"
#include "io_engine.hpp"
#include "json.hpp"
#include "regular_file.hpp"
#include "shard_cache.hpp"
#include "shard_file.hpp"
#include "shard_table.hpp"
#include "storage.hpp"

namespace shardpack {

namespace detail {

struct dctx_deleter {
    void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

struct dataset_state {
    std::string path;
    std::shared_ptr<const shardpack::storage> store;
    std::string manifest_version;  // storage::version_of(manifest.json) at open
    // The shard table: every shard's name, size and first record, from the manifest's
    // "shards" list (1.0, 1.1) or its binary shard table (1.2, detail/shard_table.hpp). About
    // 50 bytes a shard with a table (names are made from the number and hash when needed).
    bool names_from_hashes = false;           // a binary table: name(k) = shard-<k>-<hash>.spk
    std::string names;                        // a "shards" list: the names, one after the other
    std::vector<std::uint64_t> name_end;      // a "shards" list: where each name ends in `names`
    std::vector<std::uint64_t> shard_hash;    // per shard: the whole-file XXH3-64 listed (not checked here)
    // A "shards" list only: per shard, 0 when its "xxh3" is 16 hex digits, else 1 (no member), 2
    // (not a string) or 3 (not 16 hex digits): readers do not need it, verify reports it.
    std::vector<unsigned char> shard_hash_problem;
    std::vector<std::uint64_t> shard_bytes;   // per shard
    // Per shard (1.6): the trailer checksum the listing names ("index_xxh3", or bytes 24-31 of a
    // table entry), compared at every shard open so that a file replaced by another valid shard
    // is refused; index_hash_listed[k] is 0 where the listing has none (an older writer's).
    std::vector<std::uint64_t> index_hash;
    std::vector<unsigned char> index_hash_listed;
    std::vector<std::uint64_t> first_record;  // per shard, plus the total at the end
    std::string schema_bytes;                 // shard 0's schema and classes sections
    shard_cache shards;
    schema_record schema;
    schema_info info;
    std::vector<class_info> classes;
    json manifest;  // manifest.json without its "shards" list (the table above holds it)
    bool verify = true;
    io_mode io = io_mode::mmap;         // as chosen at open (never automatic)
    // The reader's I/O engine (io stream or blocks), shared by the shards' sources (each keeps
    // it alive: the last one closed stops its threads).
    std::shared_ptr<io_engine> engine;
    foreground_rows foreground;  // crop_position::foreground's counts per row, per record read

    std::size_t shard_count() const { return shard_bytes.size(); }
    std::string name(std::size_t k) const {
        if (names_from_hashes) return shard_file_name(k, shard_hash[k]);
        const std::uint64_t begin = k ? name_end[k - 1] : 0;
        return names.substr(static_cast<std::size_t>(begin), static_cast<std::size_t>(name_end[k] - begin));
    }
    std::string where(std::size_t shard, std::size_t local) const {
        return path + ": " + name(shard) + ": record " + std::to_string(local) + " (dataset index " +
               std::to_string(first_record[shard] + local) + ")";
    }

    // Opens shard k and checks it against the shard table and shard 0's schema. Errors name
    // the shard (not the folder: the caller adds it).
    std::shared_ptr<const shard_file> open_shard(std::size_t k) const {
        const std::string n = name(k);
        std::shared_ptr<byte_source> source = store->open(n);
        std::shared_ptr<engine_source> through_engine;
        if (engine) source = through_engine = std::make_shared<engine_source>(engine, std::move(source));
        auto shard = std::make_shared<shard_file>(std::move(source), n);
        if (shard->size() != shard_bytes[k])
            throw error(n + ": is " + std::to_string(shard->size()) + " bytes, the manifest says " +
                        std::to_string(shard_bytes[k]));
        const std::uint64_t records = first_record[k + 1] - first_record[k];
        if (shard->record_count() != records)
            throw error(n + ": holds " + std::to_string(shard->record_count()) + " records, the manifest says " +
                        std::to_string(records));
        if (shard->header().shard_number != k || shard->header().first_record != first_record[k])
            throw error(n + ": is shard " + std::to_string(shard->header().shard_number) + " starting at record " +
                        std::to_string(shard->header().first_record) + ", but the manifest lists it as shard " +
                        std::to_string(k) + " starting at record " + std::to_string(first_record[k]));
        if (k > 0 && shard->schema_bytes() != schema_bytes)
            throw error(n + ": its schema or classes differ from " + name(0));
        // Its header and index (every record's place and checksum) are the ones listed: a file
        // replaced by another valid shard of the same size, number and schema is refused here,
        // before any of its records is returned, at the cost of comparing 8 bytes.
        if (index_hash_listed[k] && shard->index_checksum() != index_hash[k])
            throw error(n + ": is not the file the manifest lists (its header/index checksum is " +
                        hex16(shard->index_checksum()) + ", the manifest's \"index_xxh3\" is " + hex16(index_hash[k]) +
                        "): the shard was replaced after the dataset was written or opened");
        // Training reads records in a random order: no read-ahead around each one (the reader
        // asks for what a batch needs itself, see read_batch).
        shard->source()->advise(access_pattern::random);
        if (through_engine && io == io_mode::stream) through_engine->stream();
        return shard;
    }

    // Shard k, open (for a lazy cache: opened now when it is not open).
    shard_pin pin(std::size_t k) const {
        if (shards.eager()) return {nullptr, shards.eager_at(k)};
        shard_pin p;
        p.hold = shards.get(k, [this](std::size_t j) {
            try {
                return open_shard(j);
            } catch (const error& e) {
                const std::string now = store->version_of(manifest_file_name_for_messages());
                throw error(path + ": " + e.what() +
                            (now != manifest_version ? " (manifest.json was replaced since this dataset was opened: a "
                                                       "rebuild removed the shard; open the dataset again)"
                                                     : ""));
            }
        });
        p.file = p.hold.get();
        return p;
    }
    static const char* manifest_file_name_for_messages() { return "manifest.json"; }

    // The decoded copy (dataset::keep_decoded), once asked for; null before. Declared last:
    // destroyed first, its thread joined while the shards and the engine it reads are still there.
    mutable std::mutex decoded_mutex;
    mutable std::unique_ptr<decoded_copy> decoded_owner;
    mutable std::atomic<decoded_copy*> decoded{nullptr};
};

// A manifest's text is read whole and parsed into a tree of about 40 bytes per value; these
// bound what a damaged or hostile manifest.json can cost every reader process. A manifest lists
// per shard 6 values in ~180 bytes and per class up to 5, so the limits hold ~300,000 shards
// and 65535 classes.
inline constexpr std::uint64_t manifest_max_bytes = std::uint64_t(64) << 20;
inline constexpr std::size_t manifest_max_values = std::size_t(2) << 20;

// The whole manifest (or another text file), without blocking on a FIFO: see regular_file.hpp.
inline std::string read_whole_file(const std::string& path, std::uint64_t max_bytes = manifest_max_bytes) {
    return read_regular_file(path, max_bytes);
}

inline schema_info to_info(const schema_record& s) {
    schema_info i;
    i.task = s.task == task_code::segmentation ? task::segmentation : task::classification;
    i.order = s.channel_order == order_code::gray ? channel_order::gray
            : s.channel_order == order_code::rgb ? channel_order::rgb
            : s.channel_order == order_code::rgba ? channel_order::rgba : channel_order::bands;
    i.channels = s.channels;
    i.image_value_bytes = s.image_dtype_bytes;
    i.layout = s.label_layout == layout_code::one_hot ? label_layout::one_hot
             : s.label_layout == layout_code::index ? label_layout::index : label_layout::class_id;
    i.label_value_bytes = s.label_dtype_bytes;
    i.fixed_height = s.fixed_height;
    i.fixed_width = s.fixed_width;
    i.class_count = s.class_count;
    i.ignore_value = s.ignore_value;
    return i;
}

}  // namespace detail

}  // namespace shardpack
