// Builds on many machines: the parts of `build --partition K/N` and `shardpack merge`. Slices
// that cover the order exactly, a merge equal to a one-machine build byte for byte, refusals
// that name the part, and a merge that is atomic under kill -9.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <thread>
#include <utility>

#include "errors.hpp"
#include "inspect/dataset_verifier.hpp"
#include "pipeline/partition.hpp"
#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

// Every record's key and stored bytes, in dataset order.
std::vector<std::pair<std::string, std::string>> records_of(const std::string& dir) {
    const dataset ds = dataset::open(dir);
    std::vector<std::pair<std::string, std::string>> out;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) {
        const auto& shard = ds.shard(k);
        for (std::size_t i = 0; i < shard.record_count(); ++i) {
            const auto e = shard.entry(i);
            out.emplace_back("", std::string(reinterpret_cast<const char*>(shard.bytes() + e.offset), std::size_t(e.stored_size)));
        }
    }
    for (std::size_t i = 0; i < out.size(); ++i) out[i].first = ds.at(i).key();
    return out;
}

struct fixture : sample_fixture {
    explicit fixture(int count = 40)
        : sample_fixture("merge", count, 96, 64, {"--shard-size", "24KiB", "--size", "48x32", "--label-layout", "index"}) {}
    // With -q, a global option, before the subcommand.
    std::vector<std::string> build_args(const std::string& out, const std::vector<std::string>& extra = {}) const {
        std::vector<std::string> a = sample_fixture::build_args(out, extra);
        a.insert(a.begin(), "-q");
        return a;
    }
    // Builds parts 0..n-1 into DIR/part-K; returns their folders.
    std::vector<std::string> build_parts(const std::string& parts, int n, const std::vector<std::string>& extra = {}) const {
        std::vector<std::string> out;
        for (int k = 0; k < n; ++k) {
            out.push_back(parts + "/part-" + std::to_string(k));
            auto args = build_args(out.back(), extra);
            args.push_back("--partition");
            args.push_back(std::to_string(k) + "/" + std::to_string(n));
            const auto r = run_cli(args);
            INFO(r.err);
            REQUIRE(r.code == 0);
        }
        return out;
    }
};

std::vector<std::string> merge_args(const std::string& out, const std::vector<std::string>& parts,
                                    std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"merge", "--out", out};
    a.insert(a.end(), extra.begin(), extra.end());
    a.insert(a.end(), parts.begin(), parts.end());
    return a;
}

}  // namespace

TEST_CASE("partition slices cover the rows exactly once - in order - sizes differing by at most one", "[partition]") {
    for (std::uint64_t rows : {0ull, 1ull, 5ull, 7ull, 100ull, 1001ull}) {
        for (std::uint64_t n : {1ull, 2ull, 3ull, 4ull, 7ull, 16ull}) {
            std::uint64_t next = 0, smallest = UINT64_MAX, largest = 0;
            for (std::uint64_t k = 0; k < n; ++k) {
                const row_slice s = partition_slice(rows, {k, n});
                INFO("rows " << rows << " part " << k << "/" << n);
                REQUIRE(s.first == next);
                next += s.size;
                smallest = std::min(smallest, s.size);
                largest = std::max(largest, s.size);
            }
            REQUIRE(next == rows);
            REQUIRE(largest - smallest <= 1);
        }
    }
}

