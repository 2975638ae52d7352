// The binary shard table (format 1.2, spec 13.8): the golden vector, what the writer emits and
// when, that a dataset reads the same with a table as with a JSON shard list, rebuilds over a
// table, damaged and truncated tables, and 400,000 shards opened in a fresh process (time, RSS).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

#include "inspect/dataset_verifier.hpp"
#include "shardpack/detail/shard_table.hpp"
#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

detail::json read_manifest(const std::string& dir) {
    return detail::json::parse(read_file(dir + "/manifest.json"));
}

// The manifest with its shard_table member pointing at these table bytes (written under the
// table's current name), so that a forged table passes the size and hash checks.
void replace_table(const std::string& dir, const std::string& bytes) {
    detail::json m = read_manifest(dir);
    detail::json t = m.at("shard_table");
    write_file(dir + "/" + t.at("file").as_string(), bytes);
    t.set("bytes", std::uint64_t(bytes.size()));
    t.set("xxh3", detail::hex16(XXH3_64bits(bytes.data(), bytes.size())));
    m.set("shard_table", t);
    write_file(dir + "/manifest.json", m.dump());
}

std::string open_error(const std::string& dir) {
    try {
        dataset::open(dir);
    } catch (const error& e) {
        return e.what();
    }
    return "(opened)";
}

}  // namespace

// A 1.2 to 1.5 writer's table (24-byte entries); a 1.6 writer's is test_shard_identity's golden.
TEST_CASE("the golden shard table matches its test vector in the spec byte for byte", "[shard_table][golden]") {
    temp_dir dir("goldentable");
    write_golden_tiny_dataset(dir.str(), 0);  // the golden tiny shard (spec 16), listed in a table
    const std::string golden = parse_hex_dump(read_file(std::string(SHARDPACK_TEST_FILES) + "/golden/shard_table.hex"));
    REQUIRE(golden.size() == 56);
    REQUIRE(detail::encode_shard_table({{1, 464, 0xd908886912887cfcull}}) == golden);  // no index hash: 1.2's layout
    replace_table(dir.str(), golden);
    const detail::json m = read_manifest(dir.str());
    REQUIRE(m.at("format_version").as_string() == "1.2");
    REQUIRE(m.find("shards") == nullptr);
    const detail::json& t = m.at("shard_table");
    const std::string hash = detail::hex16(XXH3_64bits(golden.data(), golden.size()));
    REQUIRE(t.at("bytes").as_u64() == 56);
    REQUIRE(t.at("xxh3").as_string() == hash);
    REQUIRE(read_file(dir / t.at("file").as_string()) == golden);
    // The spec's text gives the table's hash; keep it in step.
    REQUIRE(hash == "12a5db2463b6bb48");

    auto ds = dataset::open(dir.str());
    REQUIRE(ds.shard_table_file() == t.at("file").as_string());
    REQUIRE(ds.shard_count() == 1);
    REQUIRE(ds.shard_name(0) == "shard-00000-d908886912887cfc.spk");
    REQUIRE(ds.shard_bytes(0) == 464);
    REQUIRE(ds.at(0).key() == "a.png");
    REQUIRE(verify_dataset(dir.str()).ok());
}

