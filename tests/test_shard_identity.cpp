// A shard file replaced by another valid shard (issue #30, item 1): the listing names each
// shard's trailer checksum ("index_xxh3", format 1.6, spec 13.3 and 13.8), and a reader refuses a
// file whose checksum differs at every shard open, eager or lazy, whatever the I/O mode, before
// any of its records is returned. Every writer path lists it; older listings read as before.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>

#include "inspect/dataset_verifier.hpp"
#include "shardpack/detail/shard_table.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

detail::json read_manifest(const std::string& dir) { return detail::json::parse(read_file(dir + "/manifest.json")); }

// Raw records, one a shard: every shard of `dir` has the same size, number, first record and
// schema as in a twin written with `other_pixels` (every 5th label pixel ignored), but other
// content.
void write_shards(const std::string& dir, bool table, bool other_pixels) {
    synthetic_options o;
    o.records = 6;
    o.codec = record_codec::none;
    o.width = 32;
    o.height = 24;
    o.shard_size = 4096;  // the least: one record (5 KiB) a shard
    o.shard_table_above = table ? 0 : dataset_writer_options{}.shard_table_above;
    o.ignore_every = other_pixels ? 5 : 0;
    write_synthetic(dir, o);
}

// Replaces (a new file renamed over the name, as a sync tool does) `dir`'s shard k by the twin's.
void replace_shard(const std::string& dir, const std::string& twin, std::size_t k) {
    const auto a = dataset::open(dir), b = dataset::open(twin);
    const std::string bytes = read_file(twin + "/" + b.shard_name(k));
    REQUIRE(bytes.size() == a.shard_bytes(k));
    REQUIRE(bytes != read_file(dir + "/" + a.shard_name(k)));
    write_file(dir + "/.replacement", bytes);
    fs::rename(dir + "/.replacement", dir + "/" + a.shard_name(k));
}

std::uint64_t trailer_checksum(const std::string& path) {
    const std::string b = read_file(path);
    return detail::load_u64(reinterpret_cast<const unsigned char*>(b.data()) + b.size() - 24);
}

