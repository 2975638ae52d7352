// One shard, opened and checked: the header, its sections, the trailer and the index are all
// validated against the file at open, so a truncated, half-written or corrupt shard is
// refused before any record is read, and no later offset can point outside the file.
// The shard is read through a byte_source (storage.hpp): from a mapping, the header and index
// are used in place; otherwise they are read once (three reads: the head, the tail, and the
// index when the tail did not hold it) and kept.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "format.hpp"
#include "hex.hpp"
#include "mapped_file.hpp"
#include "storage.hpp"
#include "xxhash.hpp"

namespace shardpack::detail {

struct shard_header {
    std::uint16_t major = 0, minor = 0;
    std::uint32_t header_length = 0;
    std::uint64_t required_features = 0, optional_features = 0;
    std::uint32_t section_count = 0;
    std::uint32_t alignment = 0;
    std::uint64_t shard_number = 0;
    std::uint64_t first_record = 0;
};

class shard_file {
public:
    // Opens and validates; every error message starts with the shard's name. `known_required`:
    // the required feature bits this reader knows (a test passes the 1.0 set to check how a 1.0
    // reader meets a 1.1 shard).
    // The file at `path`, memory-mapped.
    shard_file(std::string path, std::string name, std::uint64_t known_required = known_required_features)
        : shard_file(std::make_shared<mmap_source>(path), std::move(name), known_required) {}
    // Any byte source (a mapping, a pread file, a remote object).
    shard_file(std::shared_ptr<byte_source> source, std::string name, std::uint64_t known_required = known_required_features)
        : name_(std::move(name)), file_(std::move(source)), known_required_(known_required) {
        try {
            parse();
        } catch (const error& e) {
            throw error(name_ + ": " + e.what());
        }
    }

    const std::string& name() const { return name_; }
    const shard_header& header() const { return header_; }
    const schema_record& schema() const { return schema_; }
    const std::vector<class_record>& classes() const { return classes_; }
    // The raw payload bytes of the schema and classes sections, to compare shards cheaply.
    const std::string& schema_bytes() const { return schema_bytes_; }
    std::size_t record_count() const { return count_; }
    index_entry entry(std::size_t i) const { return decode_index_entry(index_ + i * index_entry_size); }
    // The whole file when it is mapped (zero-copy reads), else null: read through source().
    const unsigned char* bytes() const { return mapped_; }
    std::size_t size() const { return static_cast<std::size_t>(file_->size()); }
    const std::shared_ptr<byte_source>& source() const { return file_; }
    std::uint64_t index_offset() const { return index_offset_; }
    // The trailer's checksum (XXH3-64 of the header and the index, checked at open): it
    // identifies the shard's content, the index holding every record's checksum.
    std::uint64_t index_checksum() const { return index_checksum_; }

private:
    std::string name_;
    std::shared_ptr<byte_source> file_;
    const unsigned char* mapped_ = nullptr;
    std::vector<unsigned char> head_copy_, index_copy_;  // when the source is not mapped
    shard_header header_;
    schema_record schema_;
    std::vector<class_record> classes_;
    std::string schema_bytes_;
    const unsigned char* index_ = nullptr;
    std::uint64_t index_offset_ = 0;
    std::uint64_t index_checksum_ = 0;
    std::size_t count_ = 0;
    std::uint64_t known_required_ = known_required_features;

    // Reads [offset, offset + length) of a source that is not mapped into `out`.
    void read_into(std::vector<unsigned char>& out, std::uint64_t offset, std::uint64_t length) {
        out.resize(static_cast<std::size_t>(length));
        if (length) file_->read_at(offset, static_cast<std::size_t>(length), out.data());
    }

