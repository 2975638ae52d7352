// Object storage against a real server: SeaweedFS (`weed mini`) on 127.0.0.1, started by each
// test case (about 1 s) with its data in a temporary folder, and a loopback fault proxy of the
// fixture's (tests/remote/s3_fixture.py). Skipped (exit 77) where SeaweedFS is not installed
// or cannot start. Every request loop is bounded in count and time; the whole file runs in
// about 30 s. The first case, libcurl's loading, needs no server (about 1 s).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "dataset/dataset_names.hpp"
#include "dataset/folder_ledger.hpp"
#include "remote/curl_library.hpp"
#include "remote/dataset_push.hpp"
#include "remote/s3_client.hpp"
#include "remote/s3_storage.hpp"
#include "remote_fixture.hpp"
#include "shardpack/order.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
using namespace shardpack::remote;

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A client for the server (or its proxy) with limits small enough for tests.
s3_config test_config(const s3_server& server, bool through_proxy, bool make_bucket = true) {
    server.use_environment(through_proxy);
    s3_config c = s3_config::from_environment();
    c.max_attempts = 4;
    c.backoff_base_ms = 10;
    c.backoff_max_ms = 100;
    c.attempt_timeout_ms = 10000;  // a loaded CI machine: a 3 MiB PUT took over 7 s there once
    c.deadline_ms = 30000;
    if (make_bucket) s3_client(c).create_bucket(server.bucket);  // `weed mini -bucket` does not always make it in time
    return c;
}

std::vector<unsigned char> pattern(std::size_t n, unsigned seed) {
    std::vector<unsigned char> v(n);
    std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
    for (auto& b : v) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b = static_cast<unsigned char>(x);
    }
    return v;
}

std::set<std::string> listed_names(s3_client& c, const std::string& bucket, const std::string& prefix) {
    std::set<std::string> out;
    for (const auto& o : c.list_objects(bucket, prefix + "/")) out.insert(o.key.substr(prefix.size() + 1));
    return out;
}

}  // namespace

TEST_CASE("s3 client: PUT, ranged GET, LIST, DELETE and errors against SeaweedFS", "[remote]") {
    temp_dir tmp("s3c");
    s3_server server(tmp / "server");
    s3_client client(test_config(server, false));
    const auto data = pattern(3 << 20, 1);
    client.put_object(server.bucket, "c/obj.bin", data);
    client.put_object(server.bucket, "c/sub/x y+z.bin", pattern(10, 2));  // a key that needs encoding

    // Ranged GETs: the bytes asked for, checked against the object's size.
    for (auto [off, len] : {std::pair<std::uint64_t, std::uint64_t>{0, 1}, {5, 100}, {(3 << 20) - 7, 7}, {0, 3 << 20}}) {
        const auto got = client.get_range(server.bucket, "c/obj.bin", off, len, data.size());
        REQUIRE(got.size() == len);
        CHECK(std::equal(got.begin(), got.end(), data.begin() + std::ptrdiff_t(off)));
    }
    // Many at once (curl multi): all complete, all right.
    std::vector<s3_pending> many;
    for (int i = 0; i < 40; ++i) many.push_back(client.get_range_async(server.bucket, "c/obj.bin", std::uint64_t(i) * 4096, 4096, data.size()));
    for (int i = 0; i < 40; ++i) {
        const auto& got = many[std::size_t(i)].wait();
        CHECK(std::equal(got.begin(), got.end(), data.begin() + i * 4096));
    }
    bool found = false;
    CHECK(client.get_object(server.bucket, "c/sub/x y+z.bin", 1 << 20, &found) == pattern(10, 2));
    CHECK(found);
    const auto info = client.head_object(server.bucket, "c/obj.bin", &found);
    CHECK(found);
    CHECK(info.size == data.size());

    const auto listed = client.list_objects(server.bucket, "c/");
    std::set<std::string> keys;
    for (const auto& o : listed) keys.insert(o.key);
    CHECK(keys == std::set<std::string>{"c/obj.bin", "c/sub/x y+z.bin"});

    // A missing object: found = false; a range past the end: refused before any request; a
    // whole object larger than allowed: an error naming it.
    client.get_object(server.bucket, "c/none", 1 << 20, &found);
    CHECK_FALSE(found);
    CHECK_THROWS_WITH(client.get_range(server.bucket, "c/obj.bin", data.size() - 1, 2, data.size()),
                      Catch::Contains("past the end"));
    CHECK_THROWS_WITH(client.get_object(server.bucket, "c/obj.bin", 1000), Catch::Contains("larger than 1000 bytes"));
    // A wrong size claimed for the object: its Content-Range total differs, an error after retries.
    CHECK_THROWS_WITH(client.get_range(server.bucket, "c/obj.bin", 0, 10, data.size() + 1), Catch::Contains("Content-Range"));

    client.delete_object(server.bucket, "c/sub/x y+z.bin");
    client.delete_object(server.bucket, "c/sub/x y+z.bin");  // already gone: fine
    CHECK(client.list_objects(server.bucket, "c/sub/").empty());

    // Wrong credentials: 403 at once, no retries.
    s3_config bad = test_config(server, false);
    bad.secret_key = "wrong";
    s3_client denied(bad);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(denied.get_range(server.bucket, "c/obj.bin", 0, 10), Catch::Contains("HTTP 403"));
    CHECK(denied.stats().attempts == 1);
    CHECK(seconds_since(t0) < 5);
}

TEST_CASE("s3 client: 503s, truncated bodies, wrong Content-Range, resets and slow answers through a fault proxy", "[remote]") {
    temp_dir tmp("s3f");
    s3_server server(tmp / "server");
    s3_client direct(test_config(server, false));
    const auto data = pattern(1 << 20, 3);
    direct.put_object(server.bucket, "f/obj.bin", data);
    s3_client client(test_config(server, true));

    auto check_read = [&](std::uint64_t off, std::uint64_t len) {
        const auto got = client.get_range(server.bucket, "f/obj.bin", off, len, data.size());
        REQUIRE(got.size() == len);
        CHECK(std::equal(got.begin(), got.end(), data.begin() + std::ptrdiff_t(off)));
    };
    // Each fault for fewer requests than the attempt limit: a retry succeeds, right bytes.
    for (const char* mode : {"503", "truncate", "badrange", "reset"}) {
        INFO(mode);
        REQUIRE(server.command(std::string("fault ") + mode + " 2") == "ok");
        const auto before = client.stats();
        const auto t0 = std::chrono::steady_clock::now();
        check_read(1000, 200000);
        // (curl itself may retry once on a fresh connection after a reset, unseen by the client)
        if (std::string(mode) == "reset") CHECK(client.stats().retries - before.retries >= 1);
        else CHECK(client.stats().retries - before.retries == 2);
        CHECK(seconds_since(t0) < 5);
    }
    // Faults beyond the attempt limit: a clear error naming the object, the range, the reason
    // and the attempts, within the deadline.
    REQUIRE(server.command("fault 503 100") == "ok");
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(client.get_range(server.bucket, "f/obj.bin", 0, 100, data.size()),
                      Catch::Contains("s3://" + server.bucket + "/f/obj.bin bytes 0-99") && Catch::Contains("HTTP 503 SlowDown") &&
                          Catch::Contains("4 attempts"));
    CHECK(seconds_since(t0) < 5);
    REQUIRE(server.command("fault badrange 100") == "ok");
    CHECK_THROWS_WITH(client.get_range(server.bucket, "f/obj.bin", 0, 100, data.size()), Catch::Contains("wrong Content-Range"));
    REQUIRE(server.command("fault truncate 100") == "ok");
    CHECK_THROWS_WITH(client.get_range(server.bucket, "f/obj.bin", 0, 100000, data.size()), Catch::Contains("truncated"));
    REQUIRE(server.command("clear") == "ok");

    // Slow answers: once the client has seen enough normal GETs, a GET slower than their p95
    // gets a hedged duplicate, which wins long before the slow one would have.
    // A client of its own: the faults above may have spent the first client's hedge budget
    // (hedges are capped at a fraction of all its GETs) when a loaded machine made their
    // attempts slow, and CI then saw no hedge here.
    s3_client hedging(test_config(server, true, false));
    auto check_hedging_read = [&](std::uint64_t off, std::uint64_t len) {
        const auto got = hedging.get_range(server.bucket, "f/obj.bin", off, len, data.size());
        REQUIRE(got.size() == len);
        CHECK(std::equal(got.begin(), got.end(), data.begin() + std::ptrdiff_t(off)));
    };
    for (int i = 0; i < 30; ++i) check_hedging_read(std::uint64_t(i) * 1000, 1000);
    REQUIRE(server.command("fault slow 1 4000") == "ok");
    const auto before = hedging.stats();
    t0 = std::chrono::steady_clock::now();
    check_hedging_read(4096, 4096);
    CHECK(seconds_since(t0) < 2.5);
    CHECK(hedging.stats().hedges - before.hedges == 1);
    CHECK(hedging.stats().hedge_wins - before.hedge_wins == 1);

    // The server stopped: connection failures, retried, then an error within the deadline.
    REQUIRE(server.command("stop") == "ok");
    s3_config c = test_config(server, false, false);
    c.deadline_ms = 3000;
    s3_client stopped(c);
    t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(stopped.get_range(server.bucket, "f/obj.bin", 0, 100), Catch::Contains("curl:"));
    CHECK(seconds_since(t0) < 6);
    REQUIRE(server.command("start") == "ok");
    // A restarted `weed mini` answers 500 for about 4 s, until its volumes are back: a client
    // allowed more attempts rides that out.
    s3_config patient = s3_config::from_environment();
    patient.max_attempts = 20;
    patient.backoff_max_ms = 1000;
    patient.deadline_ms = 30000;
    s3_client restarted(patient);
    const auto again = restarted.get_range(server.bucket, "f/obj.bin", 0, 100);
    CHECK(std::equal(again.begin(), again.end(), data.begin()));
}

