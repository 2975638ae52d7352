// How much work the process has spent learning what its input files are: format sniffs,
// header parses (by a library or by hand, the decoders' own included) and libpng/libjpeg read
// sessions. Issue #20 asked for each input to be probed once and its facts passed on;
// tests/test_probe_counts.cpp builds datasets in this process and checks the figures per file,
// so a sniff or header parse added again on the build's path fails a test. Relaxed atomic
// increments: a few per file, nothing beside a decode.
#pragma once
#include <atomic>
#include <cstdint>

namespace shardpack {

struct probe_counts {
    std::uint64_t sniffs = 0;         // sniff_format calls
    std::uint64_t header_parses = 0;  // PNG IHDR or JPEG SOF reads
    std::uint64_t png_sessions = 0;   // libpng read structures created
    std::uint64_t jpeg_sessions = 0;  // libjpeg decompress objects created
};

namespace probe_counting {
inline std::atomic<std::uint64_t> sniffs{0}, header_parses{0}, png_sessions{0}, jpeg_sessions{0};
inline void count(std::atomic<std::uint64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }
}  // namespace probe_counting

// The totals since the process started.
inline probe_counts read_probe_counts() {
    using namespace probe_counting;
    return {sniffs.load(std::memory_order_relaxed), header_parses.load(std::memory_order_relaxed),
            png_sessions.load(std::memory_order_relaxed), jpeg_sessions.load(std::memory_order_relaxed)};
}

}  // namespace shardpack