TEST_CASE("partition K/N and slurm: parsing and the errors that name the reason", "[partition]") {
    auto p = parse_partition("3/16");
    REQUIRE(p.index == 3);
    REQUIRE(p.count == 16);
    for (const char* bad : {"16/16", "3", "3/", "/4", "-1/4", "1/0", "a/b", "1/4/5", " 1/4", "slurmy"})
        REQUIRE_THROWS_AS(parse_partition(bad), usage_error);
    REQUIRE_THROWS_WITH(parse_partition("4/4"), Catch::Contains("out of range"));

    std::map<std::string, std::string> env;
    const env_lookup get = [&](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("SLURM_ARRAY_TASK_ID is not set"));
    env["SLURM_ARRAY_TASK_ID"] = "2";
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("SLURM_ARRAY_TASK_COUNT is not set"));
    env["SLURM_ARRAY_TASK_COUNT"] = "4";
    p = parse_partition("slurm", get);
    REQUIRE(p.index == 2);
    REQUIRE(p.count == 4);
    // An array that starts at 1 (sbatch --array=1-4): K counts from the first id.
    env["SLURM_ARRAY_TASK_MIN"] = "1";
    env["SLURM_ARRAY_TASK_MAX"] = "4";
    env["SLURM_ARRAY_TASK_STEP"] = "1";
    p = parse_partition("slurm", get);
    REQUIRE(p.index == 1);
    REQUIRE(p.count == 4);
    env["SLURM_ARRAY_TASK_ID"] = "0";
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("below SLURM_ARRAY_TASK_MIN"));
    env["SLURM_ARRAY_TASK_ID"] = "4";
    REQUIRE(parse_partition("slurm", get).index == 3);
    // --array=0-6:2 and --array=0,2,5 cannot name parts 0..N-1.
    env["SLURM_ARRAY_TASK_STEP"] = "2";
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("step of 2"));
    env["SLURM_ARRAY_TASK_STEP"] = "1";
    env["SLURM_ARRAY_TASK_MIN"] = "0";
    env["SLURM_ARRAY_TASK_MAX"] = "5";
    env["SLURM_ARRAY_TASK_COUNT"] = "3";
    env["SLURM_ARRAY_TASK_ID"] = "2";
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("not 3 consecutive ids"));
    env["SLURM_ARRAY_TASK_MAX"] = "2";
    env["SLURM_ARRAY_TASK_COUNT"] = "x3";
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("SLURM_ARRAY_TASK_COUNT='x3'"));
}

