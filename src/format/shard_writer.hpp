// Writes one shard file front to back: header and sections, records at aligned offsets, then
// the index and the trailer. Memory is bounded by the index (40 bytes a record).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "io/output_file.hpp"
#include "format/stored_record.hpp"
#include "shardpack/detail/format.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {

// An extra section for the header, for tests of forward compatibility.
struct extra_section {
    std::uint32_t type = 0;
    std::uint32_t flags = 0;
    std::vector<unsigned char> payload;
};

struct shard_identity {
    std::uint64_t shard_number = 0;
    std::uint64_t first_record = 0;
    shard_codec codec = shard_codec::zstd_record;  // the feature bits it sets and the version it needs
};

// The byte arithmetic of a shard being filled: where the next record goes and how large the
// file would be if it ended now. Shared by the writer and by the dataset writer's planning of
// shards it may not need to write at all.
class shard_extent {
public:
    explicit shard_extent(std::uint64_t header_length = 0) : position_(header_length) {}
    std::uint64_t add(std::uint64_t stored_size) {  // returns the record's offset
        const std::uint64_t offset = detail::align_up(position_, detail::record_alignment);
        position_ = offset + stored_size;
        ++count_;
        return offset;
    }
    std::uint64_t projected_size() const {
        return detail::align_up(position_, detail::record_alignment) + count_ * detail::index_entry_size + detail::trailer_size;
    }
    std::uint64_t projected_size_with(std::uint64_t stored_size) const {
        return detail::align_up(detail::align_up(position_, detail::record_alignment) + stored_size, detail::record_alignment) +
               (count_ + 1) * detail::index_entry_size + detail::trailer_size;
    }
    std::uint64_t count() const { return count_; }

private:
    std::uint64_t position_;
    std::uint64_t count_ = 0;
};

// The minor version a shard declares: the lowest that has its features (5 with fields, 4 with
// uint16 images or bands, 3 with codec 3, 1 with codec 2, else 0), so that a shard without them
// stays a 1.0 (or 1.1) file byte for byte.
inline std::uint16_t shard_minor_version(const shard_identity& id, bool fields = false, bool wide_pixels = false) {
    return fields ? detail::version_minor_fields
           : wide_pixels ? detail::version_minor_wide_pixels
           : id.codec == shard_codec::zstd_region_bands ? detail::version_minor_region_bands
           : id.codec == shard_codec::zstd_bands        ? detail::version_minor
                                                        : detail::version_minor_plain;
}

// The header (fixed part and sections) of a shard; its size does not depend on `id`.
std::vector<unsigned char> build_shard_header(const detail::schema_record& schema,
                                             const std::vector<detail::class_record>& classes, const shard_identity& id,
                                             const std::vector<extra_section>& extra);

class shard_writer {
public:
    // Creates the new file NAME in `folder` (exclusively, never through a link).
    shard_writer(const output_folder& folder, const std::string& name, const detail::schema_record& schema,
                 const std::vector<detail::class_record>& classes, const shard_identity& id,
                 const std::vector<extra_section>& extra = {});
    ~shard_writer();

    void add(const record_view& record);
    void add(const stored_record& record) { add(view_of(record)); }
    std::uint64_t record_count() const { return index_.size(); }
    // Writes index and trailer, fsyncs and closes. Returns XXH3-64 of the whole file.
    std::uint64_t finish();
    std::uint64_t file_size() const { return file_.position(); }
    // After finish: the trailer's header/index checksum, which the manifest lists (1.6).
    std::uint64_t index_checksum() const { return index_checksum_; }

private:
    output_file file_;
    XXH3_state_t* hash_;
    std::vector<unsigned char> header_;
    std::vector<detail::index_entry> index_;
    shard_codec codec_;
    std::uint16_t minor_;
    std::uint64_t index_checksum_ = 0;
    void put(const void* data, std::size_t size);
    void put_zeros(std::size_t count);
};

}  // namespace shardpack
