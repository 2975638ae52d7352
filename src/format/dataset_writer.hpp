// Writes a dataset folder: shards under temporary names while records stream in, then, at
// publish(), the shards under their final content-addressed names and the manifest last, by an
// atomic rename. Until that rename a reader sees the previous dataset (or none); after it, the
// new one. Shards the new manifest does not name are removed after the switch.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format/shard_writer.hpp"
#include "format/stored_record.hpp"
#include "shardpack/detail/format.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack {

struct dataset_writer_options {
    std::string out_dir;
    std::uint64_t shard_size = std::uint64_t(256) << 20;  // start a new shard beyond this many bytes
    detail::schema_record schema;
    std::vector<detail::class_record> classes;
    bool uses_zstd = true;
    detail::json build = detail::json::object();      // the effective build options
    detail::json libraries = detail::json::object();  // codec and decoder library versions
    std::string input_digest;                         // hex XXH3-64 of the input list
    std::vector<extra_section> extra_sections;        // for forward-compatibility tests
};

struct published_shard {
    std::string file;
    std::uint64_t records = 0, first_record = 0, bytes = 0, hash = 0;
};

class dataset_writer {
public:
    explicit dataset_writer(dataset_writer_options options);
    ~dataset_writer();  // removes the temporary files of a dataset that was not published
    dataset_writer(const dataset_writer&) = delete;
    dataset_writer& operator=(const dataset_writer&) = delete;

    void add(const stored_record& record);
    std::uint64_t record_count() const { return records_; }
    std::uint64_t bytes_written() const;

    // Finishes the last shard, moves shards into place, writes manifest.json atomically and
    // removes shards of the previous dataset. Returns the manifest.
    detail::json publish();
    // Removes every temporary file written so far.
    void discard();

private:
    dataset_writer_options opt_;
    std::unique_ptr<shard_writer> current_;
    std::vector<published_shard> done_;      // finished shards, still under temporary names
    std::vector<std::string> temp_paths_;
    std::uint64_t records_ = 0;
    std::uint64_t finished_bytes_ = 0;
    bool published_ = false;

    void start_shard();
    void finish_shard();
    std::string temp_path(std::size_t shard) const;
};

// The manifest's description of a schema and class table (also used by `inspect`).
detail::json schema_to_json(const detail::schema_record& schema);
detail::json classes_to_json(const std::vector<detail::class_record>& classes);
std::string hex64(std::uint64_t value);

}  // namespace shardpack
