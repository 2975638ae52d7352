// `shardpack verify` finds every kind of damage: any flipped byte (padding included), any
// truncation, a missing or extra shard, an edited or truncated manifest.
#include <catch2/catch.hpp>

#include <filesystem>

#include "inspect/dataset_inspector.hpp"
#include "inspect/dataset_verifier.hpp"
#include "shardpack/reader.hpp"
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
    for (auto codec : {record_codec::zstd, record_codec::zstd_record, record_codec::none}) {
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
    // What a build killed between moving its shards in and renaming the manifest leaves: a shard
    // whose bytes hash to its name. The dataset is whole; verify warns and passes.
    const std::string own_name = "shard-00042-" + fs::path(shards.back()).stem().string().substr(12) + ".spk";
    fs::copy_file(shards.back(), dir / own_name);
    {
        const auto r = verify_dataset(dir.str());
        INFO((r.problems.empty() ? std::string() : r.problems.front()));
        REQUIRE(r.ok());
        REQUIRE(r.warnings.size() == 1);
        REQUIRE_THAT(r.warnings.front(), Catch::Contains("extra shard " + own_name) && Catch::Contains("interrupted build"));
    }
    fs::remove(dir / own_name);

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

// Found by tests/fuzz/fuzz_manifest. The reader ignores a manifest's content_hash and xxh3
// (the spec's test vector has no content_hash); verify threw "JSON: missing field" from the
// middle of its checks instead of reporting the damage and going on to check the records.
TEST_CASE("verify reports missing or mistyped manifest hashes as damage and still checks every record", "[verify]") {
    temp_dir dir("vnohash");
    auto o = small();
    o.records = 12;
    o.shard_size = 4096;
    write_synthetic(dir.str(), o);
    const std::string manifest = read_file(dir / "manifest.json");
    auto strip = [&](bool content_hash, bool xxh3, bool as_numbers) {
        auto m = detail::json::parse(manifest);
        detail::json edited = detail::json::object(), shards = detail::json::array();
        for (const auto& [key, value] : m.as_object())
            if (key == "content_hash") {
                if (!content_hash) edited.set(key, as_numbers ? detail::json(42) : value);
            } else if (key != "shards") {
                edited.set(key, value);
            }
        for (const auto& s : m.at("shards").as_array()) {
            detail::json e = detail::json::object();
            for (const auto& [key, value] : s.as_object())
                if (key != "xxh3" || !xxh3) e.set(key, key == "xxh3" && as_numbers ? detail::json(7) : value);
            shards.push(e);
        }
        edited.set("shards", shards);
        write_file(dir / "manifest.json", edited.dump());
    };
    for (bool as_numbers : {false, true}) {
        strip(!as_numbers, !as_numbers, as_numbers);
        REQUIRE_NOTHROW(dataset::open(dir.str()));  // the reader does not need them
        verify_result r;
        REQUIRE_NOTHROW(r = verify_dataset(dir.str()));
        REQUIRE_FALSE(r.ok());
        REQUIRE(r.records_checked == 12);
        REQUIRE(r.shards_checked >= 2);
        std::string all;
        for (const auto& p : r.problems) all += p + "\n";
        INFO(all);
        REQUIRE_THAT(all, Catch::Contains("manifest.json") && Catch::Contains("\"content_hash\"") &&
                              Catch::Contains("\"xxh3\""));
    }
    write_file(dir / "manifest.json", manifest);
    REQUIRE(verify_dataset(dir.str()).ok());
}

// Found by tests/fuzz/fuzz_manifest (an ASan heap-use-after-free): `shardpack inspect` printed a
// class colour from the manifest as a[0], a[1], a[2] whatever the array's length.
TEST_CASE("inspect refuses a manifest class colour that is not three values, without reading past it", "[verify][inspect]") {
    temp_dir dir("icolour");
    write_synthetic(dir.str(), small());
    const std::string manifest = read_file(dir / "manifest.json");
    REQUIRE_THAT(format_inspection(inspect_dataset(dir.str())), Catch::Contains("class1"));
    for (const char* colour : {"[]", "[1]", "[1, 2]", "[1, 2, 3, 4]"}) {
        auto m = detail::json::parse(manifest);
        detail::json classes = detail::json::array();
        for (const auto& c : m.at("classes").as_array()) {
            detail::json e = c;
            e.set("color", detail::json::parse(colour));
            classes.push(e);
        }
        m.set("classes", classes);
        write_file(dir / "manifest.json", m.dump());
        INFO(colour);
        REQUIRE_THROWS_WITH(format_inspection(inspect_dataset(dir.str())), Catch::Contains("values, not 3"));
    }
}