TEST_CASE("build --partition slurm reads the job array's environment - outside one it exits 2", "[partition][cli]") {
    fixture f(12);
    auto args = f.build_args(f.dir / "p", {"--partition", "slurm"});
    auto r = run_cli(args);
    REQUIRE(r.code == 2);
    REQUIRE(r.err.find("SLURM_ARRAY_TASK_ID is not set") != std::string::npos);
    REQUIRE(!fs::exists(f.dir / "p/manifest.json"));
    r = run_cli(args, {"SLURM_ARRAY_TASK_ID=6", "SLURM_ARRAY_TASK_COUNT=3", "SLURM_ARRAY_TASK_MIN=5", "SLURM_ARRAY_TASK_MAX=7"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto part = dataset::open(f.dir / "p").manifest().at("partition");
    REQUIRE(part.at("index").as_u64() == 1);
    REQUIRE(part.at("count").as_u64() == 3);
    REQUIRE(part.at("rows").as_u64() == 12);
    REQUIRE(part.at("first_row").as_u64() == 4);
    REQUIRE(part.at("part_rows").as_u64() == 4);
    REQUIRE(dataset::open(f.dir / "p").size() == 4);
}

TEST_CASE("parts are slices of the one-machine order - with and without --shuffle - and the merge equals that build byte for byte",
          "[partition][merge]") {
    fixture f(40);
    for (const bool shuffle : {false, true}) {
        const std::vector<std::string> extra = shuffle ? std::vector<std::string>{"--shuffle", "--seed", "11"} : std::vector<std::string>{};
        const std::string tag = shuffle ? "shuffled" : "ordered";
        INFO(tag);
        const std::string single = f.dir / (tag + "-single");
        REQUIRE(run_cli(f.build_args(single, extra)).code == 0);
        const auto expected = records_of(single);
        REQUIRE(expected.size() == 40);
        REQUIRE(dataset::open(single).shard_count() >= 4);

        const auto parts = f.build_parts(f.dir / (tag + "-parts"), 3, extra);
        std::vector<std::pair<std::string, std::string>> concatenated;
        for (const auto& p : parts) {
            const auto r = records_of(p);
            concatenated.insert(concatenated.end(), r.begin(), r.end());
            REQUIRE(verify_dataset(p).ok());  // each part is a dataset of its own
        }
        REQUIRE(concatenated == expected);  // same keys, same stored bytes, same order

        const std::string merged = f.dir / (tag + "-merged");
        // Parts in any order.
        const auto r = run_cli(merge_args(merged, {parts[2], parts[0], parts[1]}, {"--json"}));
        INFO(r.err);
        REQUIRE(r.code == 0);
        REQUIRE(records_of(merged) == expected);
        REQUIRE(dataset::open(merged).content_hash() == dataset::open(single).content_hash());
        REQUIRE(read_file(merged + "/manifest.json") == read_file(single + "/manifest.json"));
        REQUIRE(read_file(merged + "/fingerprints.tsv") == read_file(single + "/fingerprints.tsv"));
        for (const auto& e : fs::directory_iterator(single))
            if (e.path().extension() == ".spk") REQUIRE(read_file(e.path().string()) == read_file(merged + "/" + e.path().filename().string()));
        REQUIRE(verify_dataset(merged).ok());
        const auto report = detail::json::parse(r.out);
        REQUIRE(report.at("merged_parts").as_u64() == 3);
        REQUIRE(report.at("records").as_u64() == 40);
        // Part 0's shards before its last one go over as they are, by hard link.
        REQUIRE(report.at("shards_linked").as_u64() >= 1);
        REQUIRE(report.at("shards_linked").as_u64() + report.at("shards_written").as_u64() == report.at("shards").as_u64());

        // A rebuild of the merged folder on one machine takes every record back: the merged
        // fingerprints are a one-machine build's.
        const auto again = run_cli(f.build_args(merged, [&] { auto a = extra; a.push_back("--json"); return a; }()));
        REQUIRE(again.code == 0);
        REQUIRE(detail::json::parse(again.out).at("decoded_records").as_u64() == 0);
    }
}

TEST_CASE("merge of a folder of parts - --link hard shares part 0's files - --link copy does not - parts stay unchanged",
          "[partition][merge]") {
    fixture f(30);
    const auto parts = f.build_parts(f.dir / "parts", 4);
    fs::create_directories(f.dir / "parts/logs");  // a folder without a dataset is passed over
    std::map<std::string, std::string> before;
    for (const auto& p : parts) before[p] = read_file(p + "/manifest.json") + dataset::open(p).content_hash();

    for (const std::string link : {"hard", "copy"}) {
        const std::string out = f.dir / ("merged-" + link);
        const auto r = run_cli(merge_args(out, {f.dir / "parts"}, {"--link", link, "--json"}));
        INFO(r.err);
        REQUIRE(r.code == 0);
        const auto report = detail::json::parse(r.out);
        REQUIRE(report.at("merged_parts").as_u64() == 4);
        const dataset ds = dataset::open(out);
        REQUIRE(ds.size() == 30);
        REQUIRE(verify_dataset(out).ok());
        std::uint64_t shared = 0;
        for (std::size_t k = 0; k < ds.shard_count(); ++k) {
            struct stat st {};
            REQUIRE(::stat((out + "/" + ds.shard(k).name()).c_str(), &st) == 0);
            shared += st.st_nlink > 1;
        }
        if (link == "hard") {
            REQUIRE(report.at("shards_linked").as_u64() >= 1);
            REQUIRE(shared == report.at("shards_linked").as_u64());
        } else {
            REQUIRE(report.at("shards_linked").as_u64() == 0);
            REQUIRE(report.at("shards_copied").as_u64() >= 1);
            REQUIRE(shared == 0);
        }
    }
    for (const auto& p : parts) {
        REQUIRE(before[p] == read_file(p + "/manifest.json") + dataset::open(p).content_hash());
        REQUIRE(verify_dataset(p).ok());
    }
    REQUIRE(dataset::open(f.dir / "merged-hard").content_hash() == dataset::open(f.dir / "merged-copy").content_hash());

    // --link hard onto another file system (tmpfs /dev/shm, where there is one): copies instead.
    struct stat here {}, shm {};
    if (::stat("/dev/shm", &shm) == 0 && ::stat(f.dir.str().c_str(), &here) == 0 && shm.st_dev != here.st_dev &&
        ::access("/dev/shm", W_OK) == 0) {
        const std::string elsewhere = "/dev/shm/shardpack-merge-" + std::to_string(::getpid());
        fs::remove_all(elsewhere);
        const auto r = run_cli(merge_args(elsewhere, {f.dir / "parts"}, {"--json"}));
        INFO(r.err);
        REQUIRE(r.code == 0);
        const auto report = detail::json::parse(r.out);
        REQUIRE(report.at("shards_linked").as_u64() == 0);
        REQUIRE(report.at("shards_copied").as_u64() >= 1);
        REQUIRE(dataset::open(elsewhere).content_hash() == dataset::open(f.dir / "merged-hard").content_hash());
        fs::remove_all(elsewhere);
    } else {
        SHARDPACK_SKIP("no second file system at /dev/shm: merge --link hard's fallback to copies across file "
                       "systems was not exercised (the rest of this case passed)");
    }
}

TEST_CASE("merge refuses a missing - duplicate or foreign part - naming it - and publishes nothing", "[partition][merge]") {
    fixture f(24);
    const auto parts = f.build_parts(f.dir / "parts", 3);
    auto refused = [&](const std::vector<std::string>& given, const std::string& expect) {
        const std::string out = f.dir / "merged";
        const auto r = run_cli(merge_args(out, given));
        INFO(r.err);
        REQUIRE(r.code == 1);
        REQUIRE(r.err.find(expect) != std::string::npos);
        REQUIRE(!fs::exists(out + "/manifest.json"));
        return r.err;
    };
    // --check accepts the complete set and writes nothing.
    const auto checked = run_cli({"merge", "--check", "--json", f.dir / "parts"});
    INFO(checked.err);
    REQUIRE(checked.code == 0);
    REQUIRE(detail::json::parse(checked.out).at("records").as_u64() == 24);
    REQUIRE(!fs::exists(f.dir / "merged"));
    REQUIRE(run_cli({"merge", f.dir / "parts"}).code == 2);  // neither --out nor --check
    // Missing.
    refused({parts[0], parts[2]}, "missing part 1 of 3");
    const auto check_missing = run_cli({"merge", "--check", parts[0], parts[2]});
    REQUIRE(check_missing.code == 1);
    REQUIRE(check_missing.err.find("missing part 1 of 3") != std::string::npos);
    refused({parts[1], parts[2]}, "missing part 0 of 3");
    // Duplicate: the same part twice under two names.
    fs::copy(parts[1], f.dir / "copy-of-1", fs::copy_options::recursive);
    auto err = refused({parts[0], parts[1], f.dir / "copy-of-1", parts[2]}, "are both part 1 of 3");
    REQUIRE(err.find(f.dir / "copy-of-1") != std::string::npos);
    // Foreign: another N.
    const auto halves = f.build_parts(f.dir / "halves", 2);
    err = refused({parts[0], halves[1], parts[2]}, "the number of parts N differs");
    REQUIRE(err.find(halves[1] + " (part 1 of 2)") != std::string::npos);
    // Foreign: other options (zstd level).
    const auto leveled = f.build_parts(f.dir / "leveled", 3, {"--level", "5"});
    err = refused({parts[0], parts[1], leveled[2]}, "the build options");
    REQUIRE(err.find(leveled[2]) != std::string::npos);
    // Foreign: another input list (one row fewer).
    {
        const std::string text = read_file(f.dir / "src/list.csv");
        write_file(f.dir / "src/list.csv", text.substr(0, text.rfind('\n', text.size() - 2) + 1));
    }
    const auto shorter = f.build_parts(f.dir / "shorter", 3);
    err = refused({parts[0], shorter[1], parts[2]}, "the input list");
    REQUIRE(err.find(shorter[1]) != std::string::npos);
    // Not a part at all.
    REQUIRE(run_cli(f.build_args(f.dir / "whole")).code == 0);
    refused({parts[0], f.dir / "whole", parts[2]}, f.dir / "whole" + ": not a part of a partitioned build");
    // A damaged part: a record's bytes flipped.
    {
        const dataset ds = dataset::open(parts[1]);
        const auto& shard = ds.shard(0);
        const std::string path = parts[1] + "/" + shard.name();
        std::string bytes = read_file(path);
        bytes[std::size_t(shard.entry(0).offset) + 3] ^= 0x40;
        write_file(path, bytes);
    }
    refused({parts[0], parts[1], parts[2]}, parts[1] + " (part 1 of 3)");
    const auto check_damaged = run_cli({"merge", "--check", parts[0], parts[1], parts[2]});
    REQUIRE(check_damaged.code == 1);
    REQUIRE(check_damaged.err.find(parts[1] + " (part 1 of 3)") != std::string::npos);
}

TEST_CASE("a merge killed at random moments leaves no half dataset - SIGTERM exits 143 - the next merge completes",
          "[partition][merge][kill]") {
    fixture f(80);
    const auto parts = f.build_parts(f.dir / "parts", 4);
    const std::string reference = f.dir / "reference";
    auto t0 = std::chrono::steady_clock::now();
    REQUIRE(run_cli(merge_args(reference, parts, {"--link", "copy"})).code == 0);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::string expected = dataset::open(reference).content_hash();

    const std::string out = f.dir / "merged";
    std::mt19937 rng(5);
    int before_publish = 0;
    for (int round = 0; round < 12; ++round) {
        const cli_child merging = spawn_cli(merge_args(out, parts, {"--link", "copy"}));
        std::this_thread::sleep_for(std::chrono::duration<double>(seconds * std::uniform_real_distribution<double>(0.0, 1.2)(rng)));
        ::kill(merging.pid, SIGKILL);
        wait_for(merging);
        if (!fs::exists(out + "/manifest.json")) {
            ++before_publish;
            continue;
        }
        // After the manifest's rename: the complete dataset.
        REQUIRE(dataset::open(out).content_hash() == expected);
        const auto v = verify_dataset(out);
        REQUIRE(v.ok());
        fs::remove_all(out);  // so that the next kill can land before a publish again
    }
    REQUIRE(before_publish >= 1);

    // SIGTERM: exit 143, nothing published.
    fs::remove_all(out);
    const cli_child merging = spawn_cli(merge_args(out, parts));
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds * 0.3));
    ::kill(merging.pid, SIGTERM);
    const int code = wait_for(merging);
    REQUIRE((code == 143 || code == 0));  // 0 only if it had already finished
    if (code == 143) REQUIRE(!fs::exists(out + "/manifest.json"));

    // What the killed merges left does not disturb the next one.
    const auto r = run_cli(merge_args(out, parts));
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(dataset::open(out).content_hash() == expected);
    REQUIRE(verify_dataset(out).ok());
    for (const auto& e : fs::recursive_directory_iterator(out)) REQUIRE(e.path().filename().string().find(".tmp-") == std::string::npos);
}

