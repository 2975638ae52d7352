#include "dataset/folder_ledger.hpp"

#include <sstream>

#include "dataset/dataset_names.hpp"
#include "io/output_folder.hpp"

namespace shardpack {

namespace {
constexpr const char* magic = "#shardpack-folder\t1";
// A ledger names at most the shards of a few builds; anything larger is not one.
constexpr std::size_t max_ledger_bytes = std::size_t(64) << 20;
}  // namespace

std::optional<folder_ledger> folder_ledger::parse(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    if (!std::getline(in, line) || line != magic) return std::nullopt;
    folder_ledger l;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        const auto tab = line.find('\t');
        if (tab == std::string::npos) return std::nullopt;
        const std::string what = line.substr(0, tab), name = line.substr(tab + 1);
        // Only shard and shard table names: a ledger can never make a build remove anything else.
        if (!is_shard_name(name) && !is_shard_table_name(name)) return std::nullopt;
        if (what == "retained") l.retained.insert(name);
        else if (what == "pending") l.pending.insert(name);
        else return std::nullopt;
    }
    return l;
}

std::optional<folder_ledger> folder_ledger::load(const output_folder& folder) {
    if (folder.kind_of(file_name) != output_folder::kind::file) return std::nullopt;
    const auto text = folder.read_small(file_name, max_ledger_bytes);
    return text ? parse(*text) : std::nullopt;
}

std::optional<folder_ledger> folder_ledger::load(const std::string& dir) {
    try {
        return load(*output_folder::open(dir, false, true));
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::string folder_ledger::text() const {
    std::string out = std::string(magic) +
                      "\n# This folder is a shardpack dataset. shardpack writes here, and removes only its own files:"
                      "\n# shards named by its manifests or listed below, and its temporaries.\n";
    for (const auto& n : retained) out += "retained\t" + n + "\n";
    for (const auto& n : pending) out += "pending\t" + n + "\n";
    return out;
}

void folder_ledger::store(const output_folder& folder) const { folder.write_atomically(file_name, text()); }

}  // namespace shardpack
