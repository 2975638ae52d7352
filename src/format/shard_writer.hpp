// Writes one shard file front to back: header and sections, records at aligned offsets, then
// the index and the trailer. Memory is bounded by the index (40 bytes a record).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "format/output_file.hpp"
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
    bool uses_zstd = true;  // sets the required zstd feature bit
};

class shard_writer {
public:
    shard_writer(const std::string& path, const detail::schema_record& schema,
                 const std::vector<detail::class_record>& classes, const shard_identity& id,
                 const std::vector<extra_section>& extra = {});
    ~shard_writer();

    void add(const stored_record& record);
    // Bytes the file will have if closed now (the index and trailer included).
    std::uint64_t projected_size() const;
    std::uint64_t projected_size_with(const stored_record& next) const;
    std::uint64_t record_count() const { return index_.size(); }
    // Writes index and trailer, fsyncs and closes. Returns XXH3-64 of the whole file.
    std::uint64_t finish();
    std::uint64_t file_size() const { return file_.position(); }

private:
    output_file file_;
    XXH3_state_t* hash_;
    std::vector<unsigned char> header_;
    std::vector<detail::index_entry> index_;
    std::uint64_t uses_zstd_;
    void put(const void* data, std::size_t size);
    void put_zeros(std::size_t count);
};

}  // namespace shardpack
