#include "pipeline/sample_stream.hpp"

#include <algorithm>
#include <cstring>

#include "errors.hpp"
#include "pipeline/memory_budget.hpp"

namespace shardpack {

namespace {
constexpr std::uint32_t max_key_bytes = 1u << 20;  // keys and reasons are names, not data
constexpr std::uint32_t max_field_bytes = 64u << 20;  // a sample's field cells: boxes, tags, texts

template <class T>
T take(const unsigned char*& p) {
    T v;
    std::memcpy(&v, p, sizeof v);  // the stream is little-endian, as every machine shardpack builds on
    p += sizeof v;
    return v;
}

std::string shape_text(const pixel_shape& s) {
    return std::to_string(s.width) + "x" + std::to_string(s.height) + "x" + std::to_string(unsigned(s.channels)) +
           (s.value_bytes == 2 ? " uint16" : " uint8");
}

// A frame's fixed head (see sample_stream.hpp), as sent.
struct frame_head {
    char tag = 0;
    part_kind image_kind = part_kind::none, label_kind = part_kind::none;  // ring is read as pixels
    bool image_in_ring = false, label_in_ring = false;
    pixel_shape image, label;
    std::int32_t class_id = 0;
    std::uint32_t key_bytes = 0, label_key_bytes = 0, reason_bytes = 0;
    std::uint64_t image_bytes = 0, label_bytes = 0;
    std::uint32_t field_bytes = 0;
};

frame_head parse_frame_head(const unsigned char* p) {
    frame_head h;
    h.tag = static_cast<char>(take<std::uint8_t>(p));
    h.image_kind = static_cast<part_kind>(take<std::uint8_t>(p));
    h.image.channels = take<std::uint8_t>(p);
    h.label_kind = static_cast<part_kind>(take<std::uint8_t>(p));
    h.label.channels = take<std::uint8_t>(p);
    h.label.value_bytes = take<std::uint8_t>(p);
    h.image.value_bytes = take<std::uint8_t>(p);
    take<std::uint8_t>(p);
    h.image.width = take<std::uint32_t>(p);
    h.image.height = take<std::uint32_t>(p);
    h.label.width = take<std::uint32_t>(p);
    h.label.height = take<std::uint32_t>(p);
    h.class_id = take<std::int32_t>(p);
    h.key_bytes = take<std::uint32_t>(p);
    h.label_key_bytes = take<std::uint32_t>(p);
    h.reason_bytes = take<std::uint32_t>(p);
    h.image_bytes = take<std::uint64_t>(p);
    h.label_bytes = take<std::uint64_t>(p);
    h.field_bytes = take<std::uint32_t>(p);
    return h;
}

// The limits of a sample frame's head ('S' or 'R'), checked before anything else is read.
void check_frame_head(const frame_head& h, const std::string& where) {
    if (h.tag != 'S' && h.tag != 'R') throw input_error(where + "not a frame of the sample stream (tag " + std::to_string(int(h.tag)) + ")");
    if (h.key_bytes > max_key_bytes || h.label_key_bytes > max_key_bytes || h.reason_bytes > max_key_bytes)
        throw input_error(where + "a key or reason longer than " + std::to_string(max_key_bytes) + " bytes");
    if (h.field_bytes > max_field_bytes)
        throw input_error(where + "field values longer than " + std::to_string(max_field_bytes) + " bytes");
    if (h.image_kind > part_kind::pixels || h.label_kind > part_kind::pixels)
        throw input_error(where + "an unknown kind of image or label");
    if ((h.image_in_ring || h.label_in_ring) && h.tag != 'S') throw input_error(where + "a rejected sample with a ring part");
}

// Why an image's or label's pixels (their shape against their byte count) cannot be packed; "" if they can.
std::string pixels_problem(const pixel_shape& s, std::uint64_t bytes, bool is_label) {
    const char* what = is_label ? "label" : "image";
    const bool channels_ok = is_label ? (s.channels == 1 || ((s.channels == 3 || s.channels == 4) && s.value_bytes == 1))
                                      : s.channels >= 1;
    if (!channels_ok || (s.value_bytes != 1 && s.value_bytes != 2))
        return std::string("the ") + what + "'s pixels are " + shape_text(s) +
               (is_label ? ": expected 1, 3 or 4 uint8 channels or one uint16 channel"
                         : ": expected 1 to 255 channels of uint8 or uint16");
    if (s.width == 0 || s.height == 0) return std::string("the ") + what + " is empty (" + shape_text(s) + ")";
    if (std::uint64_t(s.width) * s.height * s.channels * s.value_bytes != bytes)
        return std::string("the ") + what + "'s " + std::to_string(bytes) + " bytes do not make " + shape_text(s);
    return {};
}

// Why the sample is not packed (the writer's reason, its size, its pixels, its class), or "";
// its pixels' shapes go to the job.
std::string sample_problem(const frame_head& h, const std::string& reason, bool too_large, std::uint64_t max_row_bytes,
                           std::size_t classes, sample_job& job) {
    if (h.tag == 'R') return reason.empty() ? "rejected by the writer" : reason;
    if (too_large)
        return "the image and label take " + format_bytes(h.image_bytes + h.label_bytes) + ", more than a row may take: " +
               format_bytes(max_row_bytes) + " (from --memory-limit)";
    if (h.image_kind == part_kind::none) return "no image";
    if (h.image_kind == part_kind::pixels) {
        job.image_pixels = h.image;
        if (std::string why = pixels_problem(h.image, h.image_bytes, false); !why.empty()) return why;
    }
    if (h.label_kind == part_kind::pixels) {
        job.label_pixels = h.label;
        if (std::string why = pixels_problem(h.label, h.label_bytes, true); !why.empty()) return why;
    }
    if (h.label_kind == part_kind::none && (h.class_id < 0 || std::size_t(h.class_id) >= classes))
        return "class id " + std::to_string(h.class_id) + " is not in the class table (ids 0.." +
               std::to_string(classes ? classes - 1 : 0) + ")";
    return {};
}
}  // namespace

sample_stream::sample_stream(std::size_t classes, field_cell_parser* fields) : classes_(classes), fields_(fields) {
    XXH3_64bits_reset(&digest_);
    unsigned char head[32];
    const bool whole = in_.read(head, 16) == 16;
    const bool v3 = whole && std::memcmp(head, sample_stream_magic, sizeof sample_stream_magic) == 0;
    if (!v3 && (!whole || std::memcmp(head, sample_stream_magic_v2, sizeof sample_stream_magic_v2) != 0))
        throw input_error("standard input: not a shardpack sample stream (--samples - reads what shardpack.write sends)");
    std::memcpy(&total_, head + 8, sizeof total_);
    if (!v3) return;
    if (in_.read(head + 16, 16) != 16) throw input_error("standard input: the sample stream ended inside its header");
    std::int32_t ring_fd = -1, ack_fd = -1;
    std::uint64_t ring_bytes = 0;
    std::memcpy(&ring_fd, head + 16, 4);
    std::memcpy(&ack_fd, head + 20, 4);
    std::memcpy(&ring_bytes, head + 24, 8);
    if (ring_fd == -1 && ack_fd == -1 && ring_bytes == 0) return;
    ring_ = std::make_unique<stream_ring>(ring_fd, ring_bytes, ack_fd);
}

std::uint64_t sample_stream::digest() const { return XXH3_64bits_digest(&digest_); }

void sample_stream::read_exact(void* buf, std::size_t n, const char* what) {
    if (in_.read(buf, n) != n)
        throw input_error("standard input: the sample stream ended inside " + std::string(what) + " of sample " +
                          std::to_string(count_) + ": the writer stopped before it finished; nothing was published");
}

const sample_job* sample_stream::first(std::uint64_t max_row_bytes) {
    if (!first_read_) {
        first_read_ = true;
        first_ = std::make_unique<sample_job>();
        if (!read_next(*first_, 0, max_row_bytes)) {
            first_.reset();
            ended_ = true;
        }
    }
    return first_.get();
}

bool sample_stream::next(sample_job& job, std::size_t seq, std::uint64_t max_row_bytes) {
    if (first_read_ && seq == 0) {
        if (!first_) return false;
        std::swap(job, *first_);  // the pool's job gets the sample; its buffers go with first_
        first_.reset();
        job.row.key = job.key_text;  // the views followed the strings' old places (short strings live inside them)
        job.row.label_key = job.label_key_text;
        if (!job.field_source.empty()) job.field_source = job.field_text;
        return true;
    }
    if (ended_) return false;
    return read_next(job, seq, max_row_bytes);
}

bool sample_stream::read_next(sample_job& job, std::size_t seq, std::uint64_t max_row_bytes) {
    unsigned char head[frame_head_bytes];
    const std::size_t got = in_.read(head, sizeof head);
    if (got == 0)
        throw input_error("standard input: the sample stream ended after " + std::to_string(count_) +
                          " samples without its end mark: the writer stopped before it finished; nothing was published");
    if (got != sizeof head)
        throw input_error("standard input: the sample stream ended inside the frame head of sample " + std::to_string(count_) +
                          ": the writer stopped before it finished; nothing was published");
    // A ring part is pixels held elsewhere: the head enters the digest, and is read, as pixels.
    const bool image_in_ring = head[1] == std::uint8_t(part_kind::ring), label_in_ring = head[3] == std::uint8_t(part_kind::ring);
    if (image_in_ring) head[1] = std::uint8_t(part_kind::pixels);
    if (label_in_ring) head[3] = std::uint8_t(part_kind::pixels);
    XXH3_64bits_update(&digest_, head, sizeof head);
    frame_head h = parse_frame_head(head);
    h.image_in_ring = image_in_ring;
    h.label_in_ring = label_in_ring;

    const std::string where = "standard input: sample " + std::to_string(count_) + ": ";
    if (h.tag == 'E') {
        if (h.image_bytes != count_)
            throw input_error("standard input: the sample stream's end mark counts " + std::to_string(h.image_bytes) +
                              " samples, but " + std::to_string(count_) + " came");
        return false;
    }
    check_frame_head(h, where);

    job.clear(seq);
    job.streamed = true;
    job.key_text.resize(h.key_bytes);
    job.label_key_text.resize(h.label_key_bytes);
    read_exact(job.key_text.data(), h.key_bytes, "the key");
    read_exact(job.label_key_text.data(), h.label_key_bytes, "the label key");
    XXH3_64bits_update(&digest_, job.key_text.data(), h.key_bytes);
    XXH3_64bits_update(&digest_, job.label_key_text.data(), h.label_key_bytes);
    std::string reason(h.reason_bytes, '\0');
    read_exact(reason.data(), h.reason_bytes, "the reason");
    if (job.key_text.find('\0') != std::string::npos) throw input_error(where + "a key with a NUL byte");
    job.row = {};
    job.row.csv_line = seq;  // the sample's position in the stream, for messages and rejected.csv
    job.row.key = job.key_text;
    job.row.label_key = job.label_key_text;
    job.row.class_id = h.class_id;
    // What the build's messages name a file by; the sample itself is named by row_origin.
    job.image_path = "image";
    job.label_path = h.label_kind == part_kind::none ? std::string() : "mask";

    // The bytes are read whatever happens to the sample, so that the next frame is found; a
    // ring part's place is checked here, and it is copied out only once its shape is.
    const bool too_large = h.image_bytes > max_row_bytes || h.label_bytes > max_row_bytes - h.image_bytes;
    std::uint64_t image_offset = 0, label_offset = 0;
    if (h.image_in_ring) image_offset = read_ring_offset(h.image_bytes, "image", where);
    else read_part(job.image_file, h.image_bytes, "the image", too_large);
    if (h.label_in_ring) label_offset = read_ring_offset(h.label_bytes, "label", where);
    else read_part(job.label_file, h.label_bytes, "the label", too_large);
    cells_.resize(h.field_bytes);
    read_exact(cells_.data(), h.field_bytes, "the field values");
    XXH3_64bits_update(&digest_, cells_.data(), h.field_bytes);
    ++count_;  // after its bytes: a stream cut short inside them names this sample, by its index

    job.error = sample_problem(h, reason, too_large, max_row_bytes, classes_, job);
    if (h.image_in_ring) take_from_ring(job.image_file, image_offset, h.image_bytes, job.ok());
    if (h.label_in_ring) take_from_ring(job.label_file, label_offset, h.label_bytes, job.ok());
    if (!job.ok()) return true;
    if (fields_ == nullptr) {
        if (h.field_bytes) job.error = "the sample has field values, but the build declares no --field";
        return true;
    }
    parse_field_cells(job);
    return true;
}

// Reads n bytes of the stream into out; where the sample is too large, reads past them (out
// left empty).
void sample_stream::read_part(std::vector<std::uint8_t>& out, std::uint64_t n, const char* what, bool too_large) {
    if (too_large) {
        unsigned char sink[1 << 16];
        for (std::uint64_t left = n; left;) {
            const std::size_t k = std::size_t(std::min<std::uint64_t>(left, sizeof sink));
            read_exact(sink, k, what);
            left -= k;
        }
        out.clear();
        return;
    }
    out.resize(std::size_t(n));
    read_exact(out.data(), out.size(), what);
}

// A ring part's offset (read from the stream), checked against the ring: the part of n bytes
// must lie inside it. Throws input_error naming the sample: such a stream cannot be trusted.
std::uint64_t sample_stream::read_ring_offset(std::uint64_t n, const char* what, const std::string& where) {
    if (!ring_) throw input_error(where + "the " + what + " is in the ring, but the stream has none");
    std::uint64_t offset = 0;
    read_exact(&offset, sizeof offset, "a ring part's offset");
    if (offset > ring_->size() || n > ring_->size() - offset)
        throw input_error(where + "the " + what + "'s ring part at " + std::to_string(offset) + " (" + std::to_string(n) +
                          " bytes) lies outside the ring of " + std::to_string(ring_->size()) + " bytes");
    return offset;
}

// A ring part into out (copy: else the sample is not packed, and out is left empty), then
// released; the writer is told once the released parts hold an eighth of the ring.
void sample_stream::take_from_ring(std::vector<std::uint8_t>& out, std::uint64_t offset, std::uint64_t n, bool copy) {
    if (copy) out.assign(ring_->at(offset), ring_->at(offset) + n);
    else out.clear();
    ++ring_parts_;
    unreleased_bytes_ += n;
    if (unreleased_bytes_ >= ring_->size() / 8) {
        ring_->release(ring_parts_);
        unreleased_bytes_ = 0;
    }
}

// The sample's field cells (cells_), each ended by a NUL: as many as fields are declared,
// parsed into the job's field text (or its error).
void sample_stream::parse_field_cells(sample_job& job) {
    cell_views_.clear();
    for (std::string_view rest = cells_; !rest.empty();) {
        const std::size_t nul = rest.find('\0');
        if (nul == std::string_view::npos) {
            job.error = "the field values do not end with a NUL byte";
            return;
        }
        cell_views_.push_back(rest.substr(0, nul));
        rest.remove_prefix(nul + 1);
    }
    try {
        fields_->parse(cell_views_, job.field_text);
    } catch (const input_error& e) {
        job.error = e.what();
        return;
    }
    job.field_source = job.field_text;
}

}  // namespace shardpack