// libcurl is not linked but opened (dlopen) at the first use of remote storage (issue #22): a
// command that never uses it does not load it, and where it cannot be loaded push and s3://
// reads fail with an error naming it (exit 1), never a crash. The shim (tests/fault_inject/
// no_libcurl.c) hides libcurl from dlopen and reports at exit whether a libcurl was mapped.
// About 1 s.
TEST_CASE("libcurl: loaded only by remote storage, a clear error where it cannot be", "[remote]") {
    temp_dir tmp("s3curl");
    const std::string dir = tmp / "ds";
    synthetic_options o;
    o.records = 12;
    write_synthetic(dir, o);
    const std::string soname = libcurl_soname();
    REQUIRE(soname.rfind("libcurl", 0) == 0);
    const std::string loaded = "no_libcurl: libcurl was loaded";
    // Credentials and an endpoint where nothing listens (port 9): what push needs before it connects.
    const std::vector<std::string> hidden = {preload(SHARDPACK_NO_LIBCURL), "SHARDPACK_NO_LIBCURL=hide",
                                             "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
                                             "AWS_ENDPOINT_URL_S3=http://127.0.0.1:9", "SHARDPACK_S3_MAX_ATTEMPTS=1",
                                             "SHARDPACK_CACHE_DIR=off"};
    // The same with libcurl let through: the shim only reports whether it was loaded.
    std::vector<std::string> let_through = hidden;
    let_through[1] = "SHARDPACK_NO_LIBCURL=report";

    // Commands that never touch object storage: libcurl stays out of the process, linked or
    // opened (let through, so that an open would be seen, not refused).
    make_samples(tmp / "src", {"--count", "4", "--width", "40", "--height", "30"});
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"--version"},
                                               {"--help"},
                                               {"build", "--csv", tmp / "src/list.csv", "--classes",
                                                tmp / "src/class_dict.csv", "--out", tmp / "built"},
                                               {"verify", dir},
                                               {"inspect", dir}}) {
        const auto r = run_cli(args, let_through);
        INFO(args[0] << ": " << r.err);
        CHECK(r.code == 0);
        CHECK(r.err.find("no_libcurl") == std::string::npos);
    }

    // Remote storage without libcurl: exit 1, the library and the reason named.
    const std::string url = "s3://bucket/ds";
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"push", dir, url}, {"verify", url}, {"inspect", url}}) {
        const auto r = run_cli(args, hidden);
        INFO(args[0] << ": " << r.err);
        CHECK(r.code == 1);
        CHECK(r.err.find("cannot load " + soname) != std::string::npos);
        CHECK(r.err.find("hidden by the test") != std::string::npos);
        CHECK(r.err.find(loaded) == std::string::npos);
    }
    // The shim's report works: with libcurl let through, push loads it (and fails to connect).
    const auto pushed = run_cli({"push", dir, url}, let_through);
    INFO(pushed.err);
    CHECK(pushed.code == 1);
    CHECK(pushed.err.find("curl:") != std::string::npos);
    CHECK(pushed.err.find(loaded) != std::string::npos);

    // In this process: the build's libcurl loads; a missing library, or one without libcurl's
    // functions (the shim), is an error naming it.
    CHECK(curl_library().easy_init != nullptr);
    CHECK_THROWS_WITH(load_curl_functions("libshardpack-no-such-library.so.0"),
                      Catch::Contains("cannot load libshardpack-no-such-library.so.0 ("));
    CHECK_THROWS_WITH(load_curl_functions(SHARDPACK_NO_LIBCURL),
                      Catch::Contains(std::string(SHARDPACK_NO_LIBCURL) + " has no curl_global_init ("));
}