TEST_CASE("a part rebuilds incrementally and resumes like any build", "[partition][rebuild]") {
    fixture f(40);
    {  // Resume: a part build that fails (disk full) after finishing some shards keeps them in
       // .partial/, and the next run of the same part decodes only the rest.
        const std::string part = f.dir / "resumed";
        const auto args = f.build_args(part, {"--partition", "1/2", "--json"});
        const auto failed = run_cli(args, {preload(SHARDPACK_WRITE_FAULT), "SHARDPACK_FAULT_BUDGET=70000",
                                           "SHARDPACK_FAULT_ERRNO=28"});
        INFO(failed.err);
        REQUIRE(failed.code == 1);
        REQUIRE(!fs::exists(part + "/manifest.json"));
        std::size_t finished = 0;
        for (const auto& e : fs::directory_iterator(part + "/.partial")) finished += e.path().extension() == ".spk";
        REQUIRE(finished >= 1);
        const auto r = run_cli(args);
        INFO(r.err);
        REQUIRE(r.code == 0);
        const auto report = detail::json::parse(r.out);
        REQUIRE(report.at("reused_records").as_u64() >= 1);
        REQUIRE(report.at("decoded_records").as_u64() < 20);
        REQUIRE(report.at("records").as_u64() == 20);
    }
    const std::string part = f.dir / "part";
    auto args = f.build_args(part, {"--partition", "1/2", "--json"});
    auto r = run_cli(args);
    REQUIRE(r.code == 0);
    REQUIRE(detail::json::parse(r.out).at("decoded_records").as_u64() == 20);
    const auto manifest = read_file(part + "/manifest.json");
    r = run_cli(args);
    REQUIRE(r.code == 0);
    REQUIRE(detail::json::parse(r.out).at("decoded_records").as_u64() == 0);
    REQUIRE(read_file(part + "/manifest.json") == manifest);
    // Another slice into the same folder: the rows it shares with nothing are decoded.
    r = run_cli(f.build_args(part, {"--partition", "0/2", "--json"}));
    REQUIRE(r.code == 0);
    REQUIRE(detail::json::parse(r.out).at("decoded_records").as_u64() == 20);
    REQUIRE(dataset::open(part).manifest().at("partition").at("index").as_u64() == 0);
}