TEST_CASE("a dataset with a shard table reads as the same dataset with a JSON shard list", "[shard_table]") {
    temp_dir listed("tablejson"), tabled("tablebin");
    synthetic_options o;
    o.records = 40;
    o.shard_size = 4096;
    const auto samples = write_synthetic(listed.str(), o);
    o.shard_table_above = 0;
    write_synthetic(tabled.str(), o);
    REQUIRE(read_manifest(listed.str()).find("shard_table") == nullptr);
    REQUIRE(read_manifest(tabled.str()).find("shards") == nullptr);
    const auto a = dataset::open(listed.str());
    open_options lazy;
    lazy.max_open_shards = 2;  // shards opened on first read, at most 2 open
    const auto b = dataset::open(tabled.str(), lazy);
    REQUIRE(a.shard_count() > 4);
    REQUIRE(b.shard_count() == a.shard_count());
    REQUIRE(b.content_hash() == a.content_hash());
    REQUIRE(a.shard_table_file().empty());
    for (std::size_t k = 0; k < a.shard_count(); ++k) {
        REQUIRE(b.shard_name(k) == a.shard_name(k));
        REQUIRE(b.shard_first_record(k) == a.shard_first_record(k));
        REQUIRE(b.shard_records(k) == a.shard_records(k));
        REQUIRE(b.shard_bytes(k) == a.shard_bytes(k));
        std::uint64_t ha = 0, hb = 0;
        REQUIRE(a.listed_shard_hash(k, ha));
        REQUIRE(b.listed_shard_hash(k, hb));
        REQUIRE(ha == hb);
    }
    for (std::size_t i = 0; i < samples.size(); ++i) {
        const auto sa = a.at(i), sb = b.at(i);
        REQUIRE(sb.key() == samples[i].key);
        REQUIRE(std::equal(sa.image().begin(), sa.image().end(), sb.image().begin(), sb.image().end()));
    }
    REQUIRE(b.open_shard_count() <= 2);
    // Neither keeps the shard list as JSON.
    REQUIRE(a.manifest().find("shards") == nullptr);
    REQUIRE(b.manifest().find("shards") == nullptr);
    REQUIRE(verify_dataset(listed.str()).ok());
    const auto v = verify_dataset(tabled.str());
    INFO((v.problems.empty() ? std::string() : v.problems.front()));
    REQUIRE(v.ok());
    REQUIRE(v.shards_checked == a.shard_count());

    // verify finds a shard whose bytes do not match the table's hash.
    const std::string victim = tabled / b.shard_name(1);
    std::string bytes = read_file(victim);
    bytes[bytes.size() / 2 - 7] ^= 0x40;  // a padding byte: no reader check covers it, the whole-file hash does
    write_file(victim, bytes);
    const auto damaged = verify_dataset(tabled.str());
    REQUIRE_FALSE(damaged.ok());
    std::string all;
    for (const auto& p : damaged.problems) all += p + "\n";
    REQUIRE_THAT(all, Catch::Contains(b.shard_name(1)));
}

TEST_CASE("a rebuild over a shard table keeps the replaced table for one build, then removes it", "[shard_table]") {
    temp_dir dir("tablerebuild");
    synthetic_options o;
    o.shard_size = 4096;
    o.shard_table_above = 0;
    auto table_of = [&] { return read_manifest(dir.str()).at("shard_table").at("file").as_string(); };
    o.records = 30;
    write_synthetic(dir.str(), o);
    const std::string first = table_of();
    const auto before = dataset::open(dir.str());  // a reader of the first manifest
    o.records = 31;
    write_synthetic(dir.str(), o);
    const std::string second = table_of();
    REQUIRE(second != first);
    REQUIRE(fs::exists(dir / first));  // the previous manifest's table stays one build
    REQUIRE_THAT(read_file(dir / ".shardpack"), Catch::Contains("retained\t" + first));
    REQUIRE(dataset::open(dir.str()).size() == 31);
    REQUIRE(before.at(29).key() == dataset::open(dir.str()).at(29).key());
    o.records = 32;
    write_synthetic(dir.str(), o);
    REQUIRE_FALSE(fs::exists(dir / first));
    REQUIRE(fs::exists(dir / second));
    REQUIRE(fs::exists(dir / table_of()));
    const auto v = verify_dataset(dir.str());
    REQUIRE(v.ok());
    REQUIRE(dataset::open(dir.str()).size() == 32);
    // Back to a JSON list: the tables go like shards do.
    o.shard_table_above = 4096;
    write_synthetic(dir.str(), o);
    write_synthetic(dir.str(), o);
    for (const auto& e : fs::directory_iterator(dir.str())) REQUIRE(e.path().extension() != ".spt");
    REQUIRE(read_manifest(dir.str()).at("format_version").as_string() == "1.3");  // segmentation band frames (codec 3)
}

