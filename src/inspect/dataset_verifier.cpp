#include "inspect/dataset_verifier.hpp"

#include <filesystem>
#include <set>

#include "format/dataset_writer.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
namespace fs = std::filesystem;

namespace {

// Label values must be what the writer can emit: one-hot pixels with at most one 1 and only
// 0/1 values; index values below the class count or the ignore value.
std::string label_problem(const sample& s, const schema_info& schema) {
    if (schema.task != task::segmentation) return {};
    if (schema.layout == label_layout::one_hot) {
        const auto lab = s.label();
        const std::size_t k = schema.class_count;
        for (std::size_t p = 0; p < lab.size() / k; ++p) {
            unsigned ones = 0;
            for (std::size_t c = 0; c < k; ++c) {
                const std::uint8_t v = lab[p * k + c];
                if (v > 1) return "one-hot value " + std::to_string(v) + " at pixel " + std::to_string(p);
                ones += v;
            }
            if (ones > 1) return "pixel " + std::to_string(p) + " is marked with " + std::to_string(ones) + " classes";
        }
        return {};
    }
    auto check = [&](auto view) -> std::string {
        for (std::size_t p = 0; p < view.size(); ++p)
            if (view[p] >= schema.class_count && view[p] != schema.ignore_value)
                return "class id " + std::to_string(view[p]) + " at pixel " + std::to_string(p) + " is out of range";
        return {};
    };
    return schema.label_value_bytes == 1 ? check(s.label()) : check(s.label_index16());
}

}  // namespace

verify_result verify_dataset(const std::string& dir, std::size_t max_problems) {
    verify_result r;
    auto problem = [&](std::string what) {
        if (r.problems.size() < max_problems) r.problems.push_back(std::move(what));
    };
    dataset ds;
    try {
        ds = dataset::open(dir);
    } catch (const std::exception& e) {
        problem(e.what());
        return r;
    }
    const auto& manifest = ds.manifest();
    const auto& listed = manifest.at("shards").as_array();

    // The folder must hold exactly the shards the manifest names.
    std::set<std::string> names;
    for (const auto& s : listed) names.insert(s.at("file").as_string());
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("shard-", 0) == 0 && entry.path().extension() == ".spk" && !names.count(name))
            problem(dir + ": extra shard " + name + " is not named by the manifest");
        else if (name.rfind(".tmp-", 0) == 0 || name.find(".tmp-") != std::string::npos)
            r.warnings.push_back(dir + ": leftover temporary file " + name + " (an interrupted build)");
    }

    // Whole-file hashes: these also cover the zero padding between records.
    std::vector<unsigned char> shard_hashes;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) {
        const auto& shard = ds.shard(k);
        shard.mapping()->advise_sequential();
        const std::uint64_t h = XXH3_64bits(shard.bytes(), shard.size());
        const std::string want = listed[k].at("xxh3").as_string();
        if (hex64(h) != want) problem(dir + ": " + shard.name() + ": file hash " + hex64(h) + " differs from the manifest's " + want);
        char expected_name[64];
        std::snprintf(expected_name, sizeof expected_name, "shard-%05zu-%s.spk", k, want.c_str());
        if (shard.name() != expected_name) problem(dir + ": " + shard.name() + ": name does not match its number and hash");
        shard_hashes.resize(shard_hashes.size() + 8);
        detail::store_u64(shard_hashes.data() + shard_hashes.size() - 8, h);
        r.bytes_checked += shard.size();
        ++r.shards_checked;
    }
    const std::string content_hash = hex64(XXH3_64bits(shard_hashes.data(), shard_hashes.size()));
    if (content_hash != ds.content_hash())
        problem(dir + ": content hash " + content_hash + " differs from the manifest's " + ds.content_hash());

    read_context ctx;
    for (std::size_t i = 0; i < ds.size(); ++i) {
        try {
            const sample s = ds.read(i, ctx);
            const std::string why = label_problem(s, ds.schema());
            if (!why.empty()) {
                std::size_t k = 0;
                while (k + 1 < ds.shard_count() && ds.shard(k + 1).header().first_record <= i) ++k;
                problem(dir + ": " + ds.shard(k).name() + ": record " + std::to_string(i - ds.shard(k).header().first_record) +
                        " (dataset index " + std::to_string(i) + "): " + why);
            }
        } catch (const std::exception& e) {
            problem(e.what());
        }
        ++r.records_checked;
    }
    return r;
}

}  // namespace shardpack
