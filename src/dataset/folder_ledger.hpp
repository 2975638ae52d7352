// DIR/.shardpack: the mark that a folder is a shardpack dataset folder, and the ledger of the
// shards a build put there that the current manifest does not name. It is written when a build
// first writes into the folder, and at every publish:
//
//   #shardpack-folder<TAB>1
//   retained<TAB>shard-...spk    named by an earlier manifest; kept for readers that read it
//   pending<TAB>shard-...spk     moved in by a publish that may not have completed
//   (shard tables, shards-<hash>.spt, are listed the same way as shards)
//
// A build removes a shard only when this ledger or a manifest it wrote names it, and only when
// neither the current manifest nor the new one does: so the shards of the manifest before the
// current one stay until the next build (see formats/shardpack-v1.md, 13.6).
#pragma once
#include <optional>
#include <set>
#include <string>

namespace shardpack {

class output_folder;

struct folder_ledger {
    std::set<std::string> retained;
    std::set<std::string> pending;

    static constexpr const char* file_name = ".shardpack";

    // Nothing when there is no ledger, or the file there is not one (a link, another format).
    static std::optional<folder_ledger> load(const output_folder& folder);
    static std::optional<folder_ledger> load(const std::string& dir);
    static std::optional<folder_ledger> parse(const std::string& text);
    std::string text() const;
    void store(const output_folder& folder) const;  // atomically, durably
};

}  // namespace shardpack