TEST_CASE("more parts than rows and rejected rows - the merge still equals the one-machine build and its rejected.csv",
          "[partition][merge]") {
    fixture f(3);
    {  // a fourth row whose image does not exist
        std::string text = read_file(f.dir / "src/list.csv");
        write_file(f.dir / "src/list.csv", text + "images/missing.png,masks/missing.png\n");
    }
    const std::vector<std::string> skip = {"--on-error", "skip"};
    const std::string single = f.dir / "single";
    REQUIRE(run_cli(f.build_args(single, skip)).code == 0);
    const auto parts = f.build_parts(f.dir / "parts", 6, skip);  // parts 4 and 5 hold no row
    REQUIRE(dataset::open(parts[5]).size() == 0);
    REQUIRE(dataset::open(parts[5]).manifest().at("partition").at("part_rows").as_u64() == 0);
    const std::string merged = f.dir / "merged";
    const auto r = run_cli(merge_args(merged, {f.dir / "parts"}));
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(dataset::open(merged).size() == 3);
    REQUIRE(read_file(merged + "/manifest.json") == read_file(single + "/manifest.json"));
    REQUIRE(read_file(merged + "/rejected.csv") == read_file(single + "/rejected.csv"));
    REQUIRE(read_file(merged + "/rejected.csv").find("missing.png") != std::string::npos);
}

