// The slow-disk shim (tests/fault_inject/slow_disk.c): it charges a seek to every read that does
// not continue the previous one and the transfer of every page not read before; eviction
// (posix_fadvise DONTNEED) forgets pages; memory maps are counted, not charged. And the point
// of the blocks order: read with whole-block read-ahead it issues far fewer seeks than the
// global order, on a file and through the reader (io_mode::pread, dataset::prefetch). Runs
// slow_disk_probe under LD_PRELOAD; seconds (19 s measured on a machine loaded 14x over its cores).
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "shardpack/detail/json.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

struct probe_result {
    long long reads = 0, seeks = 0, bytes = 0, charged_us = 0, mmaps = 0, wall_us = 0;
};

// Runs the probe on `file` (records of `record` bytes) in `order`, the shim charging `seek_ms`
// per seek and reading `mbps` MB/s.
probe_result probe(const fs::path& folder, const std::string& file, std::size_t record, const std::string& order,
                   const std::string& seek_ms, const std::string& mbps, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{preload(SHARDPACK_SLOW_DISK),
                                  "SHARDPACK_SLOW_DISK_PATH=" + folder.string(), "SHARDPACK_SLOW_DISK_SEEK_MS=" + seek_ms,
                                  "SHARDPACK_SLOW_DISK_MBPS=" + mbps, SHARDPACK_SLOW_DISK_PROBE};
    if (record == 0) {
        args.insert(args.end(), {"--dataset", file, order});
    } else {
        args.insert(args.end(), {file, std::to_string(record), order});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    const cli_result r = run_command("env", args);
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto j = detail::json::parse(r.out);
    probe_result p;
    p.reads = static_cast<long long>(j.at("reads").as_u64());
    p.seeks = static_cast<long long>(j.at("seeks").as_u64());
    p.bytes = static_cast<long long>(j.at("bytes").as_u64());
    p.charged_us = static_cast<long long>(j.at("charged_us").as_u64());
    p.mmaps = static_cast<long long>(j.at("mmaps").as_u64());
    p.wall_us = static_cast<long long>(j.at("wall_us").as_u64());
    return p;
}

struct disk_fixture {
    temp_dir dir;
    fs::path folder = dir / "disk";
    std::string file;
    disk_fixture(std::size_t bytes) {
        fs::create_directories(folder);
        file = (folder / "data.bin").string();
        std::string data(bytes, '\0');
        for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 31 + 7);
        write_file(file, data);
    }
};

}  // namespace

TEST_CASE("slow disk: seeks and transfers are charged, and really waited for", "[slow_disk]") {
    disk_fixture d(64 * 65536);  // 64 records of 64 KiB
    // In order: one seek (the first read), 4 MiB at 1000 MB/s.
    const auto seq = probe(d.folder, d.file, 65536, "sequential", "5", "1000");
    CHECK(seq.reads == 64);
    CHECK(seq.seeks == 1);
    CHECK(seq.bytes == 64 * 65536);
    CHECK(seq.charged_us == Approx(5000 + 4194.304).margin(70));
    // Shuffled: a seek for almost every read (a read that happens to follow its predecessor
    // on disk continues it), each waited for.
    const auto shuffled = probe(d.folder, d.file, 65536, "global", "5", "1000");
    CHECK(shuffled.seeks >= 50);
    CHECK(shuffled.charged_us >= shuffled.seeks * 5000);
    CHECK(shuffled.wall_us >= shuffled.charged_us);
    CHECK(shuffled.bytes == 64 * 65536);
    // Pages read before are in the page cache: a second pass costs nothing...
    const auto twice = probe(d.folder, d.file, 65536, "reread", "5", "1000");
    CHECK(twice.reads == 128);
    CHECK(twice.seeks == 1);
    CHECK(twice.bytes == 64 * 65536);
    // ...unless they were evicted (posix_fadvise DONTNEED).
    const auto evicted = probe(d.folder, d.file, 65536, "evict", "5", "1000");
    CHECK(evicted.seeks == 2);
    CHECK(evicted.bytes == 2 * 64 * 65536);
    // Page faults of a memory map do not go through read(): counted, not charged.
    const auto mapped = probe(d.folder, d.file, 65536, "mmap", "5", "1000");
    CHECK(mapped.mmaps == 1);
    CHECK(mapped.bytes == 0);
}

TEST_CASE("slow disk: files outside the folder are not charged", "[slow_disk]") {
    disk_fixture d(1 << 20);
    const fs::path other = d.dir / "elsewhere";
    fs::create_directories(other);
    const auto r = probe(other, d.file, 4096, "global", "5", "150");
    CHECK(r.reads == 0);
    CHECK(r.charged_us == 0);
}

TEST_CASE("slow disk: the blocks order with block read-ahead seeks far less than the global order",
          "[slow_disk][order]") {
    // 4096 records of 4 KiB; blocks of 64 records, windows of 4 blocks: 64 blocks.
    disk_fixture d(4096 * 4096);
    const auto global = probe(d.folder, d.file, 4096, "global", "0.01", "100000", {"64", "4"});
    const auto blocks = probe(d.folder, d.file, 4096, "blocks", "0.01", "100000", {"64", "4"});
    const auto sequential = probe(d.folder, d.file, 4096, "sequential", "0.01", "100000");
    CHECK(global.seeks >= 4000);
    CHECK(blocks.seeks <= 64);  // at most one per block
    CHECK(sequential.seeks == 1);
    CHECK(global.bytes == blocks.bytes);
    CHECK(global.seeks >= 50 * blocks.seeks);
}

TEST_CASE("slow disk: through the reader (pread), the blocks order seeks far less than the global order",
          "[slow_disk][order]") {
    // 640 raw records of 160x160 RGB (77 KB each, 49 MB) in 4 shards, read as the torch Loader
    // reads. (dataset::prefetch reads through gaps under 128 KiB: with smaller records a batch
    // of the global order would be read as whole shards.)
    temp_dir dir;
    const fs::path folder = dir / "disk";
    auto r = run_command(SHARDPACK_SAMPLE_TOOL, {"--out", dir / "src", "--task", "cls", "--count", "640", "--width",
                                                 "160", "--height", "160"});
    REQUIRE(r.code == 0);
    r = run_command(SHARDPACK_CLI, {"-q", "build", "--csv", dir / "src/list.csv", "--out", folder.string(), "--compression",
                                    "none", "--shard-size", "13MiB"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    REQUIRE(dataset::open(folder.string()).shard_count() >= 4);
    const auto global = probe(folder, folder.string(), 0, "global", "0.01", "100000", {"16", "4"});
    const auto blocks = probe(folder, folder.string(), 0, "blocks", "0.01", "100000", {"16", "4"});
    const auto sequential = probe(folder, folder.string(), 0, "sequential", "0.01", "100000", {"16", "4"});
    CHECK(global.mmaps == 0);  // pread: every read seen
    CHECK(global.seeks >= 400);      // most of 640 records (neighbours in a batch are merged)
    CHECK(blocks.seeks <= 40 + 20);  // 40 blocks, and a few reads of manifest and shard indexes
    CHECK(sequential.seeks <= 30);
    CHECK(global.seeks >= 6 * blocks.seeks);
}
