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
}  // namespace

sample_stream::sample_stream(std::size_t classes, field_cell_parser* fields) : classes_(classes), fields_(fields) {
    XXH3_64bits_reset(&digest_);
    unsigned char head[16];
    if (in_.read(head, sizeof head) != sizeof head || std::memcmp(head, sample_stream_magic, sizeof sample_stream_magic) != 0)
        throw input_error("standard input: not a shardpack sample stream (--samples - reads what shardpack.write sends)");
    std::memcpy(&total_, head + 8, sizeof total_);
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
    XXH3_64bits_update(&digest_, head, sizeof head);
    const unsigned char* p = head;
    const char tag = static_cast<char>(take<std::uint8_t>(p));
    const auto image_kind = static_cast<part_kind>(take<std::uint8_t>(p));
    pixel_shape image, label;
    image.channels = take<std::uint8_t>(p);
    const auto label_kind = static_cast<part_kind>(take<std::uint8_t>(p));
    label.channels = take<std::uint8_t>(p);
    label.value_bytes = take<std::uint8_t>(p);
    image.value_bytes = take<std::uint8_t>(p);
    take<std::uint8_t>(p);
    image.width = take<std::uint32_t>(p);
    image.height = take<std::uint32_t>(p);
    label.width = take<std::uint32_t>(p);
    label.height = take<std::uint32_t>(p);
    const auto class_id = take<std::int32_t>(p);
    const auto key_bytes = take<std::uint32_t>(p);
    const auto label_key_bytes = take<std::uint32_t>(p);
    const auto reason_bytes = take<std::uint32_t>(p);
    const auto image_bytes = take<std::uint64_t>(p);
    const auto label_bytes = take<std::uint64_t>(p);
    const auto field_bytes = take<std::uint32_t>(p);

    const std::string where = "standard input: sample " + std::to_string(count_) + ": ";
    if (tag == 'E') {
        if (image_bytes != count_)
            throw input_error("standard input: the sample stream's end mark counts " + std::to_string(image_bytes) +
                              " samples, but " + std::to_string(count_) + " came");
        return false;
    }
    if (tag != 'S' && tag != 'R') throw input_error(where + "not a frame of the sample stream (tag " + std::to_string(int(tag)) + ")");
    if (key_bytes > max_key_bytes || label_key_bytes > max_key_bytes || reason_bytes > max_key_bytes)
        throw input_error(where + "a key or reason longer than " + std::to_string(max_key_bytes) + " bytes");
    if (field_bytes > max_field_bytes)
        throw input_error(where + "field values longer than " + std::to_string(max_field_bytes) + " bytes");
    if (image_kind > part_kind::pixels || label_kind > part_kind::pixels)
        throw input_error(where + "an unknown kind of image or label");

    job.clear(seq);
    job.streamed = true;
    job.key_text.resize(key_bytes);
    job.label_key_text.resize(label_key_bytes);
    read_exact(job.key_text.data(), key_bytes, "the key");
    read_exact(job.label_key_text.data(), label_key_bytes, "the label key");
    XXH3_64bits_update(&digest_, job.key_text.data(), key_bytes);
    XXH3_64bits_update(&digest_, job.label_key_text.data(), label_key_bytes);
    std::string reason(reason_bytes, '\0');
    read_exact(reason.data(), reason_bytes, "the reason");
    if (job.key_text.find('\0') != std::string::npos) throw input_error(where + "a key with a NUL byte");
    job.row = {};
    job.row.csv_line = seq;  // the sample's position in the stream, for messages and rejected.csv
    job.row.key = job.key_text;
    job.row.label_key = job.label_key_text;
    job.row.class_id = class_id;
    // What the build's messages name a file by; the sample itself is named by row_origin.
    job.image_path = "image";
    job.label_path = label_kind == part_kind::none ? std::string() : "mask";
    ++count_;

    // The bytes are read whatever happens to the sample, so that the next frame is found.
    const bool too_large = image_bytes > max_row_bytes || label_bytes > max_row_bytes - image_bytes;
    auto read_part = [&](std::vector<std::uint8_t>& out, std::uint64_t n, const char* what) {
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
    };
    read_part(job.image_file, image_bytes, "the image");
    read_part(job.label_file, label_bytes, "the label");
    cells_.resize(field_bytes);
    read_exact(cells_.data(), field_bytes, "the field values");
    XXH3_64bits_update(&digest_, cells_.data(), field_bytes);

    if (tag == 'R') {
        job.error = reason.empty() ? "rejected by the writer" : reason;
        return true;
    }
    if (too_large) {
        job.error = "the image and label take " + format_bytes(image_bytes + label_bytes) + ", more than a row may take: " +
                    format_bytes(max_row_bytes) + " (from --memory-limit)";
        return true;
    }
    if (image_kind == part_kind::none) {
        job.error = "no image";
        return true;
    }
    auto check_pixels = [&](const pixel_shape& s, std::uint64_t bytes, bool is_label) -> std::string {
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
    };
    if (image_kind == part_kind::pixels) {
        job.image_pixels = image;
        job.error = check_pixels(image, image_bytes, false);
        if (!job.ok()) return true;
    }
    if (label_kind == part_kind::pixels) {
        job.label_pixels = label;
        job.error = check_pixels(label, label_bytes, true);
        if (!job.ok()) return true;
    }
    if (label_kind == part_kind::none && (class_id < 0 || std::size_t(class_id) >= classes_)) {
        job.error = "class id " + std::to_string(class_id) + " is not in the class table (ids 0.." +
                    std::to_string(classes_ ? classes_ - 1 : 0) + ")";
        return true;
    }
    if (fields_ == nullptr) {
        if (field_bytes) job.error = "the sample has field values, but the build declares no --field";
        return true;
    }
    // The cells, each ended by a NUL: as many as fields are declared.
    cell_views_.clear();
    for (std::string_view rest = cells_; !rest.empty();) {
        const std::size_t nul = rest.find('\0');
        if (nul == std::string_view::npos) {
            job.error = "the field values do not end with a NUL byte";
            return true;
        }
        cell_views_.push_back(rest.substr(0, nul));
        rest.remove_prefix(nul + 1);
    }
    try {
        fields_->parse(cell_views_, job.field_text);
    } catch (const input_error& e) {
        job.error = e.what();
        return true;
    }
    job.field_source = job.field_text;
    return true;
}

}  // namespace shardpack