// The writer removes only tables its own ledger lists, by name, never through a link: a user's
// files beside the dataset, near-names and a link named like a table stay through every rebuild.
TEST_CASE("rebuilds over shard tables leave a user's files, near-names and links alone", "[shard_table]") {
    temp_dir dir("tableuser");
    temp_dir elsewhere("tableuser-target");
    synthetic_options o;
    o.shard_size = 4096;
    o.shard_table_above = 0;
    o.records = 30;
    write_synthetic(dir.str(), o);
    write_file(dir / "notes.txt", "mine");
    write_file(dir / "shards-notes.spt", "mine too");
    write_file(dir / "shards-0123456789abcdef.spt", "looks like a table, listed nowhere");
    write_file(elsewhere / "target.txt", "the link's target");
    fs::create_symlink(elsewhere / "target.txt", dir / "shards-fedcba9876543210.spt");
    for (std::uint64_t records : {31, 32, 33}) {
        o.records = records;
        write_synthetic(dir.str(), o);
    }
    o.shard_table_above = 4096;  // back to a JSON list: the writer's own tables go
    write_synthetic(dir.str(), o);
    write_synthetic(dir.str(), o);
    REQUIRE(read_file(dir / "notes.txt") == "mine");
    REQUIRE(read_file(dir / "shards-notes.spt") == "mine too");
    REQUIRE(read_file(dir / "shards-0123456789abcdef.spt") == "looks like a table, listed nowhere");
    REQUIRE(fs::is_symlink(dir / "shards-fedcba9876543210.spt"));
    REQUIRE(read_file(elsewhere / "target.txt") == "the link's target");
    REQUIRE(dataset::open(dir.str()).size() == 33);
}

