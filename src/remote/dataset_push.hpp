// `shardpack push DIR s3://bucket/prefix`: publishes a verified local dataset to object storage
// so that a reader of the prefix sees the old dataset or the new one, never a mix:
//
//   1. DIR is verified in full (`verify`'s checks); any problem stops the push, nothing is sent.
//   2. The prefix's current manifest.json and ledger (.shardpack, the format of a local folder's)
//      are read, and its objects listed. Shards are content-named (shard-NNNNN-<xxh3>.spk), so a
//      shard already there with the same name and size is the same bytes and is not sent again.
//   3. The ledger is written with the shards about to be sent as `pending` (so that a push that
//      dies leaves nothing that the next push does not remove), then the missing shards are
//      uploaded, then listed again to check their sizes.
//   4. manifest.json is written last (one PUT: S3 replaces an object atomically) and read back.
//   5. The grace rule of local rebuilds: shards named by neither the new manifest nor the one it
//      replaced, and listed in the ledger, are removed; the replaced manifest's shards stay (as
//      `retained`) until the next push, for readers that read that manifest.
// Objects the ledger and the manifests do not name are never removed. One push at a time per
// prefix (S3 has no lock; a second concurrent push can remove shards the first just sent).
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "remote/s3_client.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack::remote {

struct push_result {
    std::string url, content_hash;
    std::uint64_t records = 0, shards = 0;
    std::uint64_t shards_uploaded = 0, bytes_uploaded = 0;
    std::uint64_t shards_present = 0;  // already there, not sent
    std::uint64_t shards_removed = 0;  // beyond the grace rule
    std::uint64_t shards_retained = 0;  // the replaced manifest's, kept until the next push
    std::uint64_t unknown_objects = 0;  // objects under the prefix no manifest or ledger names
    bool manifest_unchanged = false;
    double seconds = 0;
    detail::json report() const;
};

// Throws shardpack::error (data or I/O failure) with the reason; nothing is published then
// (the remote manifest is untouched unless the failure came after its PUT).
push_result push_dataset(const std::string& dir, const std::string& url, s3_client& client,
                         const std::function<void(const std::string&)>& log);

}  // namespace shardpack::remote
