// `shardpack verify` finds every kind of damage: any flipped byte (padding included), any
// truncation, a missing or extra shard, an edited or truncated manifest.
#include <catch2/catch.hpp>

#include <filesystem>

#include "inspect/dataset_verifier.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {
synthetic_options small() {
    synthetic_options o;
    o.records = 3;
    o.width = 5;
    o.height = 3;
    o.classes = 3;
    return o;
}
}  // namespace

TEST_CASE("verify detects a flip of every byte of a shard, padding included", "[verify]") {
    for (auto codec : {record_codec::zstd, record_codec::none}) {
        temp_dir dir("vflip");
        auto o = small();
        o.codec = codec;
        write_synthetic(dir.str(), o);
        REQUIRE(verify_dataset(dir.str()).ok());
        const std::string shard = only_shard(dir.str());
        const std::string bytes = read_file(shard);
        for (std::size_t pos = 0; pos < bytes.size(); ++pos) {
            std::string damaged = bytes;
            damaged[pos] = static_cast<char>(damaged[pos] ^ 0x5A);
            write_file(shard, damaged);
            INFO("byte " << pos << " of " << bytes.size());
            REQUIRE_FALSE(verify_dataset(dir.str()).ok());
        }
        write_file(shard, bytes);
        REQUIRE(verify_dataset(dir.str()).ok());
    }
}

TEST_CASE("verify detects truncation, missing and extra shards, and manifest damage", "[verify]") {
    temp_dir dir("vmisc");
    auto o = small();
    o.records = 12;
    o.shard_size = 4096;
    write_synthetic(dir.str(), o);
    REQUIRE(verify_dataset(dir.str()).ok());
    std::vector<std::string> shards;
    for (const auto& e : fs::directory_iterator(dir.str()))
        if (e.path().extension() == ".spk") shards.push_back(e.path().string());
    std::sort(shards.begin(), shards.end());
    REQUIRE(shards.size() >= 2);
    const std::string manifest = read_file(dir / "manifest.json");
    const std::string last = read_file(shards.back());

    auto problems_mention = [&](const std::string& what) {
        const auto r = verify_dataset(dir.str());
        REQUIRE_FALSE(r.ok());
        bool found = false;
        for (const auto& p : r.problems) found |= p.find(what) != std::string::npos;
        INFO(r.problems.front());
        REQUIRE(found);
    };
    const std::string last_name = fs::path(shards.back()).filename().string();

    write_file(shards.back(), last.substr(0, last.size() - 7));
    problems_mention(last_name);
    fs::remove(shards.back());
    problems_mention(last_name);
    write_file(shards.back(), last);
    REQUIRE(verify_dataset(dir.str()).ok());

    fs::copy_file(shards.back(), dir / "shard-00042-0123456789abcdef.spk");
    problems_mention("extra shard shard-00042");
    fs::remove(dir / "shard-00042-0123456789abcdef.spk");

    write_file(dir / "manifest.json", manifest.substr(0, manifest.size() - 10));
    problems_mention("manifest.json");
    std::string edited = manifest;
    const auto at = edited.find("\"content_hash\": \"") + 17;
    edited[at] = edited[at] == '0' ? '1' : '0';
    write_file(dir / "manifest.json", edited);
    problems_mention("content hash");
    edited = manifest;
    const auto x = edited.find("\"xxh3\": \"") + 9;
    edited[x] = edited[x] == '0' ? '1' : '0';
    write_file(dir / "manifest.json", edited);
    problems_mention("differs from the manifest");
    write_file(dir / "manifest.json", manifest);
    REQUIRE(verify_dataset(dir.str()).ok());
}
