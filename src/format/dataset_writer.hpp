// Writes a dataset folder so that a reader never sees part of one, and a rebuild rewrites only
// what changed.
//
// - Records stream into a shard under a temporary name (.tmp-<pid>-shard-<n>.spk). A finished
//   shard is fsynced and moved to .partial/ under its final, content-addressed name, and its
//   records' input fingerprints are appended to .partial/fingerprints.tsv: an interrupted build
//   keeps its finished shards, and the next build takes them back.
// - publish() moves the shards into the folder, writes manifest.json by an atomic rename (the
//   switch from the old dataset to the new one), then fingerprints.tsv, and removes .partial/
//   and the shards only the old manifest named.
// - Shard boundaries depend only on the sequence of records (their keys and stored sizes), so
//   a record that changes moves no boundary far from it. A shard whose records are exactly
//   those of a previous build's shard at the same position is not written at all: the old file
//   is kept.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/shard_writer.hpp"
#include "format/stored_record.hpp"
#include "format/input_fingerprints.hpp"
#include "format/output_file.hpp"
#include "shardpack/detail/format.hpp"
#include "shardpack/detail/json.hpp"
#include "shardpack/detail/shard_file.hpp"

namespace shardpack {

struct dataset_writer_options {
    std::string out_dir;
    std::uint64_t shard_size = std::uint64_t(256) << 20;  // a shard never grows beyond this (unless one record does)
    detail::schema_record schema;
    std::vector<detail::class_record> classes;
    bool uses_zstd = true;    // codec 1 records (format 1.0)
    bool uses_bands = false;  // codec 2 records (format 1.1)
    detail::json build = detail::json::object();      // the effective build options
    detail::json libraries = detail::json::object();  // codec and decoder library versions
    std::string input_digest;                         // hex XXH3-64 of the input list
    std::string options_digest = "none";              // what shapes record bytes; keys fingerprints
    std::vector<extra_section> extra_sections;        // for forward-compatibility tests
};

// Where a record's stored bytes already lie, when it comes unchanged from a previous build.
struct record_origin {
    const detail::shard_file* shard = nullptr;
    std::size_t local = 0;
    std::string path;  // the shard's file path
};

struct published_shard {
    std::string file;
    std::uint64_t records = 0, first_record = 0, bytes = 0, hash = 0;
    std::string path;     // where the finished file is now
    bool reused = false;  // kept from a previous build rather than written
};

class dataset_writer {
public:
    explicit dataset_writer(dataset_writer_options options);
    ~dataset_writer();  // removes the shard being written; finished shards stay in .partial/
    dataset_writer(const dataset_writer&) = delete;
    dataset_writer& operator=(const dataset_writer&) = delete;

    // `key_hash`: XXH3-64 of the record's key, which places shard boundaries.
    void add(const record_view& record, std::uint64_t key_hash, const record_fingerprint& fingerprint,
             const record_origin& origin = {});
    void add(const stored_record& record, std::uint64_t key_hash = 0) { add(view_of(record), key_hash, {}); }
    std::uint64_t record_count() const { return records_; }
    std::uint64_t shards_reused() const;
    std::uint64_t shards_written() const;

    detail::json publish();
    // Removes the shard being written (finished shards stay for a resumed build).
    void discard();

    static constexpr const char* partial_dir = ".partial";
    static constexpr const char* fingerprints_file = "fingerprints.tsv";

private:
    dataset_writer_options opt_;
    std::uint64_t header_length_ = 0;
    std::string partial_;  // out_dir/.partial
    // The shard being filled.
    shard_extent extent_;
    std::unique_ptr<shard_writer> current_;
    std::string current_temp_;
    const detail::shard_file* adopt_ = nullptr;  // the previous shard this one may turn out to equal
    std::string adopt_path_;
    std::vector<record_view> pending_;           // records not written while adopt_ may hold
    // The shard's records' fingerprints, as the lines of its group in fingerprints.tsv: text
    // takes about half the memory of record_fingerprint structs, and a shard can hold hundreds
    // of thousands of records.
    std::string fingerprint_lines_;
    std::vector<published_shard> done_;
    std::unique_ptr<output_file> all_fingerprints_;  // every finished shard's group, for publish()
    std::string all_fingerprints_path_;
    std::uint64_t records_ = 0;
    bool published_ = false;

    bool cut_after(std::uint64_t stored_size, std::uint64_t key_hash) const;
    void open_real_shard();
    void write_pending();
    void finish_shard();
};

// The manifest's description of a schema and class table (also used by `inspect`).
detail::json schema_to_json(const detail::schema_record& schema);
detail::json classes_to_json(const std::vector<detail::class_record>& classes);
std::string hex64(std::uint64_t value);

}  // namespace shardpack