TEST_CASE("push: verified upload, manifest last, only changed shards, the grace rule of rebuilds", "[remote]") {
    temp_dir tmp("s3p");
    s3_server server(tmp / "server");
    s3_client client(test_config(server, false));
    ::setenv("SHARDPACK_CACHE_DIR", (tmp / "cache").c_str(), 1);
    const std::string url = "s3://" + server.bucket + "/ds/train";
    const std::string dir = tmp / "ds";

    synthetic_options o;
    o.records = 40;
    o.shard_size = 24 << 10;
    write_synthetic(dir, o);
    auto manifest_names = [](const std::string& d) {
        std::set<std::string> names;
        for (const auto& e : std::filesystem::directory_iterator(d)) {
            const std::string n = e.path().filename().string();
            if (is_shard_name(n)) names.insert(n);
        }
        return names;
    };
    const dataset local1 = dataset::open(dir);
    std::set<std::string> gen1;
    for (std::size_t k = 0; k < local1.shard_count(); ++k) gen1.insert(local1.shard(k).name());
    REQUIRE(gen1.size() >= 3);
    (void)manifest_names;

    // Bad usage: exit 2, nothing sent.
    CHECK(run_command(SHARDPACK_CLI, {"push", dir, "/not/a/url"}).code == 2);
    CHECK(run_command(SHARDPACK_CLI, {"push", dir, "s3://B/x"}).code == 2);

    auto r = run_command(SHARDPACK_CLI, {"push", dir, url, "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    auto report = detail::json::parse(r.out);
    CHECK(report.at("shards_uploaded").as_u64() == gen1.size());
    auto names = listed_names(client, server.bucket, "ds/train");
    std::set<std::string> expect = gen1;
    expect.insert("manifest.json");
    expect.insert(".shardpack");
    CHECK(names == expect);
    bool found = false;
    const std::string local_manifest = read_file(dir + "/manifest.json");
    CHECK(client.get_object(server.bucket, "ds/train/manifest.json", 1 << 26, &found) ==
          std::vector<unsigned char>(local_manifest.begin(), local_manifest.end()));

    // verify and inspect read the pushed dataset from the server.
    r = run_command(SHARDPACK_CLI, {"verify", url, "--json"});
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(detail::json::parse(r.out).at("records").as_u64() == 40);
    r = run_command(SHARDPACK_CLI, {"inspect", url, "--json"});
    CHECK(r.code == 0);
    CHECK(r.err.find("warn") == std::string::npos);
    CHECK(detail::json::parse(r.out).at("content_hash").as_string() == local1.content_hash());

    // Again, unchanged: nothing uploaded.
    r = run_command(SHARDPACK_CLI, {"push", dir, url, "--json"});
    REQUIRE(r.code == 0);
    report = detail::json::parse(r.out);
    CHECK(report.at("shards_uploaded").as_u64() == 0);
    CHECK(report.at("manifest_unchanged").as_bool());

    // A rebuild that appends records: the unchanged leading shards are not sent again; the old
    // manifest's shards stay (retained) for readers that read it.
    o.records = 52;
    write_synthetic(dir, o);
    const dataset local2 = dataset::open(dir);
    std::set<std::string> gen2;
    for (std::size_t k = 0; k < local2.shard_count(); ++k) gen2.insert(local2.shard(k).name());
    r = run_command(SHARDPACK_CLI, {"push", dir, url, "--json"});
    REQUIRE(r.code == 0);
    report = detail::json::parse(r.out);
    std::size_t changed = 0;
    for (const auto& n : gen2) changed += !gen1.count(n);
    CHECK(report.at("shards_uploaded").as_u64() == changed);
    CHECK(report.at("shards_present").as_u64() == gen2.size() - changed);
    CHECK(changed < gen2.size());
    names = listed_names(client, server.bucket, "ds/train");
    for (const auto& n : gen1) CHECK(names.count(n));
    for (const auto& n : gen2) CHECK(names.count(n));
    const auto ledger = folder_ledger::parse([&] {
        const auto b = client.get_object(server.bucket, "ds/train/.shardpack", 1 << 20);
        return std::string(b.begin(), b.end());
    }());
    REQUIRE(ledger);
    for (const auto& n : gen1)
        if (!gen2.count(n)) CHECK(ledger->retained.count(n));

    // Another rebuild: now the first generation's own shards go (named by neither manifest).
    o.records = 60;
    write_synthetic(dir, o);
    const dataset local3 = dataset::open(dir);
    std::set<std::string> gen3;
    for (std::size_t k = 0; k < local3.shard_count(); ++k) gen3.insert(local3.shard(k).name());
    r = run_command(SHARDPACK_CLI, {"push", dir, url});
    REQUIRE(r.code == 0);
    names = listed_names(client, server.bucket, "ds/train");
    for (const auto& n : gen1)
        CHECK(names.count(n) == std::size_t(gen2.count(n) || gen3.count(n)));
    for (const auto& n : gen2) CHECK(names.count(n));
    for (const auto& n : gen3) CHECK(names.count(n));

    // An object the manifests and the ledger do not name is never removed.
    client.put_object(server.bucket, "ds/train/notes.txt", pattern(5, 9));
    r = run_command(SHARDPACK_CLI, {"push", dir, url});
    REQUIRE(r.code == 0);
    CHECK(r.err.find("named by no shardpack manifest") != std::string::npos);
    CHECK(listed_names(client, server.bucket, "ds/train").count("notes.txt"));

    // A damaged local dataset is not pushed (exit 1), and the remote one stays as it was.
    const auto before = client.get_object(server.bucket, "ds/train/manifest.json", 1 << 26);
    const std::string victim = dir + "/" + *gen3.rbegin();
    std::string bytes = read_file(victim);
    bytes[bytes.size() / 2] ^= 1;
    write_file(victim, bytes);
    r = run_command(SHARDPACK_CLI, {"push", dir, url});
    CHECK(r.code == 1);
    CHECK(r.err.find("not pushed") != std::string::npos);
    CHECK(client.get_object(server.bucket, "ds/train/manifest.json", 1 << 26) == before);

    // No credentials: exit 1 with the reason.
    ::unsetenv("AWS_ACCESS_KEY_ID");
    ::unsetenv("AWS_SECRET_ACCESS_KEY");
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", (tmp / "none").c_str(), 1);
    r = run_command(SHARDPACK_CLI, {"push", dir, url});
    CHECK(r.code == 1);
    CHECK(r.err.find("no S3 credentials") != std::string::npos);
    ::unsetenv("AWS_SHARED_CREDENTIALS_FILE");
}

TEST_CASE("s3 config: credentials and endpoint from a profile file", "[remote]") {
    temp_dir tmp("s3cfg");
    write_file(tmp / "credentials", "[default]\naws_access_key_id = AKDEFAULT\naws_secret_access_key = s1\n\n"
                                    "[other]\naws_access_key_id=AKOTHER\naws_secret_access_key=s2\naws_session_token = tok\n");
    write_file(tmp / "config", "[profile other]\nregion = eu-west-3\nendpoint_url = http://127.0.0.1:9/\n");
    for (const char* v : {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION", "AWS_DEFAULT_REGION",
                          "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"})
        ::unsetenv(v);
    ::setenv("AWS_SHARED_CREDENTIALS_FILE", (tmp / "credentials").c_str(), 1);
    ::setenv("AWS_CONFIG_FILE", (tmp / "config").c_str(), 1);
    s3_config c = s3_config::from_environment();
    CHECK(c.access_key == "AKDEFAULT");
    CHECK(c.endpoint == "https://s3.us-east-1.amazonaws.com");
    CHECK_FALSE(c.path_style);
    ::setenv("AWS_PROFILE", "other", 1);
    c = s3_config::from_environment();
    CHECK(c.access_key == "AKOTHER");
    CHECK(c.session_token == "tok");
    CHECK(c.region == "eu-west-3");
    CHECK(c.endpoint == "http://127.0.0.1:9");
    CHECK(c.path_style);
    ::setenv("AWS_ENDPOINT_URL", "ftp://x", 1);
    CHECK_THROWS_WITH(s3_config::from_environment(), Catch::Contains("http://"));
    ::setenv("AWS_PROFILE", "missing", 1);
    ::unsetenv("AWS_ENDPOINT_URL");
    CHECK_THROWS_WITH(s3_config::from_environment(), Catch::Contains("no S3 credentials"));
    for (const char* v : {"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", "AWS_PROFILE"}) ::unsetenv(v);

    CHECK(parse_s3_url("s3://my-bucket/a/b/").prefix == "a/b");
    CHECK(parse_s3_url("s3://my-bucket").prefix.empty());
    CHECK_THROWS(parse_s3_url("s3://My_Bucket/x"));
    CHECK_THROWS(parse_s3_url("s3://bucket/a/../b"));
    CHECK_THROWS(parse_s3_url("s3://bucket//b"));
    CHECK_THROWS(parse_s3_url("http://bucket/b"));
}

namespace {

// Every record of `remote` equals the same record of `local`: key, image and label bytes.
void require_same_records(const dataset& remote, const dataset& local) {
    REQUIRE(remote.size() == local.size());
    REQUIRE(remote.content_hash() == local.content_hash());
    for (std::size_t i = 0; i < local.size(); ++i) {
        const sample a = remote.at(i), b = local.at(i);
        REQUIRE(a.key() == b.key());
        REQUIRE(std::equal(a.image().begin(), a.image().end(), b.image().begin(), b.image().end()));
        REQUIRE(std::equal(a.label().begin(), a.label().end(), b.label().begin(), b.label().end()));
    }
}

std::shared_ptr<s3_storage> storage_for(const s3_config& c, const std::string& url, const std::string& cache,
                                        std::uint64_t buffer_bytes = remote_options{}.buffer_bytes) {
    remote_options ro;
    ro.cache_dir = cache;
    ro.buffer_bytes = buffer_bytes;
    return open_s3_storage(std::make_shared<s3_client>(c), url, ro);
}

// A synthetic dataset written into `dir` and pushed to `url`; returns the local copy, opened.
dataset push_synthetic(s3_client& client, const std::string& dir, const std::string& url, const synthetic_options& o) {
    write_synthetic(dir, o);
    push_dataset(dir, url, client, [](const std::string&) {});
    return dataset::open(dir);
}

// The config with hedged GETs off: a client of it sends each GET once, so GETs count exactly.
s3_config without_hedging(s3_config c) {
    c.hedge_percentile = 0;
    return c;
}

// Opened to read through the S3 storage's own reads (merged ranged GETs, block read-ahead, the
// disk caches), which these tests count and fault: io pread. The default (automatic) puts the
// reader's I/O engine in front of them: see "s3 reads through the reader's I/O engine".
dataset open_remote(const std::shared_ptr<s3_storage>& st, const std::string& url) {
    open_options o;
    o.storage = st;
    o.io = io_mode::pread;
    return dataset::open(url, o);
}

}  // namespace

TEST_CASE("s3 reads: every record equals the local one, a batch is a few merged GETs, metadata cached on disk", "[remote]") {
    temp_dir tmp("s3r");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/read/ds";
    const std::string dir = tmp / "ds";
    synthetic_options o;
    o.records = 96;
    o.shard_size = 32 << 10;
    const dataset local = push_synthetic(client, dir, url, o);
    REQUIRE(local.shard_count() >= 4);

    auto st = storage_for(cfg, url, tmp / "cache");
    const dataset remote = open_remote(st, url);
    require_same_records(remote, local);
    const auto after_open = st->stats();
    // Every shard opened when first read: small ones fetched whole (one GET), none from the cache yet.
    CHECK(after_open.metadata_gets + after_open.shard_gets >= local.shard_count());
    CHECK(remote.open_shard_count() == local.shard_count());

    // A batch: its records grouped by shard, ranges merged, fetched concurrently; the decoded
    // batch equals the local one.
    const std::size_t n = 24;
    std::vector<std::size_t> idx(n);
    for (std::size_t j = 0; j < n; ++j) idx[j] = (j * 37) % local.size();
    const std::size_t pixels = o.width * o.height;
    std::vector<std::uint8_t> img_r(n * pixels * 3), img_l(n * pixels * 3), lab_r(n * pixels * o.classes), lab_l(lab_r.size());
    read_context ctx;
    auto batch = [&](const dataset& ds, std::vector<std::uint8_t>& img, std::vector<std::uint8_t>& lab) {
        sample_buffers out;
        out.image_u8 = img.data();
        out.image_capacity = img.size();
        out.label_u8 = lab.data();
        out.label_capacity = lab.size();
        ds.read_batch(idx.data(), n, out, ctx);
    };
    auto st2 = storage_for(cfg, url, tmp / "cache");
    const dataset remote2 = open_remote(st2, url);
    const auto s0 = st2->stats();
    // Opened again with the same cache: heads, tails and indexes come from the disk.
    CHECK(s0.metadata_gets == 0);
    CHECK(s0.shard_gets == 0);
    batch(remote2, img_r, lab_r);
    batch(local, img_l, lab_l);
    CHECK(img_r == img_l);
    CHECK(lab_r == lab_l);
    const auto s1 = st2->stats();
    CHECK(s1.metadata_gets == 0);
    CHECK(s1.shard_gets == 0);
    CHECK(s1.metadata_cache_hits >= 2 * remote2.open_shard_count());
    std::set<std::size_t> shards_touched;
    for (auto i : idx) {
        std::size_t k = 0;
        while (k + 1 < local.shard_count() && local.shard(k + 1).header().first_record <= i) ++k;
        shards_touched.insert(k);
    }
    CHECK(s1.range_gets - s0.range_gets == shards_touched.size());  // one merged GET per shard here (small shards)

    // The whole-shard cache evicts only the shards it wrote: a user's file, a link and a file
    // named like a shard but under another name pattern stay, whatever the byte limit.
    // (The cache makes and claims its folder first: a folder it did not make is refused.)
    const std::string shard_cache = tmp / "cache4";
    remote_options small;
    small.cache_dir = shard_cache;
    std::uint64_t largest = 0;
    for (std::size_t k = 0; k < local.shard_count(); ++k) largest = std::max(largest, local.shard_bytes(k));
    small.shard_cache_bytes = largest + 1;  // one shard at a time: every new shard evicts
    open_s3_storage(std::make_shared<s3_client>(cfg), url, small);
    test::write_file(shard_cache + "/shards/notes.txt", "mine");
    test::write_file(shard_cache + "/shards/shard-1.spk", "not a content name");
    std::filesystem::create_symlink(shard_cache + "/shards/notes.txt", shard_cache + "/shards/link");
    const dataset cached = open_remote(open_s3_storage(std::make_shared<s3_client>(cfg), url, small), url);
    require_same_records(cached, local);
    CHECK(test::read_file(shard_cache + "/shards/notes.txt") == "mine");
    CHECK(test::read_file(shard_cache + "/shards/shard-1.spk") == "not a content name");
    CHECK(std::filesystem::is_symlink(shard_cache + "/shards/link"));
    std::size_t cached_shards = 0;
    for (const auto& e : std::filesystem::directory_iterator(shard_cache + "/shards"))
        cached_shards += is_shard_name(e.path().filename().string());
    CHECK(cached_shards == 1);  // the cache did evict its own shards

    // A byte changed on the server inside a record: the read fails naming the shard and the
    // record (the record checksum), never returns the wrong byte.
    const std::string name = local.shard(1).name();
    auto bytes = client.get_object(server.bucket, "read/ds/" + name, 1 << 26);
    const auto e = local.shard(1).entry(2);
    bytes[std::size_t(e.offset + e.stored_size / 2)] ^= 0x40;
    client.put_object(server.bucket, "read/ds/" + name, bytes);
    const dataset damaged = open_remote(storage_for(cfg, url, tmp / "cache"), url);
    const std::size_t victim = std::size_t(local.shard(1).header().first_record + 2);
    CHECK_THROWS_WITH(damaged.at(victim), Catch::Contains(name) && Catch::Contains("record 2") && Catch::Contains("checksum"));
    CHECK_NOTHROW(damaged.at(victim + 1));
    ::setenv("SHARDPACK_CACHE_DIR", (tmp / "cache3").c_str(), 1);
    const auto v = run_command(SHARDPACK_CLI, {"verify", url});
    CHECK(v.code == 1);
    CHECK(v.err.find(name + ": record 2") != std::string::npos);
    CHECK(v.err.find("file hash") != std::string::npos);

    // dataset::open takes the URL itself (the environment's client).
    ::setenv("SHARDPACK_CACHE_DIR", (tmp / "cache2").c_str(), 1);
    const dataset by_url = dataset::open(url);
    CHECK(by_url.size() == local.size());
    CHECK(by_url.at(0).key() == local.at(0).key());

}

TEST_CASE("s3 reads under faults: retries succeed, else a clear error naming shard and record, bounded in time", "[remote]") {
    temp_dir tmp("s3rf");
    s3_server server(tmp / "server");
    const s3_config direct = test_config(server, false);
    s3_client client(direct);
    const std::string url = "s3://" + server.bucket + "/faults/ds";
    const std::string dir = tmp / "ds";
    synthetic_options o;
    o.records = 48;
    o.shard_size = 32 << 10;
    const dataset local = push_synthetic(client, dir, url, o);
    s3_config proxied = test_config(server, true);
    {  // every shard's head and index into the disk cache: the faults below hit record GETs
        const dataset warm = open_remote(storage_for(proxied, url, tmp / "cache"), url);
        require_same_records(warm, local);
    }

    const std::size_t n = 16, pixels = o.width * o.height;
    std::vector<std::size_t> idx(n);
    for (std::size_t j = 0; j < n; ++j) idx[j] = (j * 7) % local.size();
    std::vector<std::uint8_t> img(n * pixels * 3), want(n * pixels * 3);
    read_context ctx;
    auto read = [&](const dataset& ds, std::vector<std::uint8_t>& out_img) {
        sample_buffers out;
        out.image_u8 = out_img.data();
        out.image_capacity = out_img.size();
        ds.read_batch(idx.data(), n, out, ctx);
    };
    read(local, want);
    auto gets_seen = [&] { return std::stoul(server.command("stats").substr(3)); };
    for (const char* mode : {"503", "truncate", "badrange", "reset", "slow"}) {
        INFO(mode);
        // A fresh storage each time (its fetched ranges are not reused), the disk cache warm.
        const dataset fresh = open_remote(storage_for(proxied, url, tmp / "cache"), url);
        REQUIRE(server.command(std::string("fault ") + mode + " 2 3000") == "ok");
        const auto gets0 = gets_seen();
        std::fill(img.begin(), img.end(), 0);
        const auto t0 = std::chrono::steady_clock::now();
        read(fresh, img);
        CHECK(img == want);
        CHECK(gets_seen() - gets0 >= 3);  // the faulted GETs and their retries went through the proxy
        CHECK(seconds_since(t0) < 8);
        REQUIRE(server.command("clear") == "ok");
    }
    // More faults than attempts: the error names the shard, the record and the reason.
    const dataset failing = open_remote(storage_for(proxied, url, tmp / "cache"), url);
    REQUIRE(server.command("fault 503 1000") == "ok");
    auto t0 = std::chrono::steady_clock::now();
    CHECK_THROWS_WITH(read(failing, img), Catch::Contains(".spk: record") && Catch::Contains("dataset index") &&
                                             Catch::Contains("HTTP 503 SlowDown"));
    CHECK(seconds_since(t0) < 10);
    REQUIRE(server.command("clear") == "ok");

    // The server stopped while a reader loops over batches: the loop ends with an error naming
    // the shard and record, within the deadline.
    s3_config short_deadline = test_config(server, false);
    short_deadline.deadline_ms = 3000;
    // A buffer of one chunk: every round fetches again. With the default buffer the whole small
    // dataset stayed in memory, and a reader that had read every record before the stop (a
    // loaded CI machine) ran its 100,000 rounds without the server: no error to check.
    auto st3 = storage_for(short_deadline, url, tmp / "cache", 1);
    const dataset looping = open_remote(st3, url);
    std::string failure;
    std::atomic<bool> started{false};
    std::thread reader([&] {
        read_context c2;
        std::vector<std::uint8_t> buf(n * pixels * 3);
        std::vector<std::size_t> ids(n);
        for (int round = 0; round < 100000; ++round) {
            for (std::size_t j = 0; j < n; ++j) ids[j] = (std::size_t(round) * 13 + j * 5) % looping.size();
            sample_buffers out;
            out.image_u8 = buf.data();
            out.image_capacity = buf.size();
            try {
                looping.read_batch(ids.data(), n, out, c2);
            } catch (const std::exception& e) {
                failure = e.what();
                return;
            }
            started = true;
        }
    });
    while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    t0 = std::chrono::steady_clock::now();
    REQUIRE(server.command("stop") == "ok");
    reader.join();
    CHECK(seconds_since(t0) < 10);
    CHECK_THAT(failure, Catch::Contains(".spk: record") && Catch::Contains("curl:"));
}

TEST_CASE("s3 reads during rebuilds and pushes: a reader sees the old dataset or the new one, never a mix", "[remote]") {
    temp_dir tmp("s3rb");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/rebuild/ds";
    synthetic_options a, b;
    a.records = 40;
    a.shard_size = b.shard_size = 24 << 10;
    b.records = 56;
    write_synthetic(tmp / "a", a);
    write_synthetic(tmp / "b", b);
    const dataset da = dataset::open(tmp / "a"), db = dataset::open(tmp / "b");
    push_dataset(tmp / "a", url, client, [](const std::string&) {});

    std::atomic<bool> stop{false};
    std::atomic<int> reads_a{0}, reads_b{0};
    std::string failure;
    std::thread reader([&] {
        const auto t0 = std::chrono::steady_clock::now();
        while (!stop && seconds_since(t0) < 60) {
            try {
                const dataset ds = open_remote(storage_for(cfg, url, tmp / "cache"), url);
                const dataset& want = ds.content_hash() == da.content_hash() ? da : db;
                if (ds.content_hash() != want.content_hash()) throw error("content hash of neither generation");
                require_same_records(ds, want);
                (want.content_hash() == da.content_hash() ? reads_a : reads_b)++;
            } catch (const std::exception& e) {
                failure = e.what();
                return;
            }
        }
    });
    for (int round = 0; round < 4; ++round) {
        push_dataset(tmp / (round % 2 == 0 ? "b" : "a"), url, client, [](const std::string&) {});
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    stop = true;
    reader.join();
    CHECK(failure.empty());
    INFO(failure);
    CHECK(reads_a + reads_b >= 2);
}

namespace {

// GETs of every kind a storage made (records, whole small shards, heads and tails).
std::uint64_t storage_gets(const remote_stats& s) { return s.range_gets + s.shard_gets + s.metadata_gets; }

// The shards the records `idx` lie in.
std::set<std::size_t> shards_of(const dataset& ds, const std::vector<std::size_t>& idx) {
    std::set<std::size_t> out;
    for (auto i : idx) {
        std::size_t k = 0;
        while (k + 1 < ds.shard_count() && ds.shard_first_record(k + 1) <= i) ++k;
        out.insert(k);
    }
    return out;
}

struct batch_buffers {
    std::vector<std::uint8_t> image, label;
    sample_buffers out;
    batch_buffers(const synthetic_options& o, std::size_t n)
        : image(n * o.width * o.height * o.channels), label(n * o.width * o.height * o.classes) {
        out.image_u8 = image.data();
        out.image_capacity = image.size();
        out.label_u8 = label.data();
        out.label_capacity = label.size();
    }
};

}  // namespace

TEST_CASE("s3 lazy opens: open fetches the manifest and shard 0, a first batch fetches its shards at once, a small one whole", "[remote]") {
    temp_dir tmp("s3lazy");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/lazy/ds";
    synthetic_options o;
    o.records = 160;
    o.shard_size = 4 << 10;  // a record or two per shard: about a hundred shards
    const dataset local = push_synthetic(client, tmp / "ds", url, o);
    REQUIRE(local.shard_count() >= 60);

    const s3_config exact = without_hedging(cfg);  // GETs counted exactly: no hedged duplicates
    auto counting = std::make_shared<s3_client>(exact);
    remote_options ro;
    ro.cache_dir = tmp / "cache";
    auto st = open_s3_storage(counting, url, ro);
    const dataset remote = open_remote(st, url);
    // open: manifest.json and shard 0 (small: one GET, whole); no other shard opened or fetched.
    CHECK(counting->stats().gets == 2);
    CHECK(st->stats().shard_gets == 1);
    CHECK(st->stats().metadata_gets == 0);
    CHECK(remote.open_shard_count() == 1);

    // A first batch of 16 records from 16 shards spread over the dataset: one GET per shard
    // (head, index and records together), all sent at once: each GET held back 400 ms by the
    // proxy, the batch takes about that once, not 16 times.
    std::vector<std::size_t> idx;
    for (std::size_t k = 1; idx.size() < 16; k += local.shard_count() / 17) idx.push_back(std::size_t(local.shard_first_record(k)));
    const auto touched = shards_of(local, idx);
    REQUIRE(touched.size() == 16);
    batch_buffers got(o, idx.size()), want(o, idx.size());
    read_context ctx;
    local.read_batch(idx.data(), idx.size(), want.out, ctx);
    remote_options cold = ro;
    cold.cache_dir = tmp / "cache-slow";
    auto slow_st = open_s3_storage(std::make_shared<s3_client>(test_config(server, true)), url, cold);
    const dataset slow = open_remote(slow_st, url);
    REQUIRE(server.command("fault slow 16 400") == "ok");
    const auto t0 = std::chrono::steady_clock::now();
    slow.read_batch(idx.data(), idx.size(), got.out, ctx);
    const double took = seconds_since(t0);
    REQUIRE(server.command("clear") == "ok");
    CHECK(took < 2.5);  // 16 GETs one after the other: at least 6.4 s
    CHECK(got.image == want.image);
    CHECK(got.label == want.label);
    CHECK(slow_st->stats().shard_gets == 1 + touched.size());
    CHECK(slow_st->stats().range_gets == 0);

    const auto before = st->stats();
    const auto gets_before = counting->stats().gets;
    std::fill(got.image.begin(), got.image.end(), 0);
    remote.read_batch(idx.data(), idx.size(), got.out, ctx);
    CHECK(got.image == want.image);
    CHECK(got.label == want.label);
    CHECK(storage_gets(st->stats()) - storage_gets(before) == touched.size());
    CHECK(counting->stats().gets - gets_before == touched.size());
    CHECK(remote.open_shard_count() == 1 + touched.size());

    // Opened again with the same disk cache: heads and indexes come from the disk (no GET at
    // open but the manifest's), and the batch GETs only its records, one range per shard.
    auto again_client = std::make_shared<s3_client>(exact);
    auto st2 = open_s3_storage(again_client, url, ro);
    const dataset again = open_remote(st2, url);
    CHECK(again_client->stats().gets == 1);
    std::fill(got.image.begin(), got.image.end(), 0);
    again.read_batch(idx.data(), idx.size(), got.out, ctx);
    CHECK(got.image == want.image);
    CHECK(got.label == want.label);
    const auto s2 = st2->stats();
    CHECK(s2.metadata_gets == 0);
    CHECK(s2.shard_gets == 0);
    CHECK(s2.range_gets == touched.size());
    CHECK(s2.metadata_cache_hits >= 2 * (1 + touched.size()));

    // One record read alone (at(), no batch to announce it): its shard opens with its GETs
    // started together, and the record is right.
    const std::size_t lone = std::size_t(local.shard_first_record(local.shard_count() - 1));
    const sample a = again.at(lone), b = local.at(lone);
    CHECK(a.key() == b.key());
    CHECK(std::equal(a.image().begin(), a.image().end(), b.image().begin(), b.image().end()));

    // A shard damaged on the server is found when first read (its index checksum), naming it.
    const std::string victim = local.shard_name(local.shard_count() - 2);
    auto bytes = client.get_object(server.bucket, "lazy/ds/" + victim, 1 << 20);
    bytes[bytes.size() - 50] ^= 1;  // in the index
    client.put_object(server.bucket, "lazy/ds/" + victim, bytes);
    remote_options fresh = ro;
    fresh.cache_dir = tmp / "cache-damaged";
    const dataset damaged = open_remote(open_s3_storage(std::make_shared<s3_client>(cfg), url, fresh), url);
    CHECK_THROWS_WITH(damaged.at(std::size_t(local.shard_first_record(local.shard_count() - 2))),
                      Catch::Contains(victim) && Catch::Contains("checksum"));
}

TEST_CASE("s3 block read-ahead: each block fetched once, in ranges of at most max_request, every batch exact, under faults too", "[remote]") {
    temp_dir tmp("s3blk");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/blocks/ds";
    synthetic_options o;
    o.records = 240;
    o.width = 48;
    o.height = 32;
    o.shard_size = 160 << 10;
    const dataset local = push_synthetic(client, tmp / "ds", url, o);
    REQUIRE(local.shard_count() >= 3);

    order_options oo;
    oo.kind = order_kind::blocks;
    oo.block = 10;
    oo.window = 4;
    oo.shard_starts = shard_starts_of(local);
    const auto order64 = full_order(local.size(), 7, 0, oo);
    const std::vector<std::size_t> order(order64.begin(), order64.end());
    const auto blocks = order_blocks(local.size(), oo.block, oo.shard_starts);
    const std::size_t batch = 16;
    std::uint64_t record_bytes = 0;  // the stored bytes of every record
    for (std::size_t k = 0; k < local.shard_count(); ++k)
        for (std::size_t r = 0; r < local.shard(k).record_count(); ++r) record_bytes += local.shard(k).entry(r).stored_size;

    remote_options ro;
    ro.cache_dir = tmp / "cache";
    ro.merge_gap = 4 << 10;      // shards of 160 KiB are above the whole-shard size (2 x 64 KiB + 4 KiB)
    ro.max_request = 48 << 10;   // a block (~10 records) takes several GETs: records straddle them
    {  // every shard's head and index into the disk cache: the GETs below are all of records
        const dataset warm = open_remote(open_s3_storage(std::make_shared<s3_client>(cfg), url, ro), url);
        require_same_records(warm, local);
    }

    // Reads the epoch (or `batches` batches of it) with the read-ahead, each batch compared with
    // the local one.
    auto epoch = [&](const dataset& ds, std::size_t batches) {
        block_read_ahead ahead(order64, blocks, 2 * batch);
        batch_buffers got(o, batch), want(o, batch);
        read_context ctx, lctx;
        for (std::size_t p = 0, b = 0; p + batch <= order.size() && b < batches; p += batch, ++b) {
            const auto& records = ahead.before(p);
            if (!records.empty()) ds.prefetch(records.data(), records.size(), ctx);
            local.read_batch(order.data() + p, batch, want.out, lctx);
            std::fill(got.image.begin(), got.image.end(), 0);
            ds.read_batch(order.data() + p, batch, got.out, ctx);
            REQUIRE(got.image == want.image);  // never a wrong byte
            REQUIRE(got.label == want.label);
        }
    };

    SECTION("every block once") {
        auto st = open_s3_storage(std::make_shared<s3_client>(cfg), url, ro);
        const dataset remote = open_remote(st, url);
        epoch(remote, order.size());
        const auto s = st->stats();
        // Each block's byte range fetched once (adjacent blocks announced together may share a
        // GET), in pieces of at most max_request: no record fetched twice, no GET per record.
        std::uint64_t pieces = 0;
        for (std::size_t b = 0; b + 1 < blocks.size(); ++b) {
            std::size_t k = 0;
            while (k + 1 < local.shard_count() && local.shard_first_record(k + 1) <= blocks[b]) ++k;
            const auto first = local.shard(k).entry(std::size_t(blocks[b] - local.shard_first_record(k)));
            const auto last = local.shard(k).entry(std::size_t(blocks[b + 1] - 1 - local.shard_first_record(k)));
            pieces += (last.offset + last.stored_size - first.offset + ro.max_request - 1) / ro.max_request;
        }
        CHECK(s.range_gets <= pieces);
        CHECK(s.range_bytes >= record_bytes);
        CHECK(s.range_bytes <= record_bytes + record_bytes / 10);  // alignment padding between records only
        CHECK(s.metadata_gets == 0);
    }
    SECTION("a range buffer smaller than the read-ahead: blocks dropped early are fetched again, bytes still exact") {
        remote_options tiny = ro;
        tiny.buffer_bytes = 96 << 10;
        auto st = open_s3_storage(std::make_shared<s3_client>(cfg), url, tiny);
        const dataset remote = open_remote(st, url);
        epoch(remote, order.size());
        CHECK(st->stats().range_bytes > record_bytes);
    }
    SECTION("faulty block GETs through the proxy: retried, the bytes exact") {
        const s3_config proxied = test_config(server, true);
        for (const char* mode : {"503", "truncate", "badrange", "reset", "slow"}) {
            INFO(mode);
            const dataset remote = open_remote(open_s3_storage(std::make_shared<s3_client>(proxied), url, ro), url);
            REQUIRE(server.command(std::string("fault ") + mode + " 3 1500") == "ok");
            const auto t0 = std::chrono::steady_clock::now();
            epoch(remote, 4);
            CHECK(seconds_since(t0) < 10);
            REQUIRE(server.command("clear") == "ok");
        }
    }
    SECTION("a block GET whose body has one byte changed: the record holding it fails its checksum, the others are exact") {
        const s3_config proxied = test_config(server, true);
        remote_options one_get = ro;
        one_get.max_request = 1 << 20;  // the block in one GET: the proxy changes its middle byte
        const dataset remote = open_remote(open_s3_storage(std::make_shared<s3_client>(proxied), url, one_get), url);
        std::size_t failed = 0;
        for (std::size_t b : {std::size_t(0), blocks.size() / 2}) {
            INFO("block " << b);
            std::vector<std::size_t> records;
            for (auto i = blocks[b]; i < blocks[b + 1]; ++i) records.push_back(std::size_t(i));
            std::size_t k = 0;
            while (k + 1 < local.shard_count() && local.shard_first_record(k + 1) <= blocks[b]) ++k;
            const auto first = local.shard(k).entry(std::size_t(blocks[b] - local.shard_first_record(k)));
            const auto last = local.shard(k).entry(std::size_t(blocks[b + 1] - 1 - local.shard_first_record(k)));
            const std::uint64_t changed = first.offset + (last.offset + last.stored_size - first.offset) / 2;
            REQUIRE(server.command("fault corrupt 1") == "ok");
            remote.prefetch(records.data(), records.size());
            const std::size_t failed_before = failed;
            for (const std::size_t i : records) {
                const auto e = local.shard(k).entry(std::size_t(i - local.shard_first_record(k)));
                const bool holds = changed >= e.offset && changed < e.offset + e.stored_size;
                if (holds) {
                    CHECK_THROWS_WITH(remote.at(i), Catch::Contains(local.shard_name(k) + ": record") &&
                                                        Catch::Contains("checksum mismatch"));
                    ++failed;
                } else {
                    const sample x = remote.at(i), y = local.at(i);
                    CHECK(std::equal(x.image().begin(), x.image().end(), y.image().begin(), y.image().end()));
                    CHECK(std::equal(x.label().begin(), x.label().end(), y.label().begin(), y.label().end()));
                }
            }
            CHECK(failed - failed_before <= 1);  // none when the changed byte is alignment padding between records
            REQUIRE(server.command("clear") == "ok");
        }
        CHECK(failed >= 1);  // (the data is the same every run: this does not depend on chance)
    }
}

TEST_CASE("s3 reads of a format 1.2 dataset: the binary shard table fetched once with the manifest, shards opened lazily", "[remote]") {
    temp_dir tmp("s3tbl");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/table/ds";
    synthetic_options o;
    o.records = 60;
    o.shard_size = 4 << 10;
    o.shard_table_above = 0;  // a binary shard table (format 1.2) whatever the shard count
    write_synthetic(tmp / "ds", o);
    const dataset local = dataset::open(tmp / "ds");
    REQUIRE_FALSE(local.shard_table_file().empty());
    REQUIRE(local.shard_count() >= 20);
    push_dataset(tmp / "ds", url, client, [](const std::string&) {});
    CHECK(listed_names(client, server.bucket, "table/ds").count(local.shard_table_file()));

    const s3_config exact = without_hedging(cfg);  // GETs counted exactly
    auto counting = std::make_shared<s3_client>(exact);
    remote_options ro;
    ro.cache_dir = tmp / "cache";
    auto st = open_s3_storage(counting, url, ro);
    const dataset remote = open_remote(st, url);
    // manifest.json, the shard table and shard 0 (whole); the shards' sizes come from the table:
    // no HEAD per shard, now or when a shard is opened.
    CHECK(counting->stats().gets == 3);
    CHECK(remote.open_shard_count() == 1);
    CHECK(remote.shard_table_file() == local.shard_table_file());
    std::vector<std::size_t> idx;
    for (std::size_t k = 2; idx.size() < 8; k += local.shard_count() / 9) idx.push_back(std::size_t(local.shard_first_record(k)));
    batch_buffers got(o, idx.size()), want(o, idx.size());
    read_context ctx;
    local.read_batch(idx.data(), idx.size(), want.out, ctx);
    const auto gets_before = counting->stats().gets;
    remote.read_batch(idx.data(), idx.size(), got.out, ctx);
    CHECK(got.image == want.image);
    CHECK(got.label == want.label);
    CHECK(counting->stats().gets - gets_before == shards_of(local, idx).size());
    require_same_records(remote, local);
    CHECK(counting->stats().requests == counting->stats().gets + 1);  // + the HEAD of manifest.json at open

    // verify reads the pushed 1.2 dataset from the server.
    ::setenv("SHARDPACK_CACHE_DIR", (tmp / "cache-verify").c_str(), 1);
    const auto v = run_command(SHARDPACK_CLI, {"verify", url, "--json"});
    INFO(v.err);
    CHECK(v.code == 0);
}

// ---- Issue 30: what changed between a check and a use (caches, pushes, headers, manifests)

namespace {

// name -> bytes of every entry of a folder (links as "link -> target").
std::map<std::string, std::string> folder_contents(const std::string& dir) {
    std::map<std::string, std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        const std::string n = e.path().filename().string();
        out[n] = e.is_symlink() ? "link -> " + std::filesystem::read_symlink(e.path()).string() : read_file(e.path().string());
    }
    return out;
}

// Flips one byte of a file in place (same size, same inode).
void flip_byte(const std::string& path, std::uint64_t offset) {
    std::string bytes = read_file(path);
    REQUIRE(offset < bytes.size());
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    f.seekp(std::streamoff(offset));
    f.put(char(bytes[std::size_t(offset)] ^ 0x40));
    f.close();
}

// The reader's own I/O engine (io stream/blocks, the automatic choice for a remote dataset)
// reads whole blocks from offset 0, which the whole-shard cache does not serve: these tests read
// through the storage as it reads (io pread), where the cache is used.
dataset open_through_storage(const std::shared_ptr<s3_storage>& st, const std::string& url) {
    open_options o;
    o.storage = st;
    o.io = io_mode::pread;
    return dataset::open(url, o);
}

std::uint64_t largest_shard(const dataset& ds) {
    std::uint64_t largest = 0;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) largest = std::max(largest, ds.shard_bytes(k));
    return largest;
}

}  // namespace

TEST_CASE("s3 whole-shard cache: refuses a folder it did not make, never emptying it", "[remote]") {
    temp_dir tmp("s3own");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/own/ds";
    synthetic_options o;
    o.records = 48;
    o.shard_size = 24 << 10;
    const dataset local = push_synthetic(client, tmp / "ds", url, o);
    REQUIRE(local.shard_count() >= 4);

    // $SHARDPACK_CACHE_DIR/shards is a local dataset of the user's (its shard-*.spk files named
    // like the cache's), not a cache: refused with the folder named, every file kept.
    const std::string data = tmp / "data";
    synthetic_options theirs = o;
    theirs.records = 30;
    write_synthetic(data + "/shards", theirs);
    const auto before = folder_contents(data + "/shards");
    REQUIRE(before.size() >= 4);
    remote_options ro;
    ro.cache_dir = data;
    ro.shard_cache_bytes = largest_shard(local) + 1;  // one shard at a time: every new shard would evict
    auto read_all = [&](const remote_options& opts) {
        const dataset ds = open_remote(open_s3_storage(std::make_shared<s3_client>(cfg), url, opts), url);
        require_same_records(ds, local);
    };
    CHECK_THROWS_WITH(read_all(ro), Catch::Contains(data + "/shards") && Catch::Contains("not a shardpack cache"));
    CHECK(folder_contents(data + "/shards") == before);
    CHECK(dataset::open(data + "/shards").size() == 30);

    // The same through the CLI, the cache set by the environment: exit 1, the folder named.
    const auto v = run_cli({"verify", url}, {"SHARDPACK_CACHE_DIR=" + data, "SHARDPACK_SHARD_CACHE_BYTES=" +
                                                                              std::to_string(ro.shard_cache_bytes)});
    INFO(v.err);
    CHECK(v.code == 1);
    CHECK(v.err.find(data + "/shards") != std::string::npos);
    CHECK(folder_contents(data + "/shards") == before);

    // A link at the cache's place: refused, its target untouched.
    const std::string linked = tmp / "linked";
    std::filesystem::create_directories(linked);
    std::filesystem::create_symlink(data + "/shards", linked + "/shards");
    remote_options via_link = ro;
    via_link.cache_dir = linked;
    CHECK_THROWS_WITH(read_all(via_link), Catch::Contains(linked + "/shards"));
    CHECK(folder_contents(data + "/shards") == before);
}

TEST_CASE("s3 whole-shard cache: evicts only the files it wrote, never a user's file in its folder", "[remote]") {
    temp_dir tmp("s3evict");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/evict/ds";
    synthetic_options o;
    o.records = 48;
    o.shard_size = 24 << 10;
    const dataset local = push_synthetic(client, tmp / "ds", url, o);
    REQUIRE(local.shard_count() >= 4);
    const std::string cache = tmp / "cache";
    remote_options ro;
    ro.cache_dir = cache;
    ro.shard_cache_bytes = largest_shard(local) + 1;  // one shard at a time: every new shard evicts
    auto read_all = [&] {
        auto st = open_s3_storage(std::make_shared<s3_client>(cfg), url, ro);
        const dataset ds = open_through_storage(st, url);
        require_same_records(ds, local);
        return st->stats();
    };
    read_all();  // the cache makes and claims its folder

    // Files the cache did not write, put into its folder by the user: shards of another dataset
    // under their content names (the very form of the cache's own files), a note, a link, and
    // a file of the right size at the name of one of this dataset's shards.
    const std::string shards = cache + "/shards";
    const auto cache_own = folder_contents(shards);
    synthetic_options other = o;
    other.records = 20;
    other.width = 20;  // other bytes: other content names
    write_synthetic(tmp / "other", other);
    for (const auto& e : std::filesystem::directory_iterator(tmp / "other"))
        if (is_shard_name(e.path().filename().string())) std::filesystem::copy_file(e.path(), shards + "/" + e.path().filename().string());
    write_file(shards + "/notes.txt", "mine");
    std::filesystem::create_symlink(shards + "/notes.txt", shards + "/link");
    const std::string squatted = local.shard_name(1);
    std::filesystem::remove(shards + "/" + squatted);
    write_file(shards + "/" + squatted, std::string(std::size_t(local.shard_bytes(1)), 'x'));
    std::map<std::string, std::string> users;
    for (const auto& [name, bytes] : folder_contents(shards))
        if (!cache_own.count(name) || name == squatted) users[name] = bytes;
    REQUIRE(users.size() >= 4);

    // Reading every shard again evicts at every download: only the cache's own files go, and
    // the file at a shard's name that the cache did not write is neither read nor replaced.
    const auto s = read_all();
    CHECK(s.shard_downloads >= local.shard_count() - 1);
    const auto after = folder_contents(shards);
    for (const auto& [name, bytes] : users) {
        INFO(name);
        REQUIRE(after.count(name));
        CHECK(after.at(name) == bytes);
    }
    std::size_t own = 0;
    for (const auto& [name, bytes] : after) own += is_shard_name(name) && !users.count(name);
    CHECK(own == 1);  // the cache still evicts its own shards
}

TEST_CASE("s3 whole-shard cache: a damaged cached shard is fetched again once, and when the server's copy is damaged too the error names both", "[remote]") {
    temp_dir tmp("s3heal");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/heal/ds";
    synthetic_options o;
    o.records = 48;
    o.shard_size = 24 << 10;
    const dataset local = push_synthetic(client, tmp / "ds", url, o);
    REQUIRE(local.shard_count() >= 4);
    const std::string cache = tmp / "cache";
    remote_options ro;
    ro.cache_dir = cache;
    ro.shard_cache_bytes = 1 << 30;
    auto open_cached = [&] { return open_s3_storage(std::make_shared<s3_client>(cfg), url, ro); };
    {
        auto st = open_cached();
        require_same_records(open_through_storage(st, url), local);
        CHECK(st->stats().shard_downloads >= local.shard_count() - 1);
    }
    const std::string name = local.shard_name(2);
    const std::string cached = cache + "/shards/" + name;
    REQUIRE(read_file(cached) == read_file(tmp / ("ds/" + name)));
    const auto e = local.shard(2).entry(1);
    flip_byte(cached, e.offset + e.stored_size / 2);  // inside a record: the shard's head and index stay right

    // The damaged copy is found before any of its bytes is used, removed and fetched again:
    // every record exact, the cache repaired.
    {
        auto st = open_cached();
        require_same_records(open_through_storage(st, url), local);
        CHECK(st->stats().shard_downloads == 1);
        CHECK(read_file(cached) == read_file(tmp / ("ds/" + name)));
    }

    // Damaged on the server as well: the second failure names the object and the cache file,
    // and the damaged copy is not kept.
    flip_byte(cached, e.offset + e.stored_size / 2);
    auto bytes = client.get_object(server.bucket, "heal/ds/" + name, 1 << 26);
    bytes[std::size_t(e.offset + e.stored_size / 2)] ^= 0x40;
    client.put_object(server.bucket, "heal/ds/" + name, bytes);
    const dataset damaged = open_through_storage(open_cached(), url);
    CHECK_THROWS_WITH(require_same_records(damaged, local), Catch::Contains(url + "/" + name) && Catch::Contains(cached));
    CHECK_FALSE(std::filesystem::exists(cached));
}

TEST_CASE("push: a file changed in place after it was verified is refused, nothing published", "[remote]") {
    temp_dir tmp("s3pchg");
    s3_server server(tmp / "server");
    s3_client client(test_config(server, false));
    ::setenv("SHARDPACK_CACHE_DIR", (tmp / "cache").c_str(), 1);
    bool found = false;
    for (const bool table : {false, true}) {
        INFO((table ? "a shard table (format 1.2)" : "a manifest's shard list"));
        const std::string prefix = table ? "chg/table" : "chg/list";
        const std::string url = "s3://" + server.bucket + "/" + prefix, dir = tmp / prefix;
        synthetic_options o;
        o.records = 40;
        o.shard_size = 24 << 10;
        if (table) o.shard_table_above = 0;
        write_synthetic(dir, o);
        const dataset ds = dataset::open(dir);
        // The file changed: the last shard, or the shard table; changed when the uploads begin
        // (after verification), in place, keeping its size.
        const std::string victim = table ? ds.shard_table_file() : ds.shard_name(ds.shard_count() - 1);
        const std::string path = dir + "/" + victim;
        const std::string good = read_file(path);
        auto change = [&](const std::string& line) {
            if (line.rfind("uploading", 0) == 0) flip_byte(path, good.size() / 2);
        };
        CHECK_THROWS_WITH(push_dataset(dir, url, client, change), Catch::Contains(path) && Catch::Contains("changed") &&
                                                                       Catch::Contains("not published"));
        client.get_object(server.bucket, prefix + "/manifest.json", 1 << 26, &found);
        CHECK_FALSE(found);

        // Over a published dataset: a rebuild whose upload meets a changed shard leaves the
        // remote manifest as it was.
        write_file(path, good);
        push_dataset(dir, url, client, [](const std::string&) {});
        const auto published = client.get_object(server.bucket, prefix + "/manifest.json", 1 << 26);
        o.records = 56;
        write_synthetic(dir, o);
        const dataset rebuilt = dataset::open(dir);
        const std::string victim2 = table ? rebuilt.shard_table_file() : rebuilt.shard_name(rebuilt.shard_count() - 1);
        const std::string path2 = dir + "/" + victim2;
        const std::string good2 = read_file(path2);
        auto change2 = [&](const std::string& line) {
            if (line.rfind("uploading", 0) == 0) flip_byte(path2, good2.size() / 2);
        };
        CHECK_THROWS_WITH(push_dataset(dir, url, client, change2), Catch::Contains(path2) && Catch::Contains("not published"));
        CHECK(client.get_object(server.bucket, prefix + "/manifest.json", 1 << 26) == published);
    }
}

TEST_CASE("s3 client: a response header over libcurl's limits is named as such, not as 'Out of memory'", "[remote]") {
    temp_dir tmp("s3hdr");
    s3_server server(tmp / "server");
    s3_client direct(test_config(server, false));
    const auto data = pattern(1 << 16, 5);
    direct.put_object(server.bucket, "h/obj.bin", data);
    s3_client client(test_config(server, true));
    for (const char* mode : {"bigheader", "manyheaders"}) {
        INFO(mode);
        REQUIRE(server.command(std::string("fault ") + mode + " 100") == "ok");
        CHECK_THROWS_WITH(client.get_range(server.bucket, "h/obj.bin", 0, 100, data.size()),
                          Catch::Contains("s3://" + server.bucket + "/h/obj.bin") && Catch::Contains("header") &&
                              Catch::Contains("KiB") && !Catch::Contains("Out of memory"));
        REQUIRE(server.command("clear") == "ok");
    }
    // Within the limits: fine.
    const auto got = client.get_range(server.bucket, "h/obj.bin", 0, 100, data.size());
    CHECK(std::equal(got.begin(), got.end(), data.begin()));
}

TEST_CASE("s3 reads: a manifest whose content_hash changed in transit is refused, naming it", "[remote]") {
    temp_dir tmp("s3chash");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    for (const bool table : {false, true}) {
        INFO((table ? "a shard table (format 1.2)" : "a manifest's shard list"));
        const std::string prefix = table ? "chash/table" : "chash/list";
        const std::string url = "s3://" + server.bucket + "/" + prefix;
        synthetic_options o;
        o.records = 30;
        o.shard_size = 24 << 10;
        if (table) o.shard_table_above = 0;
        const dataset local = push_synthetic(client, tmp / prefix, url, o);
        const auto m = client.get_object(server.bucket, prefix + "/manifest.json", 1 << 26);
        std::string text(m.begin(), m.end());
        const std::string hash = local.content_hash();
        const auto at = text.find("\"" + hash + "\"");
        REQUIRE(at != std::string::npos);
        text[at + 1] = text[at + 1] == '0' ? '1' : '0';  // one hex digit changed
        client.put_object(server.bucket, prefix + "/manifest.json", std::vector<unsigned char>(text.begin(), text.end()));
        CHECK_THROWS_WITH(open_remote(storage_for(cfg, url, tmp / "cache"), url),
                          Catch::Contains(url) && Catch::Contains("manifest.json") && Catch::Contains("content_hash") &&
                              Catch::Contains(hash));
        ::setenv("SHARDPACK_CACHE_DIR", (tmp / "cache-cli").c_str(), 1);
        const auto r = run_command(SHARDPACK_CLI, {"inspect", url});
        INFO(r.err);
        CHECK(r.code == 1);
        CHECK(r.err.find("content_hash") != std::string::npos);
    }
}

TEST_CASE("s3 reads through the reader's I/O engine: automatic streams a dataset that fits, blocks one that does not", "[remote][engine]") {
    temp_dir tmp("s3e");
    s3_server server(tmp / "server");
    const s3_config cfg = test_config(server, false);
    s3_client client(cfg);
    const std::string url = "s3://" + server.bucket + "/engine/ds";
    synthetic_options o;
    o.records = 96;
    o.shard_size = 32 << 10;
    const dataset local = push_synthetic(client, tmp / "ds", url, o);
    std::uint64_t total = 0;
    for (std::size_t k = 0; k < local.shard_count(); ++k) total += local.shard_bytes(k);
    for (const std::uint64_t cache : {total * 2, total / 3}) {
        open_options eo;
        eo.storage = storage_for(cfg, url, tmp / ("cache" + std::to_string(cache)));
        eo.cache_bytes = cache;
        eo.log = [](const std::string&) {};
        const dataset remote = dataset::open(url, eo);
        CHECK(remote.io() == (cache > total ? io_mode::stream : io_mode::blocks));
        require_same_records(remote, local);
        // A second pass: the same bytes, from the engine's cache where it holds them.
        require_same_records(remote, local);
        const auto c = remote.io_counters();
        CHECK(c.peak_cached_bytes <= cache);
        if (cache > total) CHECK(c.extent_bytes == total);  // every byte fetched once
    }
}