    void parse() {
        mapped_ = file_->mapped();
        const std::uint64_t size = file_->size();
        if (size < fixed_header_size + trailer_size)
            throw error("truncated: " + std::to_string(size) + " bytes, a shard has at least " +
                        std::to_string(fixed_header_size + trailer_size));
        // The head (fixed header, then the sections) and the tail (trailer; with a small index,
        // the index too) of an unmapped source: one read each, sized to hold a typical header
        // and index, so a remote source needs two or three requests.
        constexpr std::uint64_t speculative_read = 64 * 1024;
        std::vector<unsigned char> tail_copy;
        std::uint64_t tail_offset = 0;
        const unsigned char* p = mapped_;
        const unsigned char* tail = mapped_;  // tail[0] is the byte at tail_offset
        if (!mapped_) {
            read_into(head_copy_, 0, std::min(size, speculative_read));
            tail_offset = size - std::min(size, speculative_read);
            read_into(tail_copy, tail_offset, size - tail_offset);
            p = head_copy_.data();
            tail = tail_copy.data();
        }
        if (std::memcmp(p, shard_magic, 8) != 0) throw error("not a shardpack shard (bad magic)");
        header_.major = load_u16(p + 8);
        header_.minor = load_u16(p + 10);
        if (header_.major != version_major)
            throw error("format version " + std::to_string(header_.major) + "." + std::to_string(header_.minor) +
                        " is not supported by this reader (it reads major version " + std::to_string(version_major) + ")");
        header_.header_length = load_u32(p + 12);
        header_.required_features = load_u64(p + 16);
        header_.optional_features = load_u64(p + 24);
        header_.section_count = load_u32(p + 32);
        header_.alignment = load_u32(p + 36);
        header_.shard_number = load_u64(p + 40);
        header_.first_record = load_u64(p + 48);

        // Trailer, found from the end: a write that stopped early leaves none.
        const unsigned char* t = tail + (size - trailer_size - tail_offset);
        if (std::memcmp(t + 32, trailer_magic, 8) != 0)
            throw error("no trailer at the end of the file: truncated or not completely written");
        index_offset_ = load_u64(t);
        const std::uint64_t count = load_u64(t + 8);
        const std::uint64_t checksum = load_u64(t + 16);
        if (load_u16(t + 24) != header_.major || load_u16(t + 26) != header_.minor || load_u32(t + 28) != trailer_size)
            throw error("trailer does not match the header (version or trailer size)");
        if (count > (size - fixed_header_size - trailer_size) / index_entry_size)
            throw error("trailer declares " + std::to_string(count) + " records, more than the file can hold");
        if (index_offset_ + count * index_entry_size + trailer_size != size)
            throw error("index (offset " + std::to_string(index_offset_) + ", " + std::to_string(count) +
                        " records) does not end at the trailer: truncated or damaged");
        if (header_.header_length < fixed_header_size || header_.header_length % 8 != 0 ||
            header_.header_length > index_offset_ || header_.header_length > max_header_bytes)
            throw error("header length " + std::to_string(header_.header_length) + " is impossible");
        const unsigned char* index = nullptr;
        if (mapped_) {
            index = p + index_offset_;
        } else {
            if (head_copy_.size() < header_.header_length) read_into(head_copy_, 0, header_.header_length);
            else head_copy_.resize(header_.header_length);
            p = head_copy_.data();
            if (index_offset_ >= tail_offset) {
                const std::size_t from = static_cast<std::size_t>(index_offset_ - tail_offset);
                index_copy_.assign(tail_copy.begin() + std::ptrdiff_t(from),
                                   tail_copy.begin() + std::ptrdiff_t(from + count * index_entry_size));
            } else {
                read_into(index_copy_, index_offset_, count * index_entry_size);
            }
            index = index_copy_.data();
        }

        // The checksum covers the header with its sections and the index: everything that
        // locates records. Records carry checksums of their own.
        XXH3_state_t state;
        XXH3_64bits_reset(&state);
        XXH3_64bits_update(&state, p, header_.header_length);
        XXH3_64bits_update(&state, index, count * index_entry_size);
        const std::uint64_t actual = XXH3_64bits_digest(&state);
        if (actual != checksum) throw error("header/index checksum mismatch: the shard is damaged");
        index_checksum_ = checksum;

        const std::uint64_t unknown = header_.required_features & ~known_required_;
        if (unknown)
            throw error("shard needs features this reader does not know (required feature bits 0x" + hex16(unknown) +
                        "); a newer shardpack reader is needed");
        if (header_.alignment < record_alignment || (header_.alignment & (header_.alignment - 1)) != 0 ||
            header_.alignment > (1u << 20))
            throw error("record alignment " + std::to_string(header_.alignment) + " is impossible");
        parse_sections(p);
        if (!mapped_) {  // the sections are decoded; the index is what reads need
            head_copy_.clear();
            head_copy_.shrink_to_fit();
        }

        index_ = index;
        count_ = static_cast<std::size_t>(count);
        check_index();
    }

