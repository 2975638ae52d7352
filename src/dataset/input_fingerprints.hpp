// Fingerprints of the inputs behind each record, kept beside a dataset (fingerprints.tsv) so a
// rebuild can tell which rows changed: a row whose files have the same size and mtime, or the
// same content hash, and whose build options are the same, gets its record's stored bytes back
// from the previous build instead of being decoded again.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/input_file.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {

class output_folder;

struct file_stamp {
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
    std::uint64_t hash = 0;  // XXH3-64 of the file's bytes
    bool operator==(const file_stamp&) const = default;
};

// A mask value not in the class table (a packed 0xRRGGBB color, or an index mask's value):
// its output pixel count in the record and its first source position.
struct unknown_value_count {
    std::uint32_t value = 0;
    std::uint64_t pixels = 0;
    std::uint32_t x = 0, y = 0;
    bool operator==(const unknown_value_count&) const = default;
};

// A record's fingerprint lists at most this many distinct unknown values.
inline constexpr std::size_t max_listed_unknown_values = 256;

struct record_fingerprint {
    std::string key, label_key;  // the image and label cells as the CSV wrote them
    file_stamp image, label;     // label: segmentation only
    std::int32_t class_id = -1;
    std::uint64_t unknown_pixels = 0;
    std::vector<std::pair<std::uint32_t, std::uint64_t>> class_counts;  // non-zero counts only
    std::vector<std::pair<std::uint32_t, std::uint64_t>> tolerance_counts;  // of those, mapped by --color-tolerance
    std::vector<unknown_value_count> unknown_values;                       // the unknown pixels by value
    std::uint64_t fields_hash = 0;  // XXH3-64 of the row's --field values (source form, never 0); 0 without fields
};

// The records of one shard, in order.
struct fingerprint_group {
    std::string shard;  // the shard's file name
    std::vector<record_fingerprint> records;
};

struct fingerprint_file {
    std::string content_hash;    // the dataset it describes ("partial" for an unfinished build)
    std::string options_digest;  // what else shaped the record bytes
    std::vector<fingerprint_group> groups;
};

std::string format_fingerprint_header(const std::string& content_hash, const std::string& options_digest);
std::string format_fingerprint_group(const fingerprint_group& group);
// The same in pieces, for a writer that keeps a shard's records as text (about half the memory
// of record_fingerprint structs): the group's first line, then each record's line.
std::string format_fingerprint_group_head(const std::string& shard, std::uint64_t count);
void append_fingerprint_line(std::string& out, const record_fingerprint& record);
// Reads a fingerprints.tsv a group at a time (never whole): NAME in `folder`, never through a
// link, a regular file. Every error (input_error) names the file and line.
class fingerprint_reader {
public:
    fingerprint_reader(const output_folder& folder, const std::string& name);
    ~fingerprint_reader();
    fingerprint_reader(const fingerprint_reader&) = delete;
    fingerprint_reader& operator=(const fingerprint_reader&) = delete;
    const std::string& content_hash() const { return content_hash_; }
    const std::string& options_digest() const { return options_digest_; }
    // The next shard's group; false at the end of the file. A group listing more than
    // max_records records is refused before they are read.
    bool next(fingerprint_group& group, std::uint64_t max_records = ~std::uint64_t(0));
    // XXH3-64 of every byte after the header line read so far: after the last next(), the
    // digest a part's manifest carries (partition.fingerprints_digest).
    std::uint64_t body_digest() const;
    std::uint64_t size() const { return file_.size(); }
    const std::string& path() const { return file_.path(); }

private:
    input_file file_;
    line_reader lines_;
    XXH3_state_t* state_;
    std::string content_hash_, options_digest_;
};

// The longest line accepted: a record's key and label cells with at most 256 unknown values.
inline constexpr std::size_t max_fingerprint_line = std::size_t(1) << 20;

// The whole list, when it is at most max_bytes long (a bound from the memory budget) and well
// formed. Returns nothing for a missing, malformed, larger or not regular file: then nothing is
// reused.
std::optional<fingerprint_file> load_fingerprints(const output_folder& folder, const std::string& name, std::uint64_t max_bytes);
std::optional<fingerprint_file> load_fingerprints(const std::string& path);

// The stamp of a file without reading it (hash left 0).
std::optional<file_stamp> stat_file(const std::string& path);

}  // namespace shardpack
