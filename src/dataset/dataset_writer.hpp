// Writes a dataset folder so that a reader never sees part of one, and a rebuild rewrites only
// what changed.
//
// - Records stream into a shard under a temporary name (.tmp-<pid>-shard-<n>.spk). A finished
//   shard is fsynced and moved to .partial/ under its final, content-addressed name, and its
//   records' input fingerprints are appended to .partial/fingerprints.tsv: an interrupted build
//   keeps its finished shards, and the next build takes them back.
// - publish() lists the shards it is about to name and the current manifest's in the folder's
//   ledger (.shardpack), moves the shards into the folder, writes manifest.json by an atomic
//   rename (the switch from the old dataset to the new one), then fingerprints.tsv. It removes
//   the shards no manifest of the last two builds names (those of the previous manifest stay
//   until the next build, for readers that read it), then .partial/.
// - Every file operation goes through the folder's descriptor and never follows a link
//   (output_folder); only names shardpack gives files (dataset_names.hpp) are ever removed.
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
#include "dataset/input_fingerprints.hpp"
#include "io/output_file.hpp"
#include "io/output_folder.hpp"
#include "shardpack/detail/format.hpp"
#include "shardpack/detail/json.hpp"
#include "shardpack/detail/shard_file.hpp"

namespace shardpack {

struct dataset_writer_options {
    std::string out_dir;
    // The output folder, opened once by the caller (claim_output_folder checks that shardpack
    // may write there); when null, out_dir is opened, and created if missing.
    std::shared_ptr<output_folder> folder;
    // Remove temporaries a build that died left (names of dataset_names.hpp's temporary forms).
    // The build turns this off in a folder that was not shardpack's before it.
    bool remove_leftovers = true;
    std::uint64_t shard_size = std::uint64_t(256) << 20;  // a shard never grows beyond this (unless one record does)
    detail::schema_record schema;
    std::vector<detail::class_record> classes;
    shard_codec codec = shard_codec::zstd_record;  // what the records are stored with (format 1.0, 1.1 or 1.3)
    detail::json build = detail::json::object();      // the effective build options
    detail::json libraries = detail::json::object();  // codec and decoder library versions
    std::string input_digest;                         // hex XXH3-64 of the input list
    std::string options_digest = "none";              // what shapes record bytes; keys fingerprints
    std::vector<extra_section> extra_sections;        // for forward-compatibility tests
    detail::json partition;                           // `build --partition`: the manifest's "partition" member; null: none
    // With more shards than this, the shard list goes into a binary shard table (format 1.2,
    // spec 13.8) instead of manifest.json: a JSON list of 4096 shards is ~0.7 MB and parses in
    // tens of milliseconds in every reader process, 400,000 would be ~71 MB. Smaller datasets
    // keep the JSON list, which 1.0 and 1.1 readers read. Tests set 0 (always a table).
    std::size_t shard_table_above = 4096;
    // How a shard taken over unchanged comes into the folder. `move` (a build): it is a previous
    // build's file in this folder, renamed. `link` (a merge, whose sources are other datasets'
    // shards): hard-linked, or copied where a link cannot be made (another file system);
    // `copy`: always copied. The source is never changed.
    enum class adopt_mode { move, link, copy } adopt = adopt_mode::move;
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
    std::uint64_t index_hash = 0;  // the trailer's header/index checksum ("index_xxh3", 1.6)
    bool in_partial = true;  // in .partial/ (else already in the folder: a published shard kept)
    bool reused = false;     // kept from a previous build rather than written
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
    std::uint64_t shards_linked() const { return shards_linked_; }  // adopt_mode::link: taken by hard link
    // After publish(): the shards of the dataset, in order (manifest.json may not list them).
    const std::vector<published_shard>& shards() const { return done_; }
    std::uint64_t bytes() const;  // their total size

    // A streamed build's input digest is known at its end (sample_stream::digest), before publish().
    void set_input_digest(std::string digest) { opt_.input_digest = std::move(digest); }
    detail::json publish();
    // Removes the shard being written (finished shards stay for a resumed build).
    void discard();

    static constexpr const char* partial_dir = ".partial";
    static constexpr const char* fingerprints_file = "fingerprints.tsv";

private:
    dataset_writer_options opt_;
    std::uint64_t header_length_ = 0;
    std::shared_ptr<output_folder> folder_, partial_;  // out_dir and out_dir/.partial
    // The shard being filled.
    shard_extent extent_;
    std::unique_ptr<shard_writer> current_;
    std::string current_temp_;  // its name in the folder
    const detail::shard_file* adopt_ = nullptr;  // the previous shard this one may turn out to equal
    bool adopt_in_partial_ = false;
    std::string adopt_path_;  // where the adopted shard's file lies (a merge's part, for bring_in)
    std::vector<record_view> pending_;           // records not written while adopt_ may hold
    // The shard's records' fingerprints, as the lines of its group in fingerprints.tsv: text
    // takes about half the memory of record_fingerprint structs, and a shard can hold hundreds
    // of thousands of records.
    std::string fingerprint_lines_;
    std::vector<published_shard> done_;
    std::unique_ptr<output_file> all_fingerprints_;  // every finished shard's group, for publish()
    std::string all_fingerprints_name_;
    std::uint64_t records_ = 0;
    bool published_ = false;
    std::uint64_t shards_linked_ = 0;

    bool cut_after(std::uint64_t stored_size, std::uint64_t key_hash) const;
    void open_real_shard();
    void write_pending();
    void finish_shard();
    void bring_in(published_shard& shard);
    // publish()'s steps that need the writer's state.
    std::uint64_t write_fingerprints(const std::string& content_hash, const std::string& temp_name);
    detail::json manifest_json(const std::string& content_hash, bool with_table, const detail::json& shards,
                               const std::string& table_name, const std::string& table_bytes,
                               std::uint64_t fingerprints_digest) const;
};

// The manifest's description of a schema and class table (also used by `inspect`).
detail::json schema_to_json(const detail::schema_record& schema);
detail::json classes_to_json(const std::vector<detail::class_record>& classes);

}  // namespace shardpack
