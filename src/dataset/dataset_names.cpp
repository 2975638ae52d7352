#include "dataset/dataset_names.hpp"

#include <array>

namespace shardpack {

namespace {
constexpr std::array<std::string_view, 7> reserved = {"manifest.json", "report.json", "rejected.csv", "fingerprints.tsv",
                                                      ".partial", ".shardpack", ".shardpack.lock"};
// Files replaced through NAME.tmp-PID.
constexpr std::array<std::string_view, 5> replaced = {"manifest.json", "report.json", "rejected.csv", "fingerprints.tsv",
                                                      ".shardpack"};

bool all_digits(std::string_view s) {
    if (s.empty()) return false;
    for (char c : s)
        if (c < '0' || c > '9') return false;
    return true;
}

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }
bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
}  // namespace

bool is_shard_name(std::string_view name) {
    if (!starts_with(name, "shard-") || !ends_with(name, ".spk")) return false;
    const std::string_view middle = name.substr(6, name.size() - 6 - 4);  // NNNNN-HHHHHHHHHHHHHHHH
    const auto dash = middle.find('-');
    if (dash == std::string_view::npos || dash < 5 || !all_digits(middle.substr(0, dash))) return false;
    const std::string_view hash = middle.substr(dash + 1);
    if (hash.size() != 16) return false;
    for (char c : hash)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

bool is_shard_table_name(std::string_view name) {
    if (name.size() != 7 + 16 + 4 || !starts_with(name, "shards-") || !ends_with(name, ".spt")) return false;
    for (char c : name.substr(7, 16))
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

bool is_temporary_name(std::string_view name) {
    if (starts_with(name, ".tmp-")) {
        const std::string_view rest = name.substr(5);
        const auto dash = rest.find('-');
        if (dash == std::string_view::npos || !all_digits(rest.substr(0, dash))) return false;
        const std::string_view what = rest.substr(dash + 1);
        if (what == "fingerprints.tsv") return true;
        return starts_with(what, "shard-") && ends_with(what, ".spk") && all_digits(what.substr(6, what.size() - 10));
    }
    // A shard table written atomically: shards-<hash>.spt.tmp-P.
    if (const auto at = name.find(".tmp-"); at != std::string_view::npos && is_shard_table_name(name.substr(0, at)) &&
                                            all_digits(name.substr(at + 5)))
        return true;
    for (std::string_view base : replaced) {
        if (starts_with(name, base) && name.substr(base.size(), 5) == ".tmp-" && all_digits(name.substr(base.size() + 5)))
            return true;
    }
    return false;
}

bool is_reserved_name(std::string_view name) {
    for (std::string_view r : reserved)
        if (name == r) return true;
    return false;
}

}  // namespace shardpack