TEST_CASE("partition slurm: array variables that contradict each other are refused, naming them", "[partition]") {
    std::map<std::string, std::string> env;
    const env_lookup get = [&](const char* name) -> const char* {
        const auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
    };
    const auto set = [&](const char* id, const char* count, const char* min, const char* max) {
        env = {{"SLURM_ARRAY_TASK_ID", id}, {"SLURM_ARRAY_TASK_COUNT", count}, {"SLURM_ARRAY_TASK_MIN", min},
               {"SLURM_ARRAY_TASK_MAX", max}, {"SLURM_ARRAY_TASK_STEP", "1"}};
    };
    set("5", "1", "5", "2");  // MAX below MIN: was taken as part 0 of 1
    REQUIRE_THROWS_WITH(parse_partition("slurm", get),
                        Catch::Contains("SLURM_ARRAY_TASK_MAX 2 is below SLURM_ARRAY_TASK_MIN 5") &&
                            Catch::Contains("SLURM_ARRAY_TASK_ID 5") && Catch::Contains("not the variables of one job array"));
    set("5", "4", "0", "3");  // the ID above MAX
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("SLURM_ARRAY_TASK_ID 5 is above SLURM_ARRAY_TASK_MAX 3"));
    set("0", "4", "1", "4");  // the ID below MIN
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("SLURM_ARRAY_TASK_ID 0 is below SLURM_ARRAY_TASK_MIN 1"));
    set("1", "3", "0", "1");  // more tasks than ids: not holes, a contradiction
    REQUIRE_THROWS_WITH(parse_partition("slurm", get), Catch::Contains("SLURM_ARRAY_TASK_COUNT 3 is more than the 2 ids 0..1"));
    set("2", "4", "1", "4");  // consistent
    REQUIRE(parse_partition("slurm", get).index == 1);
}

TEST_CASE("build --partition slurm with SLURM_ARRAY_TASK_MAX below SLURM_ARRAY_TASK_MIN exits 2 and writes nothing",
          "[partition][cli]") {
    fixture f(12);
    const auto r = run_cli(f.build_args(f.dir / "p", {"--partition", "slurm"}),
                           {"SLURM_ARRAY_TASK_ID=5", "SLURM_ARRAY_TASK_COUNT=1", "SLURM_ARRAY_TASK_MIN=5",
                            "SLURM_ARRAY_TASK_MAX=2"});
    INFO(r.err);
    REQUIRE(r.code == 2);
    REQUIRE_THAT(r.err, Catch::Contains("SLURM_ARRAY_TASK_MAX 2 is below SLURM_ARRAY_TASK_MIN 5"));
    REQUIRE(!fs::exists(f.dir / "p/manifest.json"));
}
