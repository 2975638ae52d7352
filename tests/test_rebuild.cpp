// Cron-safe rebuilds: atomic publish under kill -9 and signals, the output lock, incremental and
// resumed builds that equal a full build byte for byte, and disk-full / I/O errors.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>
#include <utility>

#include "dataset/input_fingerprints.hpp"
#include "io/output_lock.hpp"
#include "inspect/dataset_verifier.hpp"
#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

std::string content_hash(const std::string& dir) { return dataset::open(dir).content_hash(); }

std::vector<std::string> temporaries(const std::string& dir) {
    std::vector<std::string> found;
    for (const auto& e : fs::recursive_directory_iterator(dir))
        if (e.path().filename().string().find(".tmp-") != std::string::npos) found.push_back(e.path().string());
    return found;
}

struct fixture : sample_fixture {
    fixture(int count = 30, int width = 160, int height = 120)
        : sample_fixture("rebuild", count, width, height, {"--shard-size", "96KiB", "--size", "64x48"}) {}
};

detail::json report_of(const cli_result& r) { return detail::json::parse(r.out); }

}  // namespace

TEST_CASE("a rebuild with no change decodes nothing and equals the full build byte for byte", "[rebuild]") {
    fixture f;
    const std::string out = f.dir / "ds";
    auto r = run_cli(f.build_args(out, {"--json"}));
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(report_of(r).at("decoded_records").as_u64() == 30);
    const auto first = read_file(out + "/manifest.json");
    std::map<std::string, fs::file_time_type> written;
    for (const auto& e : fs::directory_iterator(out)) written[e.path().filename().string()] = fs::last_write_time(e);

    r = run_cli(f.build_args(out, {"--json"}));
    REQUIRE(r.code == 0);
    const auto again = report_of(r);
    REQUIRE(again.at("decoded_records").as_u64() == 0);
    REQUIRE(again.at("reused_records").as_u64() == 30);
    REQUIRE(again.at("shards_written").as_u64() == 0);
    REQUIRE(read_file(out + "/manifest.json") == first);
    for (const auto& e : fs::directory_iterator(out)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("shard-", 0) == 0) REQUIRE(fs::last_write_time(e) == written.at(name));  // not rewritten
    }
    // Class frequencies survive being taken back.
    REQUIRE(again.at("class_frequencies").dump() == report_of(run_cli(f.build_args(f.dir / "full", {"--json"}))).at("class_frequencies").dump());
}

TEST_CASE("a rebuild after one changed row rewrites only its shard and equals a full build", "[rebuild]") {
    fixture f(40);
    const std::string out = f.dir / "ds";
    REQUIRE(run_cli(f.build_args(out)).code == 0);
    const auto before = detail::json::parse(read_file(out + "/manifest.json")).at("shards").dump();

    // Replace one image with another of the same size (a real content change).
    fs::copy_file(f.dir / "src/images/img_0003.png", f.dir / "src/images/img_0020.png", fs::copy_options::overwrite_existing);
    auto r = run_cli(f.build_args(out, {"--json"}));
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto report = report_of(r);
    REQUIRE(report.at("decoded_records").as_u64() == 1);
    const std::uint64_t shards = dataset::open(out).shard_count();
    REQUIRE(shards >= 4);
    REQUIRE(report.at("shards_written").as_u64() <= 2);

    REQUIRE(run_cli(f.build_args(f.dir / "full", {"--full"})).code == 0);
    REQUIRE(content_hash(out) == content_hash(f.dir / "full"));
    REQUIRE(read_file(out + "/manifest.json") == read_file(f.dir / "full/manifest.json"));

    // Touching a file without changing it costs a read and a hash, never a decode.
    fs::last_write_time(f.dir / "src/images/img_0005.png", fs::file_time_type::clock::now());
    r = run_cli(f.build_args(out, {"--json"}));
    REQUIRE(report_of(r).at("decoded_records").as_u64() == 0);
    // Other options: nothing can be taken back.
    r = run_cli(f.build_args(out, {"--json", "--filter", "lanczos"}));
    REQUIRE(report_of(r).at("decoded_records").as_u64() == 40);
    // --full decodes everything.
    r = run_cli(f.build_args(out, {"--json", "--filter", "lanczos", "--full"}));
    REQUIRE(report_of(r).at("decoded_records").as_u64() == 40);
    REQUIRE(verify_dataset(out).ok());
    (void)before;
}

