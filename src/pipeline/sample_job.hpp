// One sample on its way through the build pipeline. Jobs are pooled (one per pipeline token)
// and reused, so their buffers keep their capacity and the hot path allocates nothing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "dataset/input_fingerprints.hpp"
#include "decode/sniff.hpp"
#include "format/stored_record.hpp"
#include "input/input_list.hpp"
#include "shardpack/detail/format.hpp"

namespace shardpack {

struct previous_record;

// A sample's image or mask given as pixels (the sample stream: pipeline/sample_stream.hpp)
// instead of a file: its shape. channels 0: the bytes are a file's (PNG or JPEG).
struct pixel_shape {
    std::uint32_t width = 0, height = 0;
    std::uint8_t channels = 0;     // images 1..255 (bands), masks 1, 3 or 4
    std::uint8_t value_bytes = 1;  // 2: uint16 (images, index masks)
    bool is_pixels() const { return channels != 0; }
};

struct sample_job {
    std::size_t sequence = 0;                 // position in the output order
    sample_row row;                           // views into the input list
    std::string image_path;                   // the files to open, resolved from the row's cells
    std::string label_path;                   // (kept here, not in the list, which stays small)
    std::vector<std::uint8_t> image_file;     // the files' bytes, as loaded
    std::vector<std::uint8_t> label_file;
    file_format image_format = file_format::unknown;  // the files' formats, sniffed once as they are read
    file_format label_format = file_format::unknown;
    std::vector<unsigned char> decoded;       // the record payload
    detail::record_layout layout;             // where its key, image and label lie (from encode_record)
    stored_record stored;                     // what goes into the shard
    std::string error;                        // why the sample is rejected; empty when good
    std::vector<std::uint64_t> class_counts;  // pixels (segmentation) or 1 (classification) per class
    std::uint64_t unknown_pixels = 0;         // mapped to the ignore value (--unknown-label ignore)
    bool lost_bits = false;                   // a 16-bit image stored at 8 bits (--depth 8)
    const previous_record* reuse = nullptr;   // unchanged since the previous build: its bytes are taken back
    record_fingerprint fingerprint;           // the inputs behind this record, for the next rebuild
    std::uint64_t key_hash = 0;               // XXH3-64 of the key; places shard boundaries
    std::string_view field_source;            // --field values of the row, source form (field_columns.hpp); empty without
    std::uint64_t boxes_clipped = 0, boxes_dropped = 0;  // by the build's geometry (field_geometry.hpp)
    // A sample of the sample stream (build --samples): no files; row's views point at the key
    // texts here, image_file/label_file hold what the stream gave (file bytes or pixels).
    bool streamed = false;
    std::string key_text, label_key_text;
    std::string field_text;  // field_source's bytes (field_cell_parser)
    pixel_shape image_pixels, label_pixels;

    void reset(std::size_t seq, const input_list& input, std::size_t index) {
        clear(seq);
        row = input.row(index);
        input.image_path(index, image_path);
        input.label_path(index, label_path);
        field_source = input.fields.empty() ? std::string_view() : input.fields.row(index);
    }
    // Everything but the row and its paths, for a new sample at position seq.
    void clear(std::size_t seq) {
        sequence = seq;
        error.clear();
        image_format = label_format = file_format::unknown;
        unknown_pixels = 0;
        lost_bits = false;
        reuse = nullptr;
        key_hash = 0;
        field_source = {};
        boxes_clipped = boxes_dropped = 0;
        streamed = false;
        image_pixels = label_pixels = {};
        fingerprint.class_counts.clear();
        fingerprint.tolerance_counts.clear();
        fingerprint.unknown_values.clear();
        fingerprint.unknown_pixels = 0;
        std::fill(class_counts.begin(), class_counts.end(), 0);
    }
    bool ok() const { return error.empty(); }
};

}  // namespace shardpack
