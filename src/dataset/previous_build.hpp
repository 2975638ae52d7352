// What a rebuild can take back from the build before it: the published dataset in the output
// folder (when its fingerprints belong to it and were made with the same options) and the
// finished shards of an interrupted build in .partial/. Records are found by their CSV cells.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dataset/dataset_writer.hpp"
#include "dataset/input_fingerprints.hpp"
#include "shardpack/detail/shard_file.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {

struct previous_record {
    record_origin origin;                    // the shard and position of its stored bytes
    const record_fingerprint* fingerprint = nullptr;
    detail::index_entry entry;
    record_view view() const {
        return {origin.shard->bytes() + entry.offset, entry.stored_size, entry.decoded_size, entry.checksum, entry.codec};
    }
};

class previous_build {
public:
    previous_build() = default;
    // Never throws for a damaged or foreign previous state: it is then simply not used.
    // max_list_bytes: the largest fingerprints.tsv taken (a share of the memory budget: its
    // records live in memory while the build runs); a larger one is not reused, with a warning.
    static std::unique_ptr<previous_build> load(const std::string& dir, const std::string& options_digest,
                                                std::uint64_t max_list_bytes);

    const previous_record* find(std::string_view key, std::string_view label_key) const;
    std::size_t size() const { return by_row_.size(); }

private:
    std::optional<dataset> published_;
    std::vector<std::unique_ptr<detail::shard_file>> partial_shards_;
    std::vector<fingerprint_file> lists_;
    std::unordered_map<std::string, previous_record> by_row_;

    void index_group(const fingerprint_group& group, const detail::shard_file& shard, const std::string& path);
};

}  // namespace shardpack