// Every shard the manifest (or its table) lists carries index_xxh3, equal to its trailer's checksum.
void require_index_listed(const std::string& dir) {
    const detail::json m = read_manifest(dir);
    const auto ds = dataset::open(dir);
    if (const detail::json* t = m.find("shard_table")) {
        const std::string bytes = read_file(dir + "/" + t->at("file").as_string());
        const auto entries = detail::decode_shard_table(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
        for (std::size_t k = 0; k < entries.size(); ++k) {
            REQUIRE(entries[k].has_index_hash);
            REQUIRE(entries[k].index_hash == trailer_checksum(dir + "/" + ds.shard_name(k)));
        }
        return;
    }
    const auto& shards = m.at("shards").as_array();
    REQUIRE(shards.size() == ds.shard_count());
    for (std::size_t k = 0; k < shards.size(); ++k)
        REQUIRE(shards[k].at("index_xxh3").as_string() ==
                detail::hex16(trailer_checksum(dir + "/" + shards[k].at("file").as_string())));
}

// The listing as an older writer (1.5 and before) wrote it: no index_xxh3, 24-byte table entries.
void strip_index_listing(const std::string& dir) {
    detail::json m = read_manifest(dir);
    if (const detail::json* t = m.find("shard_table")) {
        const std::string name = t->at("file").as_string();
        const std::string bytes = read_file(dir + "/" + name);
        auto entries = detail::decode_shard_table(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
        for (auto& e : entries) e.has_index_hash = false;
        const std::string old = detail::encode_shard_table(entries);
        REQUIRE(old.size() == 32 + 24 * entries.size());
        write_file(dir + "/" + name, old);
        detail::json nt = *t;
        nt.set("bytes", std::uint64_t(old.size()));
        nt.set("xxh3", detail::hex16(XXH3_64bits(old.data(), old.size())));
        m.set("shard_table", nt);
    } else {
        detail::json shards = detail::json::array();
        for (const auto& e : m.at("shards").as_array()) {
            detail::json kept = detail::json::object();
            for (const auto& [key, value] : e.as_object())
                if (key != "index_xxh3") kept.set(key, value);
            shards.push(kept);
        }
        m.set("shards", shards);
    }
    write_file(dir + "/manifest.json", m.dump());
}

const char* const not_listed = "is not the file the manifest lists";

}  // namespace

TEST_CASE("the golden 1.6 shard table matches its test vector in the spec byte for byte", "[identity][golden]") {
    temp_dir dir("identity-golden");
    write_golden_tiny_dataset(dir.str(), 0);  // the golden tiny shard (spec 16), listed in a table
    const detail::json m = read_manifest(dir.str());
    REQUIRE(m.at("format_version").as_string() == "1.2");  // 1.6 changes no format_version (spec 15)
    const detail::json& t = m.at("shard_table");
    const std::string golden = parse_hex_dump(read_file(std::string(SHARDPACK_TEST_FILES) + "/golden/shard_table_index.hex"));
    REQUIRE(golden.size() == 64);
    const std::string hash = detail::hex16(XXH3_64bits(golden.data(), golden.size()));
    REQUIRE(hash == "f658587dc1553912");  // the spec's text (16.9) gives it
    REQUIRE(t.at("file").as_string() == "shards-" + hash + ".spt");
    REQUIRE(t.at("bytes").as_u64() == 64);
    REQUIRE(t.at("xxh3").as_string() == hash);
    REQUIRE(read_file(dir / t.at("file").as_string()) == golden);
    REQUIRE(detail::encode_shard_table({{1, 464, 0xd908886912887cfcull, true, 0xcdc85ed17812c77aull}}) == golden);
    REQUIRE(trailer_checksum(dir / "shard-00000-d908886912887cfc.spk") == 0xcdc85ed17812c77aull);
    const auto ds = dataset::open(dir.str());
    REQUIRE(ds.at(0).key() == "a.png");
    REQUIRE(verify_dataset(dir.str()).ok());

    // The same shard in a JSON list (spec 16.3): its entry carries index_xxh3.
    temp_dir listed("identity-golden-list");
    write_golden_tiny_dataset(listed.str());
    REQUIRE(read_manifest(listed.str()).at("shards").as_array()[0].at("index_xxh3").as_string() == "cdc85ed17812c77a");
}

TEST_CASE("a shard replaced after a lazy open by another valid shard is refused at its first read, in every io mode",
          "[identity]") {
    const bool table = GENERATE(false, true);  // a JSON shard list, or a binary shard table (> 4096 shards)
    const io_mode io = GENERATE(io_mode::mmap, io_mode::pread, io_mode::stream, io_mode::blocks);
    CAPTURE(table, int(io));
    temp_dir dir("identity-lazy");
    write_shards(dir / "a", table, false);
    write_shards(dir / "b", table, true);
    require_index_listed(dir / "a");

    open_options o;
    o.io = io;
    o.max_open_shards = 1;  // shards past the first are opened when first read
    const auto ds = dataset::open(dir / "a", o);
    REQUIRE(ds.shard_count() == 6);
    const std::size_t k = 3;
    { const auto listed = ds.at(ds.shard_first_record(k)); }  // shard 3 opened once, as listed
    { const auto first = ds.at(0); }  // ... and closed again (one open shard at most)
    replace_shard(dir / "a", dir / "b", k);
    try {
        const auto got = ds.at(ds.shard_first_record(k));
        FAIL("read the replaced shard without an error (key " << std::string(got.key()) << ")");
    } catch (const error& e) {
        const std::string what = e.what();
        INFO(what);
        REQUIRE(what.find(ds.shard_name(k)) != std::string::npos);
        REQUIRE(what.find(not_listed) != std::string::npos);
    }
    // The others still read.
    const auto next = ds.at(ds.shard_first_record(k + 1));
    REQUIRE(next.key() == "images/img_4.png");
}

TEST_CASE("a shard replaced before an eager open is refused at open, and verify reports it as damage naming it",
          "[identity]") {
    const bool table = GENERATE(false, true);
    CAPTURE(table);
    temp_dir dir("identity-eager");
    write_shards(dir / "a", table, false);
    write_shards(dir / "b", table, true);
    const std::string name = dataset::open(dir / "a").shard_name(2);
    replace_shard(dir / "a", dir / "b", 2);
    try {
        dataset::open(dir / "a");
        FAIL("opened a dataset whose shard 2 was replaced");
    } catch (const error& e) {
        const std::string what = e.what();
        INFO(what);
        REQUIRE(what.find(name) != std::string::npos);
        REQUIRE(what.find(not_listed) != std::string::npos);
    }
    const auto r = verify_dataset(dir / "a");
    REQUIRE_FALSE(r.ok());
    bool named = false;
    for (const auto& p : r.problems) named = named || (p.find(name) != std::string::npos && p.find(not_listed) != std::string::npos);
    INFO(r.problems.front());
    REQUIRE(named);
}

TEST_CASE("a listing without index_xxh3 (an older writer's) reads as before, a malformed one is refused", "[identity]") {
    const bool table = GENERATE(false, true);
    CAPTURE(table);
    temp_dir dir("identity-old");
    write_shards(dir / "a", table, false);
    const auto before = dataset::open(dir / "a");
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < before.size(); ++i) keys.push_back(before.at(i).key());
    strip_index_listing(dir / "a");
    open_options o;
    o.max_open_shards = 1;
    const auto old = dataset::open(dir / "a", o);
    REQUIRE(old.size() == keys.size());
    for (std::size_t i = 0; i < old.size(); ++i) REQUIRE(old.at(i).key() == keys[i]);
    REQUIRE(verify_dataset(dir / "a").ok());

    if (!table) {
        write_shards(dir / "c", false, false);
        detail::json m = read_manifest(dir / "c");
        detail::json shards = m.at("shards");
        detail::json e = shards.as_array()[1];
        e.set("index_xxh3", "not hex");
        detail::json rebuilt = detail::json::array();
        for (std::size_t k = 0; k < shards.as_array().size(); ++k) rebuilt.push(k == 1 ? e : shards.as_array()[k]);
        m.set("shards", rebuilt);
        write_file(dir / "c/manifest.json", m.dump());
        try {
            dataset::open(dir / "c", o);
            FAIL("opened a manifest whose index_xxh3 is not hex");
        } catch (const error& x) {
            const std::string what = x.what();
            INFO(what);
            REQUIRE(what.find("shard 1") != std::string::npos);
            REQUIRE(what.find("index_xxh3") != std::string::npos);
        }
    }
}