TEST_CASE("a damaged or truncated shard table is refused, naming the file and the reason", "[shard_table]") {
    temp_dir dir("tabledamage");
    synthetic_options o;
    o.records = 12;
    o.shard_size = 4096;
    o.shard_table_above = 0;
    write_synthetic(dir.str(), o);
    const std::string manifest = read_file(dir / "manifest.json");
    const detail::json m = detail::json::parse(manifest);
    const std::string name = m.at("shard_table").at("file").as_string();
    const std::string table = read_file(dir / name);
    const std::size_t shards = (table.size() - 32) / detail::shard_table_entry_size;
    REQUIRE(shards >= 3);
    REQUIRE(open_error(dir.str()) == "(opened)");
    auto restore = [&] {
        write_file(dir / "manifest.json", manifest);
        write_file(dir / name, table);
    };
    auto refused = [&](const std::string& why, std::initializer_list<std::string> words) {
        const std::string e = open_error(dir.str());
        INFO(why << ": " << e);
        REQUIRE_THAT(e, Catch::StartsWith(dir.str() + ": "));
        for (const auto& w : words) REQUIRE_THAT(e, Catch::Contains(w));
        restore();
    };

    // Damage the manifest's size and hash find.
    write_file(dir / name, table.substr(0, table.size() - 5));
    refused("truncated", {name, "bytes, the manifest says", "truncated"});
    write_file(dir / name, std::string());
    refused("empty", {name, "0 bytes"});
    for (std::size_t at : {std::size_t(3), std::size_t(17), table.size() / 2, table.size() - 1}) {
        std::string t = table;
        t[at] ^= 0x10;
        write_file(dir / name, t);
        refused("flipped byte " + std::to_string(at), {name, "XXH3-64", "damaged"});
    }
    fs::remove(dir / name);
    refused("missing", {name});
    fs::remove(dir / name);
    fs::create_directory(dir / name);
    {
        const std::string e = open_error(dir.str());
        INFO(e);
        REQUIRE_THAT(e, Catch::StartsWith(dir.str() + ": ") && Catch::Contains(name));
    }
    fs::remove(dir / name);
    restore();

    // Tables whose manifest agrees with them (forged, or written by a broken writer).
    auto forged = [&](std::size_t at, std::uint64_t value, int width) {
        std::string t = table;
        auto* p = reinterpret_cast<unsigned char*>(&t[0]);
        if (width == 2) detail::store_u16(p + at, std::uint16_t(value));
        else if (width == 4) detail::store_u32(p + at, std::uint32_t(value));
        else detail::store_u64(p + at, value);
        return t;
    };
    replace_table(dir.str(), "\x89SPK\r\n\x1a\n" + table.substr(8));
    refused("shard magic", {name, "not a shard table"});
    replace_table(dir.str(), table.substr(0, 20));
    refused("short", {name, "shorter than the 32-byte header"});
    replace_table(dir.str(), forged(8, 2, 2));
    refused("major 2", {name, "version 2.6 is not supported"});
    replace_table(dir.str(), forged(12, 20, 4));
    refused("entry size", {name, "entry size 20"});
    replace_table(dir.str(), forged(16, shards + 1, 8));
    refused("count too large", {name, "entries of 32 bytes make"});
    replace_table(dir.str(), forged(16, 0, 8));
    refused("no shards", {name, "lists no shards"});
    replace_table(dir.str(), forged(16, std::uint64_t(1) << 40, 8));
    refused("huge count", {name, "more than the reader's limit"});
    replace_table(dir.str(), table.substr(0, 32 + detail::shard_table_entry_size * (shards - 1)));
    refused("last entry missing", {name});  // header count disagrees with the size
    replace_table(dir.str(), forged(32, 1000, 8));  // shard 0's record count
    refused("records", {"records"});
    replace_table(dir.str(), forged(32 + 8, 999999, 8));  // shard 0's size
    refused("bytes", {"is ", "bytes, the manifest says 999999"});
    // A size its records cannot fit in: refused before any shard is opened, naming the shard.
    replace_table(dir.str(), forged(32 + 8, 99, 8));
    refused("bytes too few", {"shard 0 (\"shard-00000-", "records in 99 bytes: a shard holds at most (bytes - 104) / 40 records"});
    // Shard 0's index_xxh3 (1.6): the file at its name is not the shard the table lists.
    replace_table(dir.str(), forged(32 + 24, 0x1234, 8));
    refused("index_xxh3", {"shard-00000-", "is not the file the manifest lists", "0000000000001234"});
    // Shard 1's hash, its name: the manifest's content_hash (spec 13.2) no longer matches; without
    // that member, the shard it now names is missing.
    replace_table(dir.str(), forged(32 + detail::shard_table_entry_size + 16, 0x1234, 8));
    refused("hash", {"content_hash", "is not the content hash of the shards it names"});
    replace_table(dir.str(), forged(32 + detail::shard_table_entry_size + 16, 0x1234, 8));
    {
        detail::json without = detail::json::parse(read_file(dir / "manifest.json"));
        REQUIRE(without.find("content_hash") != nullptr);
        detail::json copy = detail::json::object();
        for (const auto& [k, v] : without.as_object())
            if (k != "content_hash") copy.set(k, v);
        write_file(dir / "manifest.json", copy.dump());
    }
    refused("hash, no content_hash", {"shard-00001-0000000000001234.spk"});

    // The manifest's member itself.
    detail::json bad = m;
    bad.set("shards", detail::json::array());
    write_file(dir / "manifest.json", bad.dump());
    refused("both lists", {"both \"shards\" and \"shard_table\""});
    detail::json t = m.at("shard_table");
    t.set("bytes", std::uint64_t(1) << 40);
    bad = m;
    bad.set("shard_table", t);
    write_file(dir / "manifest.json", bad.dump());
    refused("too large", {name, "more than a shard table may have"});
    t = m.at("shard_table");
    t.set("file", "../" + name);
    bad = m;
    bad.set("shard_table", t);
    write_file(dir / "manifest.json", bad.dump());
    refused("path", {"is not a plain file name"});
    t = m.at("shard_table");
    t.set("xxh3", "ABC");
    bad = m;
    bad.set("shard_table", t);
    write_file(dir / "manifest.json", bad.dump());
    refused("hash text", {"\"xxh3\" is not 16 lowercase hex digits"});
    REQUIRE(open_error(dir.str()) == "(opened)");
}