TEST_CASE("SIGTERM and SIGINT stop a build cleanly, the next build resumes from its finished shards", "[rebuild][signals]") {
    fixture f(60, 480, 360);
    const std::string out = f.dir / "ds";
    REQUIRE(run_cli(f.build_args(out, {"--size", "40x30"})).code == 0);
    const std::string old_hash = content_hash(out);

    for (int sig : {SIGTERM, SIGINT}) {
        const auto args = f.build_args(out, {"--filter", "lanczos", "--size", "200x150", "--threads", "1", "--shard-size", "256KiB"});
        const cli_child c = spawn_cli(args);
        std::this_thread::sleep_for(std::chrono::milliseconds(700));
        ::kill(c.pid, sig);
        const int code = wait_for(c);
        INFO(read_file(c.err));
        if (code == 0) continue;  // finished before the signal: nothing to check here
        REQUIRE(code == 128 + sig);
        REQUIRE_THAT(read_file(c.err), Catch::Contains("interrupted"));
        REQUIRE(content_hash(out) == old_hash);  // the old dataset, untouched
        REQUIRE(verify_dataset(out).ok());
        REQUIRE(temporaries(out).empty());
    }
    // The next run takes back what the interrupted ones finished, and still equals a full build.
    auto r = run_cli(f.build_args(out, {"--filter", "lanczos", "--size", "200x150", "--shard-size", "256KiB", "--json"}));
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(report_of(r).at("reused_records").as_u64() > 0);
    REQUIRE(run_cli(f.build_args(f.dir / "full", {"--filter", "lanczos", "--size", "200x150", "--shard-size", "256KiB"})).code == 0);
    REQUIRE(content_hash(out) == content_hash(f.dir / "full"));
    REQUIRE_FALSE(fs::exists(out + "/.partial"));
}

TEST_CASE("kill -9 at 20 random moments of a build leaves the old dataset verifying", "[rebuild][kill]") {
    fixture f(48, 320, 240);
    const std::string out = f.dir / "ds";
    REQUIRE(run_cli(f.build_args(out)).code == 0);
    const std::string old_hash = content_hash(out);
    const auto args = f.build_args(out, {"--filter", "lanczos", "--size", "160x120", "--full", "--shard-size", "128KiB"});
    // How long an uninterrupted build takes, to spread the kills over it.
    const auto t0 = std::chrono::steady_clock::now();
    REQUIRE(run_cli(f.build_args(f.dir / "timing", {"--filter", "lanczos", "--size", "160x120", "--full", "--shard-size", "128KiB"})).code == 0);
    const auto span = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
    const std::string new_hash = content_hash(f.dir / "timing");
    REQUIRE(new_hash != old_hash);
    std::mt19937 rng(2026);
    int killed = 0;
    for (int i = 0; i < 20; ++i) {
        const cli_child c = spawn_cli(args);
        std::this_thread::sleep_for(std::chrono::milliseconds(rng() % std::uint64_t(span + 1)));
        ::kill(c.pid, SIGKILL);
        const int code = wait_for(c);
        // Either the old dataset or, if the kill came after the manifest's rename, the complete
        // new one: never a mix.
        const std::string now = content_hash(out);
        INFO("attempt " << i << ", exit " << code);
        REQUIRE((now == old_hash || now == new_hash));
        killed += now == old_hash;
        const auto v = verify_dataset(out);
        for (const auto& p : v.problems) UNSCOPED_INFO(p);
        REQUIRE(v.ok());
        if (now == new_hash) REQUIRE(run_cli(f.build_args(out, {"--full"})).code == 0);  // the old one back, for the next try
    }
    REQUIRE(killed >= 5);  // kills landed before the switch, not only after
    // The next build cleans up what the killed ones left: only the replaced manifest's shards
    // stay, for readers that read it, and the build after that removes them.
    REQUIRE(run_cli(args).code == 0);
    REQUIRE(temporaries(out).empty());
    REQUIRE_FALSE(fs::exists(out + "/.partial"));
    auto v = verify_dataset(out);
    REQUIRE(v.ok());
    for (const auto& w : v.warnings) {
        INFO(w);
        REQUIRE_THAT(w, Catch::Contains("is kept from the previous build"));
    }
    REQUIRE(run_cli(args).code == 0);
    v = verify_dataset(out);
    for (const auto& w : v.warnings) UNSCOPED_INFO(w);
    REQUIRE(v.ok());
    REQUIRE(v.warnings.empty());  // no extra shard left either
}

