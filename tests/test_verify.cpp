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
// class color from the manifest as a[0], a[1], a[2] whatever the array's length. It now shows
// the shards' classes and flags the manifest's copy as contradicting them.
TEST_CASE("inspect shows the shards' class colors when the manifest's are not three values, without reading past it", "[verify][inspect]") {
    temp_dir dir("icolor");
    write_synthetic(dir.str(), small());
    const std::string manifest = read_file(dir / "manifest.json");
    REQUIRE_THAT(format_inspection(inspect_dataset(dir.str())), Catch::Contains("class1"));
    for (const char* color : {"[]", "[1]", "[1, 2]", "[1, 2, 3, 4]"}) {
        auto m = detail::json::parse(manifest);
        detail::json classes = detail::json::array();
        for (const auto& c : m.at("classes").as_array()) {
            detail::json e = c;
            e.set("color", detail::json::parse(color));
            classes.push(e);
        }
        m.set("classes", classes);
        write_file(dir / "manifest.json", m.dump());
        INFO(color);
        const std::string text = format_inspection(inspect_dataset(dir.str()));
        REQUIRE_THAT(text, Catch::Contains("contradicts the shards") && Catch::Contains("classes[0].color") &&
                               Catch::Contains("class1") && Catch::Contains("(1,2,3)"));
        REQUIRE_FALSE(verify_dataset(dir.str()).ok());
    }
}

TEST_CASE("verify flags a manifest schema or class copy that contradicts the shards, and inspect shows the shards'", "[verify][inspect]") {
    temp_dir dir("vschema");
    write_synthetic(dir.str(), small());
    const std::string manifest = read_file(dir / "manifest.json");
    REQUIRE(verify_dataset(dir.str()).ok());

    auto edited = [&](auto edit) {
        auto m = detail::json::parse(manifest);
        edit(m);
        write_file(dir / "manifest.json", m.dump());
    };
    auto problems_of = [&] {
        std::string all;
        for (const auto& p : verify_dataset(dir.str()).problems) all += p + "\n";
        return all;
    };

    SECTION("image channels and order") {
        edited([](detail::json& m) {
            detail::json schema = m.at("schema");
            detail::json image = schema.at("image");
            image.set("channels", 1);
            image.set("channel_order", "L");
            schema.set("image", image);
            m.set("schema", schema);
        });
        const std::string p = problems_of();
        REQUIRE_THAT(p, Catch::Contains("schema.image.channels is 1, the shards say 3") &&
                            Catch::Contains("schema.image.channel_order is \"L\", the shards say \"RGB\""));
        const std::string text = format_inspection(inspect_dataset(dir.str()));
        REQUIRE_THAT(text, Catch::Contains("contradicts the shards") && Catch::Contains("image        RGB uint8"));
        REQUIRE(inspect_dataset(dir.str()).at("schema").at("image").at("channels").as_u64() == 3);
    }
    SECTION("a class renamed, a class missing, the class count") {
        edited([](detail::json& m) {
            detail::json classes = detail::json::array();
            detail::json first = m.at("classes").as_array()[0];
            first.set("name", "ocean");
            classes.push(first);
            classes.push(m.at("classes").as_array()[1]);
            m.set("classes", classes);
            detail::json schema = m.at("schema");
            schema.set("classes", 2);
            m.set("schema", schema);
        });
        const std::string p = problems_of();
        REQUIRE_THAT(p, Catch::Contains("classes has 2 entries, the shards 3") && Catch::Contains("schema.classes is 2, the shards say 3"));
        edited([](detail::json& m) {
            detail::json classes = m.at("classes");
            detail::json renamed = detail::json::array();
            for (std::size_t i = 0; i < classes.as_array().size(); ++i) {
                detail::json c = classes.as_array()[i];
                if (i == 2) c.set("name", "ocean");
                renamed.push(c);
            }
            m.set("classes", renamed);
        });
        REQUIRE_THAT(problems_of(), Catch::Contains("classes[2].name is \"ocean\", the shards say \"class2\""));
        REQUIRE_THAT(format_inspection(inspect_dataset(dir.str())), Catch::Contains("class2") && !Catch::Contains("  ocean"));
    }
    SECTION("the schema copy missing") {
        edited([](detail::json& m) {
            detail::json out = detail::json::object();
            for (const auto& [k, v] : m.as_object())
                if (k != "schema") out.set(k, v);
            m = out;
        });
        REQUIRE_THAT(problems_of(), Catch::Contains("manifest.json: schema is missing"));
    }
    SECTION("members reordered or added are no contradiction") {
        edited([](detail::json& m) {
            detail::json schema = detail::json::object();
            const auto& members = m.at("schema").as_object();
            for (auto it = members.rbegin(); it != members.rend(); ++it) schema.set(it->first, it->second);
            schema.set("added_by_a_newer_writer", true);
            m.set("schema", schema);
        });
        const auto v = verify_dataset(dir.str());
        for (const auto& p : v.problems) UNSCOPED_INFO(p);
        REQUIRE(v.ok());
        REQUIRE(inspect_dataset(dir.str()).find("manifest_contradictions") == nullptr);
    }
}
