// The sample stream: samples handed to `shardpack build --samples -` on standard input, one
// frame each, by the Python writer (shardpack.write, src/python/shardpack/_writer.py) instead
// of a list of files. A frame carries a sample's key and its image and label as the build's
// files would (encoded PNG/JPEG bytes) or as pixels (what decoding them would give), so the
// rest of the pipeline is the same as for files; pixels skip the decode.
//
// Layout (little-endian). The stream starts with a header of 32 bytes:
//   8 bytes "SPSAMPv3", u64 total samples to come (0: not known; for the progress line),
//   i32 ring_fd, i32 ack_fd, u64 ring_bytes   (the ring below; -1, -1, 0: none)
// (A header of 16 bytes, "SPSAMPv2" and the total, is read too: a stream without a ring.)
// then frames, each a fixed head of frame_head_bytes:
//   u8 tag              'S' a sample, 'R' a sample the writer could not convert (reason below:
//                       rejected as a bad row is, by --on-error), 'E' the end (count: samples sent)
//   u8 image_kind       part_kind below (none only for 'R')
//   u8 image_channels   pixels: 1 to 255 (other than 1, 3 or 4: kept with --color bands, else
//                       converted as a TIFF of them would be)
//   u8 label_kind       none (classification: class_id), encoded, pixels or ring (segmentation)
//   u8 label_channels   pixels: 1 (values) or 3, 4 (colors)
//   u8 label_value_bytes pixels: 1 or 2 (uint16 values of one channel)
//   u8 image_value_bytes pixels: 1 (uint8) or 2 (uint16)
//   u8 zero
//   u32 image_width, image_height, label_width, label_height   (pixels)
//   i32 class_id        classification: an id of the class table
//   u32 key_bytes, label_key_bytes, reason_bytes
//   u64 image_bytes, label_bytes   ('E': image_bytes is the count of samples sent)
//   u32 field_bytes     the sample's field values (--field), u32 zero
// then the key, the label key, the reason, the image and label bytes, and the field values:
// one cell per --field, in their order, each ended by a NUL byte, in the text a CSV cell of
// that field holds (field_cell_parser: the same rules and errors as a CSV column).
//
// The ring: pixels that need not cross the pipe. ring_fd and ack_fd are descriptors the
// writer's process passed to the build's (io/stream_ring.hpp checks them: a memfd of
// ring_bytes sealed against shrinking, mapped read-only; a Unix stream socket). A part of
// kind ring holds pixels, as `pixels` does, in the ring: its bytes on the stream are only a
// u64 offset, and it lies at [offset, offset + image_bytes or label_bytes) of the ring (never
// across its end; checked, else the build stops naming the sample). The build copies it out
// and counts it released; whenever the ring parts released since it last said so hold
// ring_bytes / 8 or more, it sends their count since the stream began (u64) on ack_fd. The
// writer reuses a part's room only once released, and puts a part in the ring only if it
// takes at most ring_bytes / 4 (larger ones go on the pipe), so it never waits for a release
// that is not coming: once the build has copied out all it was sent, what is held is under
// ring_bytes / 8 unreleased plus one unused gap before the ring's end (under a quarter), and a
// new part with its own gap takes under a half. Frame heads enter the digest with ring read as
// pixels: the same samples give the same digest in the ring or on the pipe.
// A stream that ends without its 'E' frame (the writer was killed) publishes nothing.
// The first sample stands for the CSV's first row where the build reads one ahead (--depth
// auto, --color bands): first() reads it before the pipeline starts.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "input/field_columns.hpp"
#include "io/input_stream.hpp"
#include "io/stream_ring.hpp"
#include "pipeline/sample_job.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {

inline constexpr char sample_stream_magic[8] = {'S', 'P', 'S', 'A', 'M', 'P', 'v', '3'};
inline constexpr char sample_stream_magic_v2[8] = {'S', 'P', 'S', 'A', 'M', 'P', 'v', '2'};
inline constexpr std::size_t frame_head_bytes = 64;
enum class part_kind : std::uint8_t { none = 0, encoded = 1, pixels = 2, ring = 3 };

class sample_stream {
public:
    // Reads the stream's header. Throws input_error for a stream that is not one.
    // classes: the class table's size (a classification sample's id must be below it).
    // fields: the declared fields' parser (input_list::stream_fields), or null without --field.
    sample_stream(std::size_t classes, field_cell_parser* fields);
    std::uint64_t announced_total() const { return total_; }

    // The next sample into `job` (reset for position `seq`): true, or false after the end
    // frame. Throws input_error when the stream ends early or a frame is malformed (which
    // stops the build: what follows cannot be trusted). A frame's content that is merely bad
    // (a wrong size, a reason from the writer) becomes job.error, under --on-error.
    // max_row_bytes: a sample's image and label together may take at most this much.
    bool next(sample_job& job, std::size_t seq, std::uint64_t max_row_bytes);

    // The first sample, read ahead (then handed out by the first next()): null when the stream
    // ends at once. Throws as next() does.
    const sample_job* first(std::uint64_t max_row_bytes);

    // XXH3-64 of every frame head and key read: the manifest's input_digest of a streamed build.
    std::uint64_t digest() const;

private:
    input_stream in_;
    std::size_t classes_;
    field_cell_parser* fields_;
    std::string cells_;
    std::vector<std::string_view> cell_views_;
    std::uint64_t total_ = 0;
    std::uint64_t count_ = 0;
    XXH3_state_t digest_;
    std::unique_ptr<sample_job> first_;  // read ahead by first(), not yet handed out
    std::unique_ptr<stream_ring> ring_;  // null: a stream without a ring
    std::uint64_t ring_parts_ = 0;        // ring parts copied out (or skipped) so far
    std::uint64_t unreleased_bytes_ = 0;  // their bytes since the writer was last told
    bool first_read_ = false, ended_ = false;
    bool read_next(sample_job& job, std::size_t seq, std::uint64_t max_row_bytes);
    void read_exact(void* buf, std::size_t n, const char* what);
    void read_part(std::vector<std::uint8_t>& out, std::uint64_t n, const char* what, bool too_large);
    std::uint64_t read_ring_offset(std::uint64_t n, const char* what, const std::string& where);
    void take_from_ring(std::vector<std::uint8_t>& out, std::uint64_t offset, std::uint64_t n, bool copy);
    void parse_field_cells(sample_job& job);
};

}  // namespace shardpack
