// Typed per-sample fields (format 1.5, formats/shardpack-v1.md section 6.5 and 10.4): their
// declarations (the FIELDS section), their values in a record, and how boxes follow a window.
// Shared by the writer (to encode) and the reader (to check and decode). Standard library only.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "endian.hpp"
#include "error.hpp"

namespace shardpack {

// What a field holds, one value per record. Codes are the FIELDS section's `kind` byte.
enum class field_kind : std::uint8_t {
    int64 = 1,         // one signed 64-bit integer
    float64 = 2,       // one IEEE binary64
    string = 3,        // UTF-8 text (as written; not checked)
    int64_list = 4,    // any number of int64
    float64_list = 5,  // any number of float64
    tags = 6,          // a set of ids into the field's vocabulary (multi-label); read as multi-hot
    boxes = 7,         // any number of pixel boxes of the record, each with an id into the vocabulary
};

// A field as declared: its name, kind and, for tags and boxes, the names its ids index.
struct field_info {
    std::string name;
    field_kind kind = field_kind::int64;
    std::vector<std::string> vocabulary;  // tags: the tag names; boxes: the box class names; else empty
};

// A box in pixels of the record (or of a read window): columns [x0, x1), rows [y0, y1), with
// 0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height; `label` indexes the field's vocabulary.
struct box {
    float x0 = 0, y0 = 0, x1 = 0, y1 = 0;
    std::uint32_t label = 0;
    bool operator==(const box& o) const {
        return x0 == o.x0 && y0 == o.y0 && x1 == o.x1 && y1 == o.y1 && label == o.label;
    }
};

// One field's value in one record. Only the member of its kind is used: ints (int64: one
// element; int64_list), floats (float64: one element; float64_list), text, ids (tags: increasing
// tag ids), boxes.
struct field_value {
    field_kind kind = field_kind::int64;
    std::vector<std::int64_t> ints;
    std::vector<double> floats;
    std::string text;
    std::vector<std::uint32_t> ids;
    std::vector<box> boxes;
    void clear() {
        ints.clear();
        floats.clear();
        text.clear();
        ids.clear();
        boxes.clear();
    }
};

namespace detail {

inline constexpr std::uint32_t max_fields = 256;
inline constexpr std::uint32_t max_field_name_bytes = 256;
inline constexpr std::uint32_t max_vocabulary = 65535;
inline constexpr std::uint32_t max_vocabulary_name_bytes = 65536;
inline constexpr std::uint32_t max_fields_bytes = 1u << 26;  // a record's field values: 64 MiB
inline constexpr std::size_t box_bytes = 20;                 // 4 x f32, u32 label

inline bool known_field_kind(std::uint8_t k) { return k >= 1 && k <= 7; }
inline bool has_vocabulary(field_kind k) { return k == field_kind::tags || k == field_kind::boxes; }

inline const char* field_kind_name(field_kind k) {
    switch (k) {
        case field_kind::int64: return "int";
        case field_kind::float64: return "float";
        case field_kind::string: return "str";
        case field_kind::int64_list: return "int-list";
        case field_kind::float64_list: return "float-list";
        case field_kind::tags: return "tags";
        case field_kind::boxes: return "boxes";
    }
    return "?";
}

inline std::uint32_t load_f32_bits(const unsigned char* p) { return load_u32(p); }
inline float load_f32(const unsigned char* p) {
    const std::uint32_t bits = load_u32(p);
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}
inline double load_f64(const unsigned char* p) {
    const std::uint64_t bits = load_u64(p);
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
}
inline void store_f32(unsigned char* p, float f) {
    std::uint32_t bits;
    std::memcpy(&bits, &f, 4);
    store_u32(p, bits);
}
inline void store_f64(unsigned char* p, double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, 8);
    store_u64(p, bits);
}

inline void append_u32(std::vector<unsigned char>& out, std::uint32_t v) {
    const std::size_t at = out.size();
    out.resize(at + 4);
    store_u32(out.data() + at, v);
}
inline void append_bytes(std::vector<unsigned char>& out, const std::string& s) {
    append_u32(out, static_cast<std::uint32_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
}

// The FIELDS section's payload (section type 3).
inline std::vector<unsigned char> encode_fields_section(const std::vector<field_info>& fields) {
    std::vector<unsigned char> out;
    append_u32(out, static_cast<std::uint32_t>(fields.size()));
    for (const auto& f : fields) {
        out.push_back(static_cast<unsigned char>(f.kind));
        out.insert(out.end(), 3, 0);
        append_bytes(out, f.name);
        append_u32(out, static_cast<std::uint32_t>(f.vocabulary.size()));
        for (const auto& v : f.vocabulary) append_bytes(out, v);
    }
    return out;
}

// Why a list of declarations is not valid, or "" (the rules of spec 6.5; the writer checks the
// same before it writes).
inline std::string fields_problem(const std::vector<field_info>& fields) {
    if (fields.empty() || fields.size() > max_fields) return "a FIELDS section declares 1 to 256 fields";
    for (std::size_t i = 0; i < fields.size(); ++i) {
        const field_info& f = fields[i];
        if (f.name.empty() || f.name.size() > max_field_name_bytes) return "field " + std::to_string(i) + ": a name of 1 to 256 bytes";
        for (std::size_t j = 0; j < i; ++j)
            if (fields[j].name == f.name) return "two fields are named '" + f.name + "'";
        if (has_vocabulary(f.kind) ? f.vocabulary.empty() || f.vocabulary.size() > max_vocabulary : !f.vocabulary.empty())
            return "field '" + f.name + "': " + (has_vocabulary(f.kind) ? "tags and boxes need 1 to 65535 names"
                                                                         : "only tags and boxes have names");
    }
    return {};
}

inline std::vector<field_info> decode_fields_section(const unsigned char* p, std::size_t n) {
    std::size_t at = 0;
    const auto need = [&](std::size_t k, const char* what) {
        if (n - at < k) throw error(std::string("fields section ends inside ") + what);
    };
    const auto take_bytes = [&](std::uint32_t limit, const char* what) {
        need(4, what);
        const std::uint32_t len = load_u32(p + at);
        at += 4;
        if (len > limit) throw error(std::string("fields section: ") + what + " of " + std::to_string(len) + " bytes is over the limit");
        need(len, what);
        std::string s(reinterpret_cast<const char*>(p + at), len);
        at += len;
        return s;
    };
    need(4, "its count");
    const std::uint32_t count = load_u32(p);
    at = 4;
    if (count == 0 || count > max_fields) throw error("fields section declares " + std::to_string(count) + " fields (1 to 256)");
    std::vector<field_info> out;
    out.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        need(4, "a field's kind");
        if (!known_field_kind(p[at])) throw error("fields section: field " + std::to_string(i) + " has unknown kind " + std::to_string(p[at]));
        if (p[at + 1] || p[at + 2] || p[at + 3]) throw error("fields section: field " + std::to_string(i) + " has reserved bytes set");
        field_info f;
        f.kind = static_cast<field_kind>(p[at]);
        at += 4;
        f.name = take_bytes(max_field_name_bytes, "a field name");
        need(4, "a vocabulary count");
        const std::uint32_t names = load_u32(p + at);
        at += 4;
        if (names > max_vocabulary) throw error("fields section: field '" + f.name + "' has " + std::to_string(names) + " names");
        f.vocabulary.reserve(names);
        for (std::uint32_t j = 0; j < names; ++j) f.vocabulary.push_back(take_bytes(max_vocabulary_name_bytes, "a vocabulary name"));
        out.push_back(std::move(f));
    }
    if (at != n) throw error("fields section has " + std::to_string(n - at) + " bytes after the last field");
    if (auto why = fields_problem(out); !why.empty()) throw error("fields section: " + why);
    return out;
}

// Appends one record's values (in declaration order) to `out`: the bytes that follow the
// record's fields_length. Boxes must already be in the record's pixels and valid.
inline void encode_field_values(const std::vector<field_info>& decls, const std::vector<field_value>& values,
                                std::vector<unsigned char>& out) {
    if (values.size() != decls.size()) throw error("encode_field_values: one value per declared field");
    for (std::size_t i = 0; i < decls.size(); ++i) {
        const field_value& v = values[i];
        std::size_t at = out.size();
        switch (decls[i].kind) {
            case field_kind::int64:
                out.resize(at + 8);
                store_u64(out.data() + at, static_cast<std::uint64_t>(v.ints.empty() ? 0 : v.ints[0]));
                break;
            case field_kind::float64:
                out.resize(at + 8);
                store_f64(out.data() + at, v.floats.empty() ? 0.0 : v.floats[0]);
                break;
            case field_kind::string:
                append_bytes(out, v.text);
                break;
            case field_kind::int64_list:
                append_u32(out, static_cast<std::uint32_t>(v.ints.size()));
                at = out.size();
                out.resize(at + 8 * v.ints.size());
                for (std::size_t j = 0; j < v.ints.size(); ++j) store_u64(out.data() + at + 8 * j, static_cast<std::uint64_t>(v.ints[j]));
                break;
            case field_kind::float64_list:
                append_u32(out, static_cast<std::uint32_t>(v.floats.size()));
                at = out.size();
                out.resize(at + 8 * v.floats.size());
                for (std::size_t j = 0; j < v.floats.size(); ++j) store_f64(out.data() + at + 8 * j, v.floats[j]);
                break;
            case field_kind::tags:
                append_u32(out, static_cast<std::uint32_t>(v.ids.size()));
                at = out.size();
                out.resize(at + 2 * v.ids.size());
                for (std::size_t j = 0; j < v.ids.size(); ++j) store_u16(out.data() + at + 2 * j, static_cast<std::uint16_t>(v.ids[j]));
                break;
            case field_kind::boxes:
                append_u32(out, static_cast<std::uint32_t>(v.boxes.size()));
                at = out.size();
                out.resize(at + box_bytes * v.boxes.size());
                for (std::size_t j = 0; j < v.boxes.size(); ++j) {
                    unsigned char* q = out.data() + at + box_bytes * j;
                    store_f32(q, v.boxes[j].x0);
                    store_f32(q + 4, v.boxes[j].y0);
                    store_f32(q + 8, v.boxes[j].x1);
                    store_f32(q + 12, v.boxes[j].y1);
                    store_u32(q + 16, v.boxes[j].label);
                }
                break;
        }
    }
}

// Decodes and checks a record's field values (the fields_length bytes at p) for a record of
// width x height pixels, into `out` (one value per declaration; capacities reused). `want`: null
// for every field, else per field whether to decode it (the rest are checked for size only).
inline void decode_field_values(const std::vector<field_info>& decls, const unsigned char* p, std::size_t n,
                                std::uint32_t height, std::uint32_t width, std::vector<field_value>& out,
                                const std::vector<bool>* want = nullptr) {
    out.resize(decls.size());
    std::size_t at = 0;
    const auto need = [&](std::size_t k, const field_info& f) {
        if (n - at < k) throw error("field '" + f.name + "': its value runs past the record's fields");
    };
    const auto count_of = [&](const field_info& f, std::size_t element) {
        need(4, f);
        const std::uint32_t c = load_u32(p + at);
        at += 4;
        if (c > (n - at) / element) throw error("field '" + f.name + "': " + std::to_string(c) + " elements run past the record's fields");
        return static_cast<std::size_t>(c);
    };
    for (std::size_t i = 0; i < decls.size(); ++i) {
        const field_info& f = decls[i];
        field_value& v = out[i];
        v.kind = f.kind;
        v.clear();
        const bool decode = !want || (*want)[i];
        switch (f.kind) {
            case field_kind::int64:
                need(8, f);
                if (decode) v.ints.push_back(static_cast<std::int64_t>(load_u64(p + at)));
                at += 8;
                break;
            case field_kind::float64:
                need(8, f);
                if (decode) v.floats.push_back(load_f64(p + at));
                at += 8;
                break;
            case field_kind::string: {
                const std::size_t c = count_of(f, 1);
                if (decode) v.text.assign(reinterpret_cast<const char*>(p + at), c);
                at += c;
                break;
            }
            case field_kind::int64_list: {
                const std::size_t c = count_of(f, 8);
                if (decode) {
                    v.ints.resize(c);
                    for (std::size_t j = 0; j < c; ++j) v.ints[j] = static_cast<std::int64_t>(load_u64(p + at + 8 * j));
                }
                at += 8 * c;
                break;
            }
            case field_kind::float64_list: {
                const std::size_t c = count_of(f, 8);
                if (decode) {
                    v.floats.resize(c);
                    for (std::size_t j = 0; j < c; ++j) v.floats[j] = load_f64(p + at + 8 * j);
                }
                at += 8 * c;
                break;
            }
            case field_kind::tags: {
                const std::size_t c = count_of(f, 2);
                std::uint32_t previous = 0;
                for (std::size_t j = 0; j < c; ++j) {
                    const std::uint32_t id = load_u16(p + at + 2 * j);
                    if (id >= f.vocabulary.size() || (j > 0 && id <= previous))
                        throw error("field '" + f.name + "': tag ids must increase and be below " + std::to_string(f.vocabulary.size()));
                    previous = id;
                    if (decode) v.ids.push_back(id);
                }
                at += 2 * c;
                break;
            }
            case field_kind::boxes: {
                const std::size_t c = count_of(f, box_bytes);
                if (decode) v.boxes.resize(c);
                for (std::size_t j = 0; j < c; ++j) {
                    const unsigned char* q = p + at + box_bytes * j;
                    box b{load_f32(q), load_f32(q + 4), load_f32(q + 8), load_f32(q + 12), load_u32(q + 16)};
                    // Written so that NaN fails every comparison and is refused.
                    if (!(b.x0 >= 0.0f && b.x0 < b.x1 && b.x1 <= float(width) && b.y0 >= 0.0f && b.y0 < b.y1 &&
                          b.y1 <= float(height)))
                        throw error("field '" + f.name + "': box " + std::to_string(j) + " is not inside the " +
                                    std::to_string(width) + "x" + std::to_string(height) + " record or is empty");
                    if (b.label >= f.vocabulary.size())
                        throw error("field '" + f.name + "': box " + std::to_string(j) + " has label " + std::to_string(b.label) +
                                    ", not below " + std::to_string(f.vocabulary.size()));
                    if (decode) v.boxes[j] = b;
                }
                at += box_bytes * c;
                break;
            }
        }
    }
    if (at != n) throw error("the record's fields hold " + std::to_string(n - at) + " bytes after the last value");
}

// Boxes of a record seen through a window of w x h pixels at (x, y), then mirrored: the read-time
// rule of spec 10.4.1, in this order and in this arithmetic (float32, areas in float64), so that
// any implementation gets the same bits. A box is kept when its clipped part is not empty and
// covers at least `min_visibility` of its area; kept boxes are clipped to the window.
inline void window_boxes(std::vector<box>& boxes, std::uint32_t x, std::uint32_t y, std::uint32_t w, std::uint32_t h,
                         bool hflip, bool vflip, double min_visibility) {
    const float fx = float(x), fy = float(y), fw = float(w), fh = float(h);
    std::size_t kept = 0;
    for (const box& b : boxes) {
        float a0 = b.x0 - fx, a1 = b.x1 - fx, c0 = b.y0 - fy, c1 = b.y1 - fy;
        a0 = a0 > 0.0f ? a0 : 0.0f;
        c0 = c0 > 0.0f ? c0 : 0.0f;
        a1 = a1 < fw ? a1 : fw;
        c1 = c1 < fh ? c1 : fh;
        if (!(a1 > a0 && c1 > c0)) continue;
        const double visible = (double(a1) - double(a0)) * (double(c1) - double(c0));
        const double whole = (double(b.x1) - double(b.x0)) * (double(b.y1) - double(b.y0));
        if (visible < min_visibility * whole) continue;
        box o{a0, c0, a1, c1, b.label};
        if (hflip) {
            o.x0 = fw - a1;
            o.x1 = fw - a0;
        }
        if (vflip) {
            o.y0 = fh - c1;
            o.y1 = fh - c0;
        }
        boxes[kept++] = o;
    }
    boxes.resize(kept);
}

}  // namespace detail
}  // namespace shardpack
