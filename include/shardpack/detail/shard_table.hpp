// The binary shard table (format 1.2, formats/shardpack-v1.md 13.8): a dataset's list of shards
// as 32 bytes a shard (records, bytes, whole-file XXH3-64 and, since 1.6, the trailer's
// header/index checksum; 1.2 to 1.5 tables have 24-byte entries), in a file the manifest names,
// so that a dataset of 400,000 shards opens without parsing ~70 MB of JSON. Shard k's file name
// and first record follow from the table: shard-<k, %05zu>-<hash, 16 hex digits>.spk, and the
// sum of the records of the shards before it.
//
// This header reads and checks a table (every size and count is checked before it is used, with
// little-endian loads) and writes one (the writer and the test tools share the encoding).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "endian.hpp"
#include "error.hpp"
#include "format.hpp"
#include "hex.hpp"
#include "json.hpp"
#include "xxhash.hpp"

namespace shardpack::detail {

inline constexpr unsigned char shard_table_magic[8] = {0x89, 'S', 'P', 'T', '\r', '\n', 0x1A, '\n'};
inline constexpr std::size_t shard_table_header_size = 32;
inline constexpr std::size_t shard_table_entry_size_1_2 = 24;  // records, bytes, xxh3: the least a reader accepts
inline constexpr std::size_t shard_table_entry_size = 32;      // and index_xxh3 (1.6): what this version writes
// The manifest's format_version when the shard list is a table (and no shard needs more).
inline constexpr std::uint16_t version_minor_shard_table = 2;
// The table's own version_minor: the version of its entry layout (2 for 24-byte entries).
inline constexpr std::uint16_t version_minor_index_hash = 6;
// A table of more shards than this is refused before it is read (128 MiB at 32 bytes a shard):
// 4,194,304 shards of the default 256 MiB would be 1 PiB.
inline constexpr std::uint64_t shard_table_max_shards = std::uint64_t(1) << 22;
inline constexpr std::uint64_t shard_table_max_bytes = shard_table_header_size + shard_table_max_shards * shard_table_entry_size;

// One shard of a table. first_record is not stored: it is the sum of the records before it.
struct shard_table_entry {
    std::uint64_t records = 0;
    std::uint64_t bytes = 0;
    std::uint64_t hash = 0;  // XXH3-64 of the whole shard file; also in its name
    // The shard's trailer checksum (spec 9), which a reader compares at every shard open (1.6;
    // absent from 24-byte entries).
    bool has_index_hash = false;
    std::uint64_t index_hash = 0;
};

// The file name of shard `number` whose whole-file hash is `hash` (spec 13.1).
inline std::string shard_file_name(std::uint64_t number, std::uint64_t hash) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "shard-%05llu-%016llx.spk", static_cast<unsigned long long>(number),
                  static_cast<unsigned long long>(hash));
    return buf;
}

// The table's own file name: content-addressed like a shard's, so a rebuild never overwrites the
// table a reader of the previous manifest is about to read.
inline std::string shard_table_file_name(std::uint64_t hash) { return "shards-" + hex16(hash) + ".spt"; }

// The table's bytes for these shards (spec 13.8): 32-byte entries (1.6) when every entry has
// its index hash, 24-byte ones (1.2, what the test tools write as an older writer's) when none has.
inline std::string encode_shard_table(const std::vector<shard_table_entry>& shards) {
    std::size_t with_index = 0;
    for (const auto& s : shards) with_index += s.has_index_hash;
    if (with_index != 0 && with_index != shards.size())
        throw error("a shard table lists every shard's index hash or none (" + std::to_string(with_index) + " of " +
                    std::to_string(shards.size()) + ")");
    const bool v16 = with_index != 0;
    const std::size_t entry_size = v16 ? shard_table_entry_size : shard_table_entry_size_1_2;
    std::string out(shard_table_header_size + entry_size * shards.size(), '\0');
    auto* p = reinterpret_cast<unsigned char*>(&out[0]);
    for (int i = 0; i < 8; ++i) p[i] = shard_table_magic[i];
    store_u16(p + 8, 1);
    store_u16(p + 10, v16 ? version_minor_index_hash : version_minor_shard_table);
    store_u32(p + 12, std::uint32_t(entry_size));
    store_u64(p + 16, shards.size());
    // bytes 24-31 reserved, zero
    unsigned char* e = p + shard_table_header_size;
    for (const auto& s : shards) {
        store_u64(e, s.records);
        store_u64(e + 8, s.bytes);
        store_u64(e + 16, s.hash);
        if (v16) store_u64(e + 24, s.index_hash);
        e += entry_size;
    }
    return out;
}

