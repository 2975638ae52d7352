// The shardpack v1 on-disk format: constants, the parsed forms of its structures, and the
// checks that turn untrusted bytes into them. formats/shardpack-v1.md is the normative text;
// every constant here has a section there, and tests/test_format.cpp pins both together.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "endian.hpp"
#include "error.hpp"
#include "fields.hpp"

namespace shardpack::detail {

inline constexpr unsigned char shard_magic[8] = {0x89, 'S', 'P', 'K', '\r', '\n', 0x1A, '\n'};
inline constexpr unsigned char trailer_magic[8] = {'S', 'P', 'K', 'T', 'R', 'A', 'I', 'L'};
inline constexpr std::uint16_t version_major = 1;
inline constexpr std::uint16_t version_minor = 1;          // what a shard with band frames (codec 2, 1.1) declares
inline constexpr std::uint16_t version_minor_plain = 0;    // what a shard without 1.1 features declares
inline constexpr std::uint16_t version_minor_region_bands = 3;  // a shard with per-region band heights (codec 3)
inline constexpr std::uint16_t version_minor_wide_pixels = 4;   // a shard of uint16 images or of N bands (1.4)
inline constexpr std::uint16_t version_minor_fields = 5;        // a shard with per-sample fields (1.5)

inline constexpr std::size_t fixed_header_size = 64;
inline constexpr std::size_t section_header_size = 16;
inline constexpr std::size_t index_entry_size = 40;
inline constexpr std::size_t trailer_size = 40;
inline constexpr std::size_t record_header_size = 16;
inline constexpr std::uint32_t record_alignment = 64;

// Feature bits. A reader refuses a shard with a required bit it does not know.
inline constexpr std::uint64_t feature_zstd_records = 1u << 0;  // some record uses codec 1
inline constexpr std::uint64_t feature_band_frames = 1u << 1;   // 1.1: some record uses codec 2
inline constexpr std::uint64_t feature_region_bands = 1u << 2;  // 1.3: some record uses codec 3
inline constexpr std::uint64_t feature_wide_pixels = 1u << 3;   // 1.4: uint16 images or channel order "bands"
inline constexpr std::uint64_t feature_fields = 1u << 4;        // 1.5: a FIELDS section; records carry field values
inline constexpr std::uint64_t known_required_features_1_0 = feature_zstd_records;
inline constexpr std::uint64_t known_required_features_1_1 = feature_zstd_records | feature_band_frames;
inline constexpr std::uint64_t known_required_features_1_3 = feature_zstd_records | feature_band_frames | feature_region_bands;
inline constexpr std::uint64_t known_required_features = known_required_features_1_3 | feature_wide_pixels | feature_fields;

// Section types. Bit 0 of a section's flags marks it required.
inline constexpr std::uint32_t section_schema = 1;
inline constexpr std::uint32_t section_classes = 2;
inline constexpr std::uint32_t section_fields = 3;  // 1.5: the declarations of per-sample fields
inline constexpr std::uint32_t section_flag_required = 1u << 0;

// Record codecs (index entry field).
inline constexpr std::uint32_t codec_raw = 0;
inline constexpr std::uint32_t codec_zstd = 1;
inline constexpr std::uint32_t codec_zstd_bands = 2;  // 1.1: one zstd frame per band of rows of each region
inline constexpr std::uint32_t codec_zstd_region_bands = 3;  // 1.3: the same with a band height per region

// Sanity limits applied to untrusted sizes before any allocation.
inline constexpr std::uint64_t max_record_bytes = std::uint64_t(1) << 32;    // 4 GiB decoded
inline constexpr std::uint64_t max_header_bytes = std::uint64_t(64) << 20;   // 64 MiB of sections
inline constexpr std::uint32_t max_classes = 65535;
inline constexpr std::uint32_t max_key_bytes = 1u << 16;
inline constexpr std::uint32_t max_side = 1u << 16;

enum class task_code : std::uint8_t { segmentation = 1, classification = 2 };
enum class layout_code : std::uint8_t { one_hot = 1, index = 2, class_id = 3 };
// bands (1.4): 1 to 255 channels as the source stored them, with no color meaning.
enum class order_code : std::uint8_t { gray = 1, rgb = 2, rgba = 3, bands = 4 };
inline constexpr std::uint32_t max_bands = 255;

inline constexpr std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

struct class_record {
    std::string name;
    bool has_color = false;
    std::uint8_t r = 0, g = 0, b = 0;
};

// The SCHEMA section (type 1), 32 bytes.
struct schema_record {
    task_code task = task_code::segmentation;
    std::uint8_t channels = 3;
    order_code channel_order = order_code::rgb;
    layout_code label_layout = layout_code::one_hot;
    std::uint8_t label_dtype_bytes = 0;  // index layout: 1 or 2; one-hot: 1; class id: 0
    std::uint8_t image_dtype_bytes = 1;  // 1: uint8; 2: uint16, little-endian (1.4); the schema's code is the same number
    std::uint32_t fixed_height = 0;      // 0: varies per record
    std::uint32_t fixed_width = 0;
    std::uint32_t class_count = 0;
    std::uint32_t ignore_value = 0;      // index layout: the id of ignored pixels
    // The FIELDS section (1.5), not part of the 32 bytes: empty when the shard has none. When it
    // is not empty every record holds its field values after its key (spec 10.4).
    std::vector<field_info> fields;
};
inline constexpr std::size_t schema_payload_size = 32;

struct index_entry {
    std::uint64_t offset = 0;
    std::uint64_t stored_size = 0;
    std::uint64_t decoded_size = 0;
    std::uint64_t checksum = 0;  // XXH3-64, seed 0, of the stored bytes
    std::uint32_t codec = codec_raw;
};

// Where the fields of a decoded record lie, derived from its 16-byte header and the schema.
struct record_layout {
    std::uint32_t height = 0, width = 0;
    std::int32_t class_id = -1;
    std::uint32_t key_length = 0;
    std::uint64_t fields_offset = 0, fields_bytes = 0;  // the field values (1.5); 0, 0 without fields
    std::uint64_t image_offset = 0, image_bytes = 0;
    std::uint64_t label_offset = 0, label_bytes = 0;
    std::uint64_t total_bytes = 0;
};

// A shard of this schema needs format 1.4 (required feature bit 3).
inline bool uses_wide_pixels(const schema_record& s) {
    return s.image_dtype_bytes != 1 || s.channel_order == order_code::bands;
}

inline std::uint64_t label_bytes_for(const schema_record& s, std::uint64_t pixels) {
    switch (s.label_layout) {
        case layout_code::one_hot: return pixels * s.class_count;
        case layout_code::index: return pixels * s.label_dtype_bytes;
        case layout_code::class_id: return 0;
    }
    return 0;
}

// The layout of a record with these values; shared by the writer (to build) and reader (to check).
// `fields_bytes`: the length of the field values, with fields (schema.fields not empty).
inline record_layout make_record_layout(const schema_record& s, std::uint32_t height, std::uint32_t width,
                                        std::int32_t class_id, std::uint32_t key_length, std::uint32_t fields_bytes = 0) {
    record_layout r;
    r.height = height;
    r.width = width;
    r.class_id = class_id;
    r.key_length = key_length;
    const std::uint64_t pixels = std::uint64_t(height) * width;
    if (s.fields.empty()) {
        r.image_offset = align_up(record_header_size + key_length, record_alignment);
    } else {
        r.fields_offset = record_header_size + std::uint64_t(key_length) + 4;  // after the key and fields_length
        r.fields_bytes = fields_bytes;
        r.image_offset = align_up(r.fields_offset + fields_bytes, record_alignment);
    }
    r.image_bytes = pixels * s.channels * s.image_dtype_bytes;
    r.label_bytes = label_bytes_for(s, pixels);
    r.label_offset = r.label_bytes ? align_up(r.image_offset + r.image_bytes, record_alignment)
                                   : r.image_offset + r.image_bytes;
    r.total_bytes = r.label_offset + r.label_bytes;
    return r;
}

inline void encode_schema(const schema_record& s, unsigned char* out /* 32 bytes */) {
    std::memset(out, 0, schema_payload_size);
    out[0] = static_cast<unsigned char>(s.task);
    out[1] = s.channels;
    out[2] = static_cast<unsigned char>(s.channel_order);
    out[3] = static_cast<unsigned char>(s.label_layout);
    out[4] = s.label_dtype_bytes;
    out[5] = s.image_dtype_bytes;  // image dtype: 1 uint8, 2 uint16
    store_u32(out + 8, s.fixed_height);
    store_u32(out + 12, s.fixed_width);
    store_u32(out + 16, s.class_count);
    store_u32(out + 20, s.ignore_value);
}

// Checks a schema for internal consistency; returns an empty string or the reason.
inline std::string schema_problem(const schema_record& s) {
    const bool seg = s.task == task_code::segmentation;
    if (s.task != task_code::segmentation && s.task != task_code::classification) return "unknown task code";
    if (s.image_dtype_bytes != 1 && s.image_dtype_bytes != 2) return "unknown image dtype code";
    if (s.channel_order == order_code::bands) {
        if (s.channels == 0) return "a bands image needs at least 1 channel";
    } else {
        const unsigned want = s.channel_order == order_code::gray ? 1 : s.channel_order == order_code::rgb ? 3
                            : s.channel_order == order_code::rgba ? 4 : 0;
        if (want == 0) return "unknown channel order code";
        if (s.channels != want) return "channel count does not match channel order";
    }
    if (s.class_count == 0 || s.class_count > max_classes) return "class count out of range";
    if (s.fixed_height > max_side || s.fixed_width > max_side) return "fixed size out of range";
    if ((s.fixed_height == 0) != (s.fixed_width == 0)) return "only one fixed dimension is set";
    if (seg && s.label_layout == layout_code::one_hot && s.label_dtype_bytes != 1)
        return "one-hot labels must be 1 byte";
    if (seg && s.label_layout == layout_code::index) {
        if (s.label_dtype_bytes != 1 && s.label_dtype_bytes != 2) return "index labels must be 1 or 2 bytes";
        const std::uint32_t limit = s.label_dtype_bytes == 1 ? 255u : 65535u;
        if (s.class_count > limit) return "too many classes for the index dtype";
        if (s.ignore_value != limit) return "ignore value must be the dtype's maximum";
    }
    if (seg && s.label_layout != layout_code::one_hot && s.label_layout != layout_code::index)
        return "segmentation needs a one-hot or index layout";
    if (seg && s.label_layout == layout_code::one_hot && s.ignore_value != (s.class_count <= 255 ? 255u : 65535u))
        return "ignore value must be 255 (up to 255 classes) or 65535";
    if (!seg && (s.label_layout != layout_code::class_id || s.label_dtype_bytes != 0))
        return "classification needs the class id layout";
    return {};
}

inline schema_record decode_schema(const unsigned char* p, std::size_t n) {
    if (n < schema_payload_size) throw error("schema section is " + std::to_string(n) + " bytes, expected 32");
    schema_record s;
    s.task = static_cast<task_code>(p[0]);
    s.channels = p[1];
    s.channel_order = static_cast<order_code>(p[2]);
    s.label_layout = static_cast<layout_code>(p[3]);
    s.label_dtype_bytes = p[4];
    if (p[5] != 1 && p[5] != 2) throw error("schema: unknown image dtype code " + std::to_string(p[5]));
    s.image_dtype_bytes = p[5];
    s.fixed_height = load_u32(p + 8);
    s.fixed_width = load_u32(p + 12);
    s.class_count = load_u32(p + 16);
    s.ignore_value = load_u32(p + 20);
    if (auto why = schema_problem(s); !why.empty()) throw error("schema: " + why);
    return s;
}

inline std::vector<unsigned char> encode_classes(const std::vector<class_record>& classes) {
    std::vector<unsigned char> out(4);
    store_u32(out.data(), static_cast<std::uint32_t>(classes.size()));
    for (const auto& c : classes) {
        const std::size_t at = out.size();
        out.resize(at + 8 + c.name.size());
        out[at] = c.has_color ? 1 : 0;
        out[at + 1] = c.r;
        out[at + 2] = c.g;
        out[at + 3] = c.b;
        store_u32(out.data() + at + 4, static_cast<std::uint32_t>(c.name.size()));
        std::memcpy(out.data() + at + 8, c.name.data(), c.name.size());
    }
    return out;
}

inline std::vector<class_record> decode_classes(const unsigned char* p, std::size_t n) {
    if (n < 4) throw error("classes section is too short");
    const std::uint32_t count = load_u32(p);
    if (count > max_classes) throw error("classes section declares " + std::to_string(count) + " classes");
    std::vector<class_record> out;
    out.reserve(count);
    std::size_t at = 4;
    for (std::uint32_t i = 0; i < count; ++i) {
        if (n - at < 8) throw error("classes section ends inside class " + std::to_string(i));
        class_record c;
        if (p[at] > 1) throw error("classes section: class " + std::to_string(i) + " has a bad color flag");
        c.has_color = p[at] == 1;
        c.r = p[at + 1];
        c.g = p[at + 2];
        c.b = p[at + 3];
        const std::uint32_t len = load_u32(p + at + 4);
        at += 8;
        if (len > n - at) throw error("classes section: name of class " + std::to_string(i) + " runs past the section");
        c.name.assign(reinterpret_cast<const char*>(p + at), len);
        at += len;
        out.push_back(std::move(c));
    }
    if (at != n) throw error("classes section has " + std::to_string(n - at) + " bytes after the last class");
    return out;
}

inline index_entry decode_index_entry(const unsigned char* p) {
    index_entry e;
    e.offset = load_u64(p);
    e.stored_size = load_u64(p + 8);
    e.decoded_size = load_u64(p + 16);
    e.checksum = load_u64(p + 24);
    e.codec = load_u32(p + 32);
    return e;
}

inline void encode_index_entry(const index_entry& e, unsigned char* p) {
    store_u64(p, e.offset);
    store_u64(p + 8, e.stored_size);
    store_u64(p + 16, e.decoded_size);
    store_u64(p + 24, e.checksum);
    store_u32(p + 32, e.codec);
    store_u32(p + 36, 0);
}

// Parses a decoded record's header and checks that its fields fill exactly `size` bytes.
// `available`: how many bytes at p may be read (a band-frame record's stored bytes hold only its
// prefix decoded); the default, size, for a whole decoded record.
inline record_layout parse_record(const schema_record& s, const unsigned char* p, std::uint64_t size,
                                  std::uint64_t available = ~std::uint64_t(0)) {
    if (available > size) available = size;
    if (size < record_header_size) throw error("record is " + std::to_string(size) + " bytes, shorter than its header");
    const std::uint32_t height = load_u32(p), width = load_u32(p + 4);
    const auto class_id = static_cast<std::int32_t>(load_u32(p + 8));
    const std::uint32_t key_length = load_u32(p + 12);
    if (height == 0 || width == 0 || height > max_side || width > max_side)
        throw error("record has an impossible size " + std::to_string(width) + "x" + std::to_string(height));
    if (s.fixed_height && (height != s.fixed_height || width != s.fixed_width))
        throw error("record is " + std::to_string(width) + "x" + std::to_string(height) + " but the schema fixes " +
                    std::to_string(s.fixed_width) + "x" + std::to_string(s.fixed_height));
    if (key_length > max_key_bytes) throw error("record key length " + std::to_string(key_length) + " is over the limit");
    if (s.task == task_code::classification) {
        if (class_id < 0 || std::uint32_t(class_id) >= s.class_count)
            throw error("record class id " + std::to_string(class_id) + " is out of range");
    } else if (class_id != -1) {
        throw error("segmentation record carries class id " + std::to_string(class_id));
    }
    std::uint32_t fields_bytes = 0;
    if (!s.fields.empty()) {
        const std::uint64_t at = record_header_size + std::uint64_t(key_length);
        if (available < at + 4) throw error("record ends before its fields_length");
        fields_bytes = load_u32(p + at);
        if (fields_bytes > max_fields_bytes)
            throw error("record's fields are " + std::to_string(fields_bytes) + " bytes, over the 64 MiB limit");
    }
    record_layout r = make_record_layout(s, height, width, class_id, key_length, fields_bytes);
    if (r.total_bytes != size)
        throw error("record is " + std::to_string(size) + " bytes but its header implies " + std::to_string(r.total_bytes));
    return r;
}

}  // namespace shardpack::detail
