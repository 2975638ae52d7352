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

namespace shardpack {

struct file_stamp {
    std::uint64_t size = 0;
    std::int64_t mtime_ns = 0;
    std::uint64_t hash = 0;  // XXH3-64 of the file's bytes
    bool operator==(const file_stamp&) const = default;
};

// A mask value not in the class table (a packed 0xRRGGBB colour, or an index mask's value):
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
// Returns nothing for a missing or malformed file: then nothing is reused.
std::optional<fingerprint_file> load_fingerprints(const std::string& path);

// The stamp of a file without reading it (hash left 0).
std::optional<file_stamp> stat_file(const std::string& path);

}  // namespace shardpack