// Parses and checks a table's bytes (the caller has checked their size and XXH3-64 against the
// manifest). Errors say what is wrong; the caller names the file.
inline std::vector<shard_table_entry> decode_shard_table(const unsigned char* p, std::size_t size) {
    if (size < shard_table_header_size)
        throw error("is " + std::to_string(size) + " bytes, shorter than the 32-byte header of a shard table (truncated?)");
    for (int i = 0; i < 8; ++i)
        if (p[i] != shard_table_magic[i]) throw error("is not a shard table (wrong magic bytes)");
    const std::uint16_t major = load_u16(p + 8), minor = load_u16(p + 10);
    if (major != 1)
        throw error("shard table version " + std::to_string(major) + "." + std::to_string(minor) +
                    " is not supported by this reader (it reads major version 1)");
    const std::uint32_t entry_size = load_u32(p + 12);
    if (entry_size < shard_table_entry_size_1_2 || entry_size % 8 != 0 || entry_size > 4096)
        throw error("entry size " + std::to_string(entry_size) + " is not a multiple of 8 in 24 ... 4096");
    const std::uint64_t count = load_u64(p + 16);
    if (count == 0) throw error("lists no shards");
    if (count > shard_table_max_shards)
        throw error("lists " + std::to_string(count) + " shards, more than the reader's limit of " +
                    std::to_string(shard_table_max_shards));
    if (std::uint64_t(size) != shard_table_header_size + count * entry_size)
        throw error("is " + std::to_string(size) + " bytes, but " + std::to_string(count) + " entries of " +
                    std::to_string(entry_size) + " bytes make " + std::to_string(shard_table_header_size + count * entry_size));
    std::vector<shard_table_entry> out(static_cast<std::size_t>(count));
    const unsigned char* e = p + shard_table_header_size;
    for (auto& s : out) {
        s.records = load_u64(e);
        s.bytes = load_u64(e + 8);
        s.hash = load_u64(e + 16);
        s.has_index_hash = entry_size >= shard_table_entry_size;  // bytes 32 onward: for later versions
        if (s.has_index_hash) s.index_hash = load_u64(e + 24);
        e += entry_size;
    }
    return out;
}

// The checks of a manifest's shard list, shared by the JSON list and the table
// (dataset_open.hpp).

// A shard's or shard table's name in the manifest: one file of the dataset folder (spec 14.A.5.1;
// a NUL would make the open name another file).
inline bool plain_file_name(const std::string& name) {
    return !name.empty() && name[0] != '.' && name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}
// One shard's entry, checked before any shard is opened: its records fit in its bytes (104 bytes
// of header and trailer, 40 of index a record: what B.1 and B.6 check in the file, whose size must
// be `bytes`), and the running total stays below 2^64. Errors name the numbers; the caller the shard.
inline void check_shard_entry(std::uint64_t records, std::uint64_t bytes, std::uint64_t records_before) {
    constexpr std::uint64_t frame = fixed_header_size + trailer_size;
    if (bytes < frame || records > (bytes - frame) / index_entry_size)
        throw error(std::to_string(records) + " records in " + std::to_string(bytes) + " bytes: a shard holds at most (bytes - " +
                    std::to_string(frame) + ") / " + std::to_string(index_entry_size) + " records");
    if (records > ~std::uint64_t(0) - records_before)
        throw error("its " + std::to_string(records) + " records after the " + std::to_string(records_before) +
                    " of the shards before it make more than 2^64 - 1");
}
// An error about shard k (and its name, once known), escaped: "shard 3 (\"shard-00003-....spk\"): ..."
inline error shard_entry_error(std::size_t k, const std::string* name, const error& e) {
    std::string what = e.what();
    if (what.rfind("JSON: ", 0) == 0) what.erase(0, 6);
    return error("shard " + std::to_string(k) + (name ? " (" + json::quoted(*name) + ")" : std::string()) + ": " + what);
}

}  // namespace shardpack::detail
