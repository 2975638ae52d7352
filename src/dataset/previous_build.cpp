#include "dataset/previous_build.hpp"

#include <spdlog/spdlog.h>

#include "io/output_folder.hpp"

namespace shardpack {

namespace {
std::string row_id(std::string_view key, std::string_view label_key) {
    std::string id;
    id.reserve(key.size() + 1 + label_key.size());
    id.append(key);
    id += '\n';
    return id.append(label_key);
}
}  // namespace

void previous_build::index_group(const fingerprint_group& group, const detail::shard_file& shard, const std::string& path) {
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& fp = group.records[i];
        previous_record r;
        r.origin = {&shard, i, path};
        r.fingerprint = &fp;
        r.entry = shard.entry(i);
        by_row_.emplace(row_id(fp.key, fp.label_key), r);  // the first copy of a repeated row wins
    }
}

std::unique_ptr<previous_build> previous_build::load(const std::string& dir, const std::string& options_digest,
                                                     std::uint64_t max_list_bytes) {
    auto p = std::make_unique<previous_build>();
    p->lists_.reserve(2);  // index_group keeps pointers into these lists
    // The published dataset.
    try {
        const auto folder = output_folder::open(dir, false, true);
        auto list = load_fingerprints(*folder, dataset_writer::fingerprints_file, max_list_bytes);
        if (list && list->options_digest == options_digest) {
            open_options every_shard_mapped;  // records are copied from the mappings later
            every_shard_mapped.io = io_mode::mmap;
            every_shard_mapped.max_open_shards = open_options::all_shards;
            dataset ds = dataset::open(dir, every_shard_mapped);
            bool matches = list->content_hash == ds.content_hash() && list->groups.size() == ds.shard_count();
            for (std::size_t k = 0; matches && k < ds.shard_count(); ++k)
                matches = list->groups[k].shard == ds.shard(k).name() &&
                          list->groups[k].records.size() == ds.shard(k).record_count();
            if (matches) {
                p->published_ = ds;
                p->lists_.push_back(std::move(*list));
                for (std::size_t k = 0; k < ds.shard_count(); ++k)
                    p->index_group(p->lists_.back().groups[k], *ds.shard(k), dir + "/" + ds.shard(k).name());
            } else {
                spdlog::debug("{}: fingerprints do not match the dataset; nothing is reused from it", dir);
            }
        }
    } catch (const std::exception& e) {
        spdlog::warn("{}: the previous dataset cannot be reused ({}); rebuilding everything", dir, e.what());
    }
    // Finished shards of an interrupted build.
    const std::string partial = dir + "/" + dataset_writer::partial_dir;
    std::optional<fingerprint_file> partial_list;
    try {
        if (const auto folder = output_folder::open(dir, false, true); folder->kind_of(dataset_writer::partial_dir) == output_folder::kind::folder)
            partial_list = load_fingerprints(*folder->subfolder(dataset_writer::partial_dir, false), dataset_writer::fingerprints_file,
                                             max_list_bytes);
    } catch (const std::exception& e) {
        spdlog::debug("{}: not reused: {}", partial, e.what());
    }
    if (auto& list = partial_list; list && list->options_digest == options_digest && list->content_hash == "partial") {
        p->lists_.push_back(std::move(*list));
        for (const auto& group : p->lists_.back().groups) {
            const std::string path = partial + "/" + group.shard;
            try {
                auto shard = std::make_unique<detail::shard_file>(path, group.shard);
                if (shard->record_count() != group.records.size()) continue;
                p->index_group(group, *shard, path);
                p->partial_shards_.push_back(std::move(shard));
            } catch (const std::exception& e) {
                spdlog::debug("{}: not reused: {}", path, e.what());
            }
        }
    }
    return p;
}

const previous_record* previous_build::find(std::string_view key, std::string_view label_key) const {
    const auto it = by_row_.find(row_id(key, label_key));
    return it == by_row_.end() ? nullptr : &it->second;
}

}  // namespace shardpack
