// bench_manifest: what a manifest.json costs at scale (for the 100M-image plan, scripts/bench/scaling.md).
//
//   bench_manifest [SHARDS...]      default: 1000 62000 400000
//
// For each count, prints one JSON line: the manifest's size printed as the writer prints it
// (the real dataset_writer format: schema, classes, one entry per shard with a real-looking
// file name, records, first_record, bytes and hash), bytes per shard entry, the time to parse
// it with the reader's JSON parser and to walk the entries as dataset::open does (without
// opening shard files), and the RSS the parsed tree holds (VmRSS of /proc/self/status; one count
// per process gives the cleanest figure).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "dataset/dataset_writer.hpp"
#include "shardpack/detail/hex.hpp"
#include "shardpack/detail/json.hpp"
#include "shardpack/detail/xxhash.hpp"

using shardpack::detail::json;

namespace {

// Printed as the writer prints it (two-space indentation, one member a line), directly as
// text, so that no JSON tree of the generator inflates the parser's RSS figure.
std::string make_manifest(std::size_t shards) {
    std::string out = "{\n  \"format\": \"shardpack\",\n  \"format_version\": \"1.0\",\n  \"records\": 0,\n"
                      "  \"content_hash\": \"0123456789abcdef\",\n  \"shards\": [\n";
    std::uint64_t first = 0;
    for (std::size_t k = 0; k < shards; ++k) {
        const std::uint64_t hash = XXH3_64bits(&k, sizeof k);
        const std::uint64_t records = 1500 + k % 400;  // ~120 KB records in ~190 MiB shards
        const std::uint64_t bytes = 200'000'000 + k * 7919 % 60'000'000;
        char entry[512];
        std::snprintf(entry, sizeof entry,
                      "    {\n      \"file\": \"shard-%05zu-%s.spk\",\n      \"records\": %llu,\n      \"first_record\": %llu,\n"
                      "      \"bytes\": %llu,\n      \"xxh3\": \"%s\"\n    }%s\n",
                      k, shardpack::detail::hex16(hash).c_str(), static_cast<unsigned long long>(records),
                      static_cast<unsigned long long>(first), static_cast<unsigned long long>(bytes),
                      shardpack::detail::hex16(hash).c_str(), k + 1 < shards ? "," : "");
        out += entry;
        first += records;
    }
    return out + "  ]\n}\n";
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::size_t> counts;
    for (int i = 1; i < argc; ++i) counts.push_back(std::strtoull(argv[i], nullptr, 10));
    if (counts.empty()) counts = {1000, 62000, 400000};
    for (const std::size_t n : counts) {
        const std::string text = make_manifest(n);
        const std::string one = make_manifest(1);
        const long long rss0 = shardpack::bench::process_status_kb("VmRSS");
        const auto t0 = std::chrono::steady_clock::now();
        const json m = json::parse(text);
        const auto t1 = std::chrono::steady_clock::now();
        std::uint64_t total = 0, sum = 0;
        for (const auto& e : m.at("shards").as_array()) {
            if (e.at("first_record").as_u64() != sum) return 1;
            sum += e.at("records").as_u64();
            total += e.at("bytes").as_u64() + e.at("file").as_string().size() + e.at("xxh3").as_string().size();
        }
        const auto t2 = std::chrono::steady_clock::now();
        const long long rss1 = shardpack::bench::process_status_kb("VmRSS");
        std::printf("{\"shards\":%zu,\"manifest_bytes\":%zu,\"bytes_per_entry\":%.1f,\"parse_s\":%.3f,\"walk_s\":%.3f,"
                    "\"parse_rss_growth_mb\":%.1f,\"check\":%llu}\n",
                    n, text.size(), double(text.size() - one.size()) / double(n > 1 ? n - 1 : 1),
                    std::chrono::duration<double>(t1 - t0).count(), std::chrono::duration<double>(t2 - t1).count(),
                    double(rss1 - rss0) / 1024.0, static_cast<unsigned long long>(total % 1000));
    }
    return 0;
}
