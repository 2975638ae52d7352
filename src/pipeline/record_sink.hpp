// Pipeline stage 5 (serial, in order): appends good records to the dataset and notes rejected
// rows. Kept trivial: the work was done by the parallel stages.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <string>
#include <vector>

#include "errors.hpp"
#include "dataset/dataset_writer.hpp"
#include "pipeline/build_options.hpp"
#include "pipeline/sample_job.hpp"
#include "pipeline/value_totals.hpp"

namespace shardpack {

struct rejected_row {
    std::size_t csv_line = 0;
    std::string image, label, reason;
};

struct build_totals {
    std::uint64_t rows = 0;           // rows that reached the sink
    std::uint64_t records = 0;        // written
    std::uint64_t reused = 0;         // of which taken back unchanged from the previous build
    std::uint64_t bytes_in = 0;       // source file bytes of written records
    std::uint64_t decoded_bytes = 0;  // record payload bytes before compression
    std::uint64_t stored_bytes = 0;   // after
    std::uint64_t unknown_pixels = 0;
    std::uint64_t lost_bits = 0;      // records decoded in this build whose 16-bit image was stored at 8 bits
    std::string lost_bits_example;   // the first of them in list order (its image cell), and its CSV line
    std::size_t lost_bits_line = 0;
    std::vector<std::uint64_t> class_counts;
    std::vector<std::uint64_t> tolerance_counts;  // of class_counts, mapped by --color-tolerance
    // Unknown colors (packed 0xRRGGBB) or index-mask values mapped to the ignore value: the
    // pixels of the records that hold them, the records, and the earliest such row (its CSV line
    // as value_total::row, its mask cell in unknown_examples) with its first source pixel there.
    value_totals unknown_values;  // at most max_unknown_listed entries
    std::unordered_map<std::uint32_t, std::string> unknown_examples;
    static constexpr std::size_t max_unknown_listed = 10000;
    std::vector<rejected_row> rejected;
    std::uint64_t boxes_clipped = 0, boxes_dropped = 0;  // by the geometry, in the rows decoded (not reused)
};

// Thrown to stop a build: the first bad sample under --on-error fail, or --max-errors reached.
struct build_stopped : input_error {
    using input_error::input_error;
};

class record_sink {
public:
    record_sink(dataset_writer& writer, const build_options& options, std::size_t classes);
    void operator()(const sample_job& job);
    const build_totals& totals() const { return totals_; }

private:
    dataset_writer& writer_;
    const build_options& options_;
    build_totals totals_;
};

}  // namespace shardpack