TEST_CASE("a second build into the same output exits 1 naming the holder, a stale lock does not block", "[rebuild][lock]") {
    fixture f(4);
    const std::string out = f.dir / "ds";
    REQUIRE(run_cli(f.build_args(out)).code == 0);
    const std::string old_hash = content_hash(out);
    {
        output_lock held(out);  // as a running build holds it
        const auto t0 = std::chrono::steady_clock::now();
        const auto r = run_cli(f.build_args(out, {"--full"}));
        REQUIRE(r.code == 1);
        REQUIRE_THAT(r.err, Catch::Contains("being built by another shardpack process") &&
                                Catch::Contains("pid " + std::to_string(::getpid())));
        REQUIRE(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));  // at once, no waiting
        REQUIRE(content_hash(out) == old_hash);
    }
    // A lock file left by a process that died holds no lock.
    write_file(out + "/" + output_lock::file_name, "pid 999999 on nowhere since 2001-01-01T00:00:00Z");
    REQUIRE(run_cli(f.build_args(out, {"--full"})).code == 0);

    // Two builds started together: one wins, the other is refused; the result verifies.
    const cli_child a = spawn_cli(f.build_args(out, {"--full"}));
    const cli_child b = spawn_cli(f.build_args(out, {"--full"}));
    const int ca = wait_for(a), cb = wait_for(b);
    REQUIRE((ca == 0 || cb == 0));
    REQUIRE((ca == 0 || ca == 1));
    REQUIRE((cb == 0 || cb == 1));
    REQUIRE(verify_dataset(out).ok());
}

TEST_CASE("disk full, I/O errors: exit 1, a clear error, no temporaries, the old dataset intact", "[rebuild][io]") {
    fixture f(12);
    const std::string out = f.dir / "ds";
    REQUIRE(run_cli(f.build_args(out)).code == 0);
    const std::string old_hash = content_hash(out);
    const std::string write_fault = preload(SHARDPACK_WRITE_FAULT);
    // Budgets that fail in the first shard, in a later shard, and while writing the manifest.
    int failed = 0;
    for (const char* budget : {"0", "1000", "60000", "150000"}) {
        for (const char* err : {"28", "5", "30"}) {  // ENOSPC, EIO, EROFS
            const auto r = run_cli(f.build_args(out, {"--full", "--size", "60x44"}),
                                   {write_fault, std::string("SHARDPACK_FAULT_BUDGET=") + budget,
                                    std::string("SHARDPACK_FAULT_ERRNO=") + err});
            INFO("budget " << budget << " errno " << err << ": " << r.err);
            if (r.code == 0) continue;  // the budget outlasted the build
            ++failed;
            REQUIRE(r.code == 1);
            const char* why = std::string(err) == "28" ? "No space left on device"
                            : std::string(err) == "5" ? "Input/output error" : "Read-only file system";
            REQUIRE_THAT(r.err, Catch::Contains(why));
            REQUIRE(temporaries(out).empty());
            REQUIRE(content_hash(out) == old_hash);
            REQUIRE(verify_dataset(out).ok());
        }
    }
    REQUIRE(failed >= 3);  // the shim was loaded and did fail writes (budget 0 fails every build)
}

TEST_CASE("a real full disk: a tiny tmpfs", "[rebuild][io][tmpfs]") {
    fixture f(12);
    const std::string mnt = f.dir / "tiny";
    fs::create_directories(mnt);
    if (::geteuid() != 0 || ::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256k") != 0) {
        SHARDPACK_SKIP("cannot mount a tmpfs here (needs root and CAP_SYS_ADMIN); the LD_PRELOAD test covers ENOSPC");
    }
    const std::string out = mnt + "/ds";
    auto r = run_cli(f.build_args(out, {"--size", "16x12", "--compression", "none"}));
    REQUIRE(r.code == 0);
    const std::string old_hash = content_hash(out);
    r = run_cli(f.build_args(out, {"--size", "160x120", "--compression", "none", "--full"}));
    const bool intact = content_hash(out) == old_hash && verify_dataset(out).ok() && temporaries(out).empty();
    ::umount2(mnt.c_str(), MNT_DETACH);
    INFO(r.err);
    REQUIRE(r.code == 1);
    REQUIRE_THAT(r.err, Catch::Contains("No space left on device"));
    REQUIRE(intact);
}

