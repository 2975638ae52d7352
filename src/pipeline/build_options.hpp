// Everything `shardpack build` can be told. The CLI fills it; run_build() consumes it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "format/record_compressor.hpp"
#include "image.hpp"
#include "input/input_list.hpp"
#include "pipeline/partition.hpp"
#include "transform/geometry.hpp"
#include "transform/label_map.hpp"
#include "transform/mask_options.hpp"

namespace shardpack {

enum class error_policy { fail, skip };
enum class label_layout_option { one_hot, index };

struct build_options {
    input_options input;
    std::string out_dir;
    pixel_layout color = pixel_layout::rgb;
    unsigned depth = 0;                                   // --depth: 8 or 16 bits a sample; 0: auto (the first row's image)
    geometry_options geometry;
    label_layout_option label_layout = label_layout_option::one_hot;
    mask_options mask;                                    // --mask-values, --unknown-label, --color-tolerance, --ignore-values
    record_codec codec = record_codec::zstd;
    int level = 1;
    std::uint32_t band_rows = 0;   // codec 2 band height; 0: chosen per record (codec 3 for segmentation, record_compressor.hpp)
    std::uint64_t shard_size = std::uint64_t(256) << 20;
    bool shuffle = false;
    std::uint64_t seed = 0;
    error_policy on_error = error_policy::fail;
    std::uint64_t max_errors = 0;  // 0: no limit (skip mode)
    unsigned threads = 0;          // 0: all cores
    std::uint64_t memory_limit = 0;  // bytes; 0: default_memory_limit()
    std::string report_path;       // extra copy of the report; the dataset folder always gets one
    bool full = false;             // ignore the previous build: decode every row again
    bool force = false;            // write into a folder that is not shardpack's (beside its files, never over them)
    bool progress = false;         // a progress line on stderr (the CLI sets it for terminals)
    std::optional<partition_spec> partition;  // --partition K/N: pack only the K-th slice of the order
};

}  // namespace shardpack
