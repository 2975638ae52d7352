#include "pipeline/file_loader.hpp"

#include "decode/image_decoder.hpp"
#include "decode/sniff.hpp"
#include "pipeline/memory_budget.hpp"
#include "dataset/previous_build.hpp"
#include "io/input_file.hpp"
#include "shardpack/detail/xxhash.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string_view>

namespace shardpack {

std::string read_file_into(const std::string& path, std::vector<std::uint8_t>& out, file_stamp* stamp,
                           std::uint64_t max_bytes, bool note_as_input, file_format* format_out) {
    input_file file;
    std::string why;
    if (!file.open(path, why, note_as_input)) return why;
    const std::uint64_t size = file.size();
    if (size == 0) return "empty file";
    // The type first, from the first bytes: a huge file that is no image is refused unread.
    std::uint8_t head[16];
    const long long head_got = file.read_some(head, std::min<std::uint64_t>(sizeof head, size));
    if (head_got < 0) return std::string("read error: ") + std::strerror(errno);
    const file_format format = sniff_format(head, static_cast<std::size_t>(head_got));
    if (format != file_format::png && format != file_format::jpeg && format != file_format::tiff) {
        try {
            std::uint32_t w = 0, h = 0;
            read_image_size(head, static_cast<std::size_t>(head_got), w, h);  // throws the decoder's refusal
        } catch (const std::exception& e) {
            return e.what();
        }
        return "unrecognised image data";
    }
    if (size > max_bytes)
        return "file is " + std::to_string(size) + " bytes (" + format_bytes(size) + "), more than a row may take: " +
               format_bytes(max_bytes) + " (from --memory-limit)";
    out.resize(static_cast<std::size_t>(size));
    std::memcpy(out.data(), head, static_cast<std::size_t>(head_got));
    const std::size_t rest = out.size() - static_cast<std::size_t>(head_got);
    const long long got = file.read_some(out.data() + head_got, rest);
    if (got < 0) return std::string("read error: ") + std::strerror(errno);
    if (static_cast<std::size_t>(got) != rest) return "file shrank while being read";
    if (format_out) *format_out = format;
    if (stamp) {
        const struct stat& st = file.status();
        stamp->size = out.size();
        stamp->mtime_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
        stamp->hash = XXH3_64bits(out.data(), out.size());
    }
    return {};
}

namespace {
// A file the list names but that is not there: where the path led, and how relative paths resolve.
std::string missing_file_message(const std::string& path, std::string_view cell, const std::string& why) {
    std::string text = path + ": " + why;
    if (why.find("No such file or directory") == std::string::npos) return text;
    std::error_code ec;
    const std::string absolute = std::filesystem::absolute(path, ec).lexically_normal().string();
    if (!ec && absolute != path) text += " (resolved to " + absolute + ")";
    if (!cell.empty() && cell.front() != '/') {
        std::string base = absolute;
        if (base.size() > cell.size() && base.compare(base.size() - cell.size(), cell.size(), cell) == 0)
            base.resize(base.size() - cell.size());
        text += "; the list's relative path '" + std::string(cell) + "' was taken relative to " + base +
                ": give --root DIR if the paths are relative to another folder";
    }
    return text;
}

bool same_file(const file_stamp& now, const file_stamp& before) {
    return now.size == before.size && now.mtime_ns == before.mtime_ns;
}
// A record taken back must still be intact.
bool intact(const previous_record& p) {
    return XXH3_64bits(p.origin.shard->bytes() + p.entry.offset, static_cast<std::size_t>(p.entry.stored_size)) == p.entry.checksum;
}
}  // namespace

namespace {
// A part of a streamed sample (pipeline/sample_stream.hpp): file bytes must be a PNG or JPEG,
// as a file's must. Its stamp, for a later build from files into the same folder: a time no
// file has (so only a content match takes its record back), and the hash of file bytes (pixels
// are no file's content: 0, not hashed).
std::string take_streamed(const std::vector<std::uint8_t>& bytes, const pixel_shape& shape, file_format& format, file_stamp& stamp) {
    stamp.size = bytes.size();
    stamp.mtime_ns = INT64_MIN;
    stamp.hash = 0;
    if (shape.is_pixels()) return {};
    stamp.hash = XXH3_64bits(bytes.data(), bytes.size());
    if (bytes.empty()) return "no image data";
    format = sniff_format(bytes.data(), bytes.size());
    if (format == file_format::png || format == file_format::jpeg) return {};
    try {
        std::uint32_t w = 0, h = 0;
        read_image_size(bytes.data(), bytes.size(), w, h);  // throws the decoder's refusal
    } catch (const std::exception& e) {
        return e.what();
    }
    return "unrecognised image data";
}
}  // namespace

void file_loader::operator()(sample_job& job) const {
    const sample_row& row = job.row;
    if (job.streamed) {
        record_fingerprint& fp = job.fingerprint;
        fp.key = row.key;
        fp.label_key = row.label_key;
        fp.class_id = row.class_id;
        fp.image = {};
        fp.label = {};
        job.key_hash = XXH3_64bits(row.key.data(), row.key.size());
        if (!job.ok()) return;
        if (const std::string why = take_streamed(job.image_file, job.image_pixels, job.image_format, fp.image); !why.empty()) {
            job.error = job.image_path + ": " + why;
            return;
        }
        if (!job.label_path.empty())
            if (const std::string why = take_streamed(job.label_file, job.label_pixels, job.label_format, fp.label); !why.empty())
                job.error = job.label_path + ": " + why;
        return;
    }
    record_fingerprint& fp = job.fingerprint;
    fp.key = row.key;
    fp.label_key = row.label_key;
    fp.class_id = row.class_id;
    fp.image = {};
    fp.label = {};
    fp.fields_hash = 0;
    if (!job.field_source.empty()) {
        const std::uint64_t h = XXH3_64bits(job.field_source.data(), job.field_source.size());
        fp.fields_hash = h ? h : 1;  // 0 means "no fields"
    }
    job.key_hash = XXH3_64bits(row.key.data(), row.key.size());
    const bool has_label = !job.label_path.empty();
    const previous_record* previous = previous_ ? previous_->find(row.key, row.label_key) : nullptr;
    // A row whose --field values changed is decoded again even when its files did not change.
    if (previous && previous->fingerprint->fields_hash != fp.fields_hash) previous = nullptr;
    if (previous && previous->fingerprint->class_id == row.class_id) {
        const auto image = stat_file(job.image_path);
        const auto label = has_label ? stat_file(job.label_path) : std::optional<file_stamp>(file_stamp{});
        if (image && label && same_file(*image, previous->fingerprint->image) &&
            (!has_label || same_file(*label, previous->fingerprint->label)) && intact(*previous)) {
            job.reuse = previous;
            fp = *previous->fingerprint;
            return;
        }
    }

    std::string why = read_file_into(job.image_path, job.image_file, &fp.image, max_row_bytes_, false, &job.image_format);
    if (!why.empty()) {
        job.error = missing_file_message(job.image_path, row.key, why);
        return;
    }
    if (has_label) {
        why = read_file_into(job.label_path, job.label_file, &fp.label, max_row_bytes_ - fp.image.size, false,
                             &job.label_format);
        if (!why.empty()) {
            job.error = missing_file_message(job.label_path, row.label_key, why);
            return;
        }
    }
    // Touched but not changed: the content hashes still match.
    if (previous && previous->fingerprint->class_id == row.class_id && fp.image.hash == previous->fingerprint->image.hash &&
        fp.image.size == previous->fingerprint->image.size &&
        (!has_label || (fp.label.hash == previous->fingerprint->label.hash && fp.label.size == previous->fingerprint->label.size)) &&
        intact(*previous)) {
        job.reuse = previous;
        fp.unknown_pixels = previous->fingerprint->unknown_pixels;
        fp.class_counts = previous->fingerprint->class_counts;
        fp.tolerance_counts = previous->fingerprint->tolerance_counts;
        fp.unknown_values = previous->fingerprint->unknown_values;
    }
}

}  // namespace shardpack
