// Datasets on object storage: shardpack::storage and byte_source (include/shardpack/detail/
// storage.hpp) over the S3 client, so that dataset::open reads s3://bucket/prefix like a folder.
//
//   #include "remote/s3_storage.hpp"       // link shardpack_core (libcurl)
//   auto ds = shardpack::dataset::open("s3://bucket/datasets/train");   // or:
//   shardpack::open_options o; o.storage = shardpack::remote::open_s3_storage(url, ropts);
//
// How a dataset is opened: one GET of manifest.json (the shards' names and sizes) and the
// opening of shard 0 (its schema). Every other shard is opened when first read
// (opens_shards_lazily): read_batch and dataset::prefetch announce the shards a batch needs
// (will_open), whose GETs then all run at once: a small shard (at most 2 x 64 KiB + merge_gap
// bytes) is fetched whole by one GET, its records read from it too; a larger one by two, its
// head and its tail (header, trailer and index); nothing when the disk cache holds them.
//
// How a batch is read: the reader announces each shard's byte ranges before reading
// (byte_source::prefetch): a batch's records, or, ahead of use, the whole blocks of the
// locality-aware order (shardpack::block_read_ahead in order.hpp; the torch Loader does the
// same). Ranges of one shard that lie within merge_gap bytes of each other are fetched by one
// ranged GET of at most max_request bytes (a longer range by several); all run at once (the
// client's connection limit). Reads then copy from those buffers, which are kept, oldest
// dropped first, up to buffer_bytes. Every GET is checked (status, Content-Range, length) by
// the client and every record by its XXH3 checksum by the reader (the head and index by the
// shard's checksum), so a wrong byte from the server or a proxy is an error, never data.
//
// Local disk cache (cache_dir, by default $SHARDPACK_CACHE_DIR, else $XDG_CACHE_HOME/shardpack,
// else ~/.cache/shardpack; "off" for none): the first and last bytes of each shard (header,
// trailer, index) are kept in its meta/ folder under the shard's content name
// (shard-NNNNN-<xxh3>.spk: the name changes when a byte does), so a second open fetches nothing
// but the manifest, and opening a shard again fetches nothing. With shard_cache_bytes > 0, whole
// shards are also kept, in its shards/ folder, the least recently used removed beyond that many
// bytes. Both folders are the cache's own (io/cache_folder.hpp): made by it and marked by its
// ledger, which lists the files it wrote; a folder there that it did not make, or a link, is an
// error naming it, and a file it did not write is never read, replaced or removed. A cached
// shard is checked whole against the hash in its name before its first byte is used (once per
// open shard); one that fails is removed and fetched again, and when the fetched bytes fail too
// the error names the object and the cache file.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "remote/s3_client.hpp"
#include "shardpack/detail/storage.hpp"

namespace shardpack::remote {

struct remote_options {
    std::string cache_dir;                   // "" : the default above; "off": no disk cache
    std::uint64_t shard_cache_bytes = 0;     // whole shards kept on disk up to this many bytes (0: none)
    std::uint64_t merge_gap = 1 << 20;       // ranges closer than this are fetched as one
    std::uint64_t max_request = 8 << 20;     // bytes per ranged GET at most
    std::uint64_t buffer_bytes = 256 << 20;  // fetched ranges kept in memory for the reads that follow
    // SHARDPACK_CACHE_DIR, SHARDPACK_SHARD_CACHE_BYTES, SHARDPACK_S3_MERGE_GAP,
    // SHARDPACK_S3_MAX_REQUEST, SHARDPACK_S3_BUFFER_BYTES (byte counts accept K, M, G suffixes).
    static remote_options from_environment();
};

// What a storage read (for benchmarks and tests).
struct remote_stats {
    std::uint64_t bytes_delivered = 0;  // bytes the reader asked for with read_at
    std::uint64_t range_gets = 0;       // ranged GETs of record data issued
    std::uint64_t range_bytes = 0;      // their bytes
    std::uint64_t metadata_gets = 0;    // GETs of heads, tails and indexes (not from the disk cache)
    std::uint64_t metadata_bytes = 0;   // their bytes
    std::uint64_t shard_gets = 0;       // small shards fetched whole by one GET at their open
    std::uint64_t shard_get_bytes = 0;  // their bytes
    std::uint64_t metadata_cache_hits = 0;
    std::uint64_t shard_cache_hits = 0, shard_downloads = 0;
};

class s3_storage;

// A storage for s3://bucket/prefix with the client of the environment (shared_client()).
std::shared_ptr<s3_storage> open_s3_storage(const std::string& url, const remote_options& options = remote_options::from_environment());
std::shared_ptr<s3_storage> open_s3_storage(std::shared_ptr<s3_client> client, const std::string& url,
                                            const remote_options& options);

class s3_storage final : public shardpack::storage {
public:
    s3_storage(std::shared_ptr<s3_client> client, s3_location where, remote_options options);
    ~s3_storage() override;
    std::string read_small_file(const std::string& name, std::uint64_t max_bytes) const override;
    std::shared_ptr<byte_source> open(const std::string& name) const override;
    std::string version_of(const std::string& name) const override;
    std::string describe() const override;
    std::vector<std::string> list_names() const override;  // the keys directly under the prefix
    bool opens_shards_lazily() const override;
    void will_open(const std::string* names, std::size_t count) const override;

    remote_stats stats() const;
    s3_client& client() const;
    const s3_location& location() const;
    struct impl;

private:
    std::shared_ptr<impl> impl_;
};

// Makes dataset::open accept s3:// URLs in this process (done when this library's storage code
// is linked in; calling it again does nothing).
void enable_s3_urls();

}  // namespace shardpack::remote