// The tests' folder removal (temp_dir, used for this file's 400,000 shards) removes links and
// never what they point at: a folder of a user's files beside it stays as it was. Instant.
TEST_CASE("removing a test folder removes its links, never a user's file behind them", "[shard_table]") {
    temp_dir users("users");
    users.write("keep.txt", "a user's file");
    std::string tree;
    {
        temp_dir t("tree");
        tree = t.str();
        t.write("a/b/deep", "y");
        for (int i = 0; i < 20; ++i) t.write("f" + std::to_string(i), "x");
        std::filesystem::create_directory_symlink(users.str(), t / "a/link_to_users");
        std::filesystem::create_symlink(users / "keep.txt", t / "file_link");
        REQUIRE(t.remove() >= 0.0);
    }
    CHECK_FALSE(std::filesystem::exists(std::filesystem::symlink_status(tree)));
    std::vector<std::string> left;
    for (const auto& e : std::filesystem::directory_iterator(users.str())) left.push_back(e.path().filename().string());
    CHECK(left == std::vector<std::string>{"keep.txt"});
    CHECK(read_file(users / "keep.txt") == "a user's file");
}

// Issue #16: 400,000 shards open in under a second and 200 MB, under the default
// vm.max_map_count. make_many_shards writes 400,000 one-record shards (about 50-60 s on a
// 2-core machine, 1.6 GB of 4 KiB blocks); bench_open then opens the dataset in a fresh process
// and reads 10,000 records spread over it (the open itself: ~0.1-0.3 s); the folder is then
// removed, and the time it took is printed. About 1 minute in all on an idle machine.
// The time bound here is loose (5 s; 20 s under sanitizers) for a loaded CI machine: the 1 s
// target is measured by tools/bench_open (scripts/bench/scaling.md). RSS: 200 MB, not checked
// under AddressSanitizer (its shadow memory and quarantine).
TEST_CASE("400,000 shards open in a fresh process within time and memory bounds", "[shard_table][many]") {
#if defined(__SANITIZE_ADDRESS__)
    constexpr bool sanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    constexpr bool sanitized = true;
#else
    constexpr bool sanitized = false;
#endif
#else
    constexpr bool sanitized = false;
#endif
    constexpr std::size_t shards = 400000;
    temp_dir dir("many400k");
    const std::string ds = dir / "ds";
    const auto t0 = std::chrono::steady_clock::now();
    const std::string make = "timeout 600 " + shell_quote(SHARDPACK_MAKE_MANY_SHARDS) + " " + shell_quote(ds) +
                             " --shards " + std::to_string(shards) + " >/dev/null 2>" + shell_quote(dir / "make.err");
    const int made = std::system(make.c_str());
    INFO(read_file(dir / "make.err"));
    REQUIRE(made == 0);
    const double make_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const detail::json m = read_manifest(ds);
    REQUIRE(m.at("format_version").as_string() == "1.2");
    REQUIRE(m.find("shards") == nullptr);
    REQUIRE(m.at("shard_table").at("bytes").as_u64() == 32 + detail::shard_table_entry_size * shards);

    const cli_result r = run_command(SHARDPACK_BENCH_OPEN, {ds, "--reads", "10000"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const detail::json result = detail::json::parse(r.out);
    const double open_s = result.at("open_s").as_double(), peak_mb = result.at("peak_rss_mb").as_double();
    const double remove_s = dir.remove();
    WARN("400,000 shards: made in " << make_s << " s; opened in " << open_s << " s; peak RSS " << peak_mb << " MB; "
                                    << result.at("mappings").as_u64() << " mappings; removed in " << remove_s << " s; "
                                    << r.out);
    REQUIRE(result.at("shards").as_u64() == shards);
    REQUIRE(result.at("records").as_u64() == shards);
    REQUIRE(result.at("open_shards").as_u64() <= 4096);
    REQUIRE(result.at("mappings").as_u64() < 65530 / 2);
    REQUIRE(open_s < (sanitized ? 20.0 : 5.0));
    if (!sanitized) REQUIRE(peak_mb < 200.0);
}