// A reader that read manifest.json must still find the shards it names while rebuilds publish:
// a build keeps the replaced manifest's shards until the next build, and dataset::open tries
// once more when the manifest changed under it. The reader here is `shardpack inspect`, whose
// every shard open is slowed by 5 ms (a slow file system), in a loop in its own process.
TEST_CASE("a reader opening in a loop while rebuilds with changing content run never misses a shard", "[rebuild][reader]") {
    fixture f(24, 64, 48);
    const std::string out = f.dir / "ds";
    auto args = [&](int seed) {
        return f.build_args(out, {"--size", "32x24", "--shard-size", "4KiB", "--shuffle", "--seed", std::to_string(seed)});
    };
    REQUIRE(run_cli(args(0)).code == 0);
    REQUIRE(dataset::open(out).shard_count() >= 8);
    const std::string stop = f.dir / "stop", log = f.dir / "reader.log", done = f.dir / "opened";
    const std::string script = "n=0; while [ ! -e '" + stop + "' ]; do n=$((n+1)); " + preload(SHARDPACK_SLOW_OPEN) +
                               " SHARDPACK_SLOW_OPEN_US=5000 '" + SHARDPACK_CLI + "' inspect '" + out + "' >/dev/null 2>>'" + log +
                               "' || echo FAILED >>'" + log + "'; echo >>'" + done + "'; done; echo opens $n >>'" + log + "'";
    std::fflush(stdout);
    std::fflush(stderr);
    const pid_t reader = ::fork();
    REQUIRE(reader >= 0);
    if (reader == 0) {
        ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
        std::_Exit(127);
    }
    const auto t0 = std::chrono::steady_clock::now();
    int builds = 0;
    // At least 10 rebuilds, and on until the reader has opened at least 10 times, within 20 s.
    // The builds are spaced 300 ms apart, as rebuilds from cron are: the guarantee is for a
    // reader whose open takes less than the time between two publishes (a reader slower than
    // that sees the shards of the manifest it read removed by the publish after next, however
    // often it retries).
    auto reader_opens = [&] { return fs::exists(done) ? fs::file_size(done) : std::uintmax_t(0); };
    for (int seed = 1; std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20); ++seed) {
        builds += run_cli(args(seed)).code == 0;
        if (seed >= 10 && reader_opens() >= 10) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    write_file(stop, "");
    int status = 0;
    ::waitpid(reader, &status, 0);
    const std::string text = read_file(log);
    INFO(text);
    REQUIRE(builds >= 5);
    REQUIRE(text.find("FAILED") == std::string::npos);
    const auto at = text.find("opens ");
    REQUIRE(at != std::string::npos);
    REQUIRE(std::stoi(text.substr(at + 6)) >= 10);
}

TEST_CASE("fingerprint lines keep tolerance counts and unknown values and old 11-field lines still load", "[labels][rebuild]") {
    temp_dir dir("fp");
    record_fingerprint r;
    r.key = "a.png";
    r.label_key = "a_mask.png";
    r.class_counts = {{0, 10}, {2, 5}};
    r.tolerance_counts = {{2, 4}};
    r.unknown_values = {{0xFA0AFAu, 12, 5, 6}, {300, 1, 0, 0}};
    fingerprint_group g{"shard-00000-x.spk", {r, record_fingerprint{}}};
    g.records[1].key = "b.png";
    write_file(dir / "f.tsv", format_fingerprint_header("abc", "def") + format_fingerprint_group(g));
    const auto f = load_fingerprints(dir / "f.tsv");
    REQUIRE(f);
    REQUIRE(f->groups.at(0).records.size() == 2);
    const auto& back = f->groups[0].records[0];
    CHECK(back.tolerance_counts == r.tolerance_counts);
    CHECK(back.unknown_values == r.unknown_values);
    CHECK(f->groups[0].records[1].unknown_values.empty());
    const std::string text = read_file(dir / "f.tsv");
    CHECK(std::count(text.begin(), text.end(), '\t') == 3 + 2 + 12 + 10);  // header, group, 13 fields, 11 fields
}