    void parse_sections(const unsigned char* p) {
        std::uint64_t at = fixed_header_size;
        bool have_schema = false, have_classes = false, have_fields = false;
        std::string schema_payload, classes_payload, fields_payload;
        std::vector<field_info> fields;
        for (std::uint32_t i = 0; i < header_.section_count; ++i) {
            if (header_.header_length - at < section_header_size) throw error("section " + std::to_string(i) + " runs past the header");
            const std::uint32_t type = load_u32(p + at);
            const std::uint32_t flags = load_u32(p + at + 4);
            const std::uint64_t length = load_u64(p + at + 8);
            at += section_header_size;
            if (length > header_.header_length - at) throw error("section " + std::to_string(i) + " runs past the header");
            const unsigned char* payload = p + at;
            if (type == section_schema) {
                if (have_schema) throw error("two schema sections");
                schema_ = decode_schema(payload, length);
                schema_payload.assign(reinterpret_cast<const char*>(payload), length);
                have_schema = true;
            } else if (type == section_classes) {
                if (have_classes) throw error("two classes sections");
                classes_ = decode_classes(payload, length);
                classes_payload.assign(reinterpret_cast<const char*>(payload), length);
                have_classes = true;
            } else if (type == section_fields && (known_required_ & feature_fields)) {
                if (have_fields) throw error("two fields sections");
                fields = decode_fields_section(payload, static_cast<std::size_t>(length));
                fields_payload.assign(reinterpret_cast<const char*>(payload), length);
                have_fields = true;
            } else if (flags & section_flag_required) {
                throw error("unknown required section type " + std::to_string(type) + "; a newer shardpack reader is needed");
            }  // else: an unknown optional section, skipped
            at = align_up(at + length, 8);
        }
        if (!have_schema) throw error("no schema section");
        if (!have_classes) throw error("no classes section");
        if (uses_wide_pixels(schema_) && !(header_.required_features & feature_wide_pixels))
            throw error("schema has uint16 images or bands, but the shard does not declare that feature (bit 3)");
        // A FIELDS section and feature bit 4 come together (spec 6.5): a record's layout depends on it.
        if (have_fields != ((header_.required_features & feature_fields) != 0))
            throw error(have_fields ? "a fields section without the fields feature bit"
                                    : "the fields feature bit without a fields section");
        schema_.fields = std::move(fields);
        // Shards of one dataset must agree on all three (the fields' payload is empty without fields).
        schema_bytes_ = schema_payload + classes_payload + fields_payload;
        if (classes_.size() != schema_.class_count)
            throw error("schema declares " + std::to_string(schema_.class_count) + " classes but the class table has " +
                        std::to_string(classes_.size()));
    }

    void check_index() const {
        std::uint64_t end = align_up(header_.header_length, header_.alignment);
        for (std::size_t i = 0; i < count_; ++i) {
            const index_entry e = entry(i);
            const std::string where = "record " + std::to_string(i) + ": ";
            if (e.codec != codec_raw && e.codec != codec_zstd && e.codec != codec_zstd_bands && e.codec != codec_zstd_region_bands)
                throw error(where + "unknown codec " + std::to_string(e.codec));
            if (e.codec == codec_zstd && !(header_.required_features & feature_zstd_records))
                throw error(where + "zstd record in a shard that does not declare the zstd feature");
            if (e.codec == codec_zstd_bands && !(header_.required_features & feature_band_frames))
                throw error(where + "band-frame record in a shard that does not declare the band-frame feature");
            if (e.codec == codec_zstd_region_bands && !(header_.required_features & feature_region_bands))
                throw error(where + "record with per-region band heights in a shard that does not declare that feature");
            if (e.offset % header_.alignment != 0) throw error(where + "offset is not aligned");
            if (e.offset < end || e.stored_size > index_offset_ || e.offset > index_offset_ - e.stored_size)
                throw error(where + "stored bytes lie outside the record area");
            if (e.decoded_size > max_record_bytes || e.decoded_size < record_header_size)
                throw error(where + "decoded size " + std::to_string(e.decoded_size) + " is impossible");
            if (e.codec == codec_raw && e.stored_size != e.decoded_size)
                throw error(where + "raw record whose stored and decoded sizes differ");
            end = e.offset + e.stored_size;
        }
    }
};

}  // namespace shardpack::detail