TEST_CASE("builds, rebuilds that reuse shards and merges list every shard's index_xxh3", "[identity][cli]") {
    sample_fixture f("identity-writers", 12, 40, 30, {"--shard-size", "8KiB", "--label-layout", "index"});
    const std::string out = f.dir / "ds";
    auto r = run_cli(f.build_args(out));
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(dataset::open(out).shard_count() > 2);
    require_index_listed(out);
    const std::string first = read_file(out + "/manifest.json");
    r = run_cli(f.build_args(out));  // every shard reused
    REQUIRE(r.code == 0);
    require_index_listed(out);
    REQUIRE(read_file(out + "/manifest.json") == first);  // deterministic, the new member included

    std::vector<std::string> parts;
    for (int k = 0; k < 2; ++k) {
        parts.push_back(f.dir / ("part-" + std::to_string(k)));
        r = run_cli(f.build_args(parts.back(), {"--partition", std::to_string(k) + "/2"}));
        INFO(r.err);
        REQUIRE(r.code == 0);
        require_index_listed(parts.back());
    }
    for (const char* how : {"hard", "copy"}) {
        const std::string merged = f.dir / (std::string("merged-") + how);
        r = run_cli({"merge", "--out", merged, "--link", how, parts[0], parts[1]});
        INFO(r.err);
        REQUIRE(r.code == 0);
        require_index_listed(merged);
    }
}
