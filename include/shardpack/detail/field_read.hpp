// Reading per-sample fields (format 1.5): dataset::fields(i), read_fields (with a window's boxes),
// sample::fields(), and the fields of read_batch (sample_buffers::fields). Only a record's prefix
// is read: its stored bytes are checksummed, and a codec 1 record is decompressed only as far as
// its field values.
// Part of reader.hpp, which includes it after the declarations it uses: include
// <shardpack/reader.hpp>, not this file.
#pragma once
#include <zstd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fields.hpp"
#include "format.hpp"
#include "mapped_guard.hpp"
#include "xxhash.hpp"

namespace shardpack {

namespace detail {
// Decompresses the first `want` bytes of the zstd frame [src, src + n) into dst; returns how
// many it got (fewer only at the frame's end).
inline std::size_t decompress_prefix(ZSTD_DCtx* dctx, const unsigned char* src, std::size_t n, unsigned char* dst,
                                     std::size_t want, std::size_t& consumed) {
    ZSTD_outBuffer out{dst, want, 0};
    ZSTD_inBuffer in{src + consumed, n - consumed, 0};
    while (out.pos < out.size) {
        const std::size_t r = ZSTD_decompressStream(dctx, &out, &in);
        if (ZSTD_isError(r)) throw error(std::string("zstd: ") + ZSTD_getErrorName(r));
        if (r == 0 || (in.pos == in.size && out.pos < out.size)) break;
    }
    consumed += in.pos;
    return out.pos;
}
}  // namespace detail

inline std::pair<std::size_t, std::size_t> dataset::read_fields(std::size_t i, std::vector<field_value>& out, read_context& ctx,
                                                               const crop_box* window, double min_box_visibility,
                                                               const std::vector<bool>* want) const {
    using namespace detail;
    const schema_record& s = s_->schema;
    if (s.fields.empty()) throw error(s_->path + ": the dataset has no fields (format 1.5, shardpack build --field)");
    if (!(min_box_visibility >= 0.0 && min_box_visibility <= 1.0))
        throw error("min_box_visibility must be in [0, 1], not " + std::to_string(min_box_visibility));
    std::size_t k = 0, local = 0;
    locate(i, k, local);
    const shard_pin pinned = s_->pin(k);
    const shard_file& shard = *pinned;
    // Reads of the mapping run guarded, as load's (detail/mapped_guard.hpp).
    return guarded(shard.bytes(), shard.size(), [&] { return s_->where(k, local); },
                   [&] { return read_fields_pinned(shard, k, local, out, ctx, window, min_box_visibility, want); });
}

inline std::pair<std::size_t, std::size_t> dataset::read_fields_pinned(const detail::shard_file& shard, std::size_t k,
                                                                      std::size_t local, std::vector<field_value>& out,
                                                                      read_context& ctx, const crop_box* window,
                                                                      double min_box_visibility,
                                                                      const std::vector<bool>* want) const {
    using namespace detail;
    const schema_record& s = s_->schema;
    const index_entry e = shard.entry(local);
    const unsigned char* stored = read_stored(*s_, shard, k, local, e, ctx.stored_);
    try {
        const unsigned char* rec = stored;
        std::uint64_t available = e.stored_size;
        if (e.codec == codec_zstd) {
            // The header, then the key and fields_length, then the values: decompressed in steps,
            // each as far as the bytes before it say.
            ZSTD_DCtx* dctx = ctx.dctx_.get();
            ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
            std::vector<unsigned char>& buf = ctx.window_;
            std::size_t consumed = 0, got = 0;
            const std::size_t n = static_cast<std::size_t>(e.stored_size);
            const auto upto = [&](std::uint64_t end) {
                end = std::min<std::uint64_t>(end, e.decoded_size);
                if (end <= got) return;
                if (buf.size() < end) buf.resize(static_cast<std::size_t>(end));
                got += decompress_prefix(dctx, stored, n, buf.data() + got, static_cast<std::size_t>(end - got), consumed);
            };
            upto(record_header_size);
            if (got >= record_header_size) upto(record_header_size + std::uint64_t(std::min(load_u32(buf.data() + 12), max_key_bytes + 1)) + 4);
            if (got >= record_header_size) {
                const std::uint64_t at = record_header_size + std::uint64_t(load_u32(buf.data() + 12));
                if (got >= at + 4) upto(at + 4 + std::min(load_u32(buf.data() + at), max_fields_bytes + 1));
            }
            rec = buf.data();
            available = got;
        }
        const record_layout r = parse_record(s, rec, e.decoded_size, available);
        if (r.fields_offset + r.fields_bytes > available)
            throw error("the record's fields run past its stored bytes");
        decode_field_values(s.fields, rec + r.fields_offset, static_cast<std::size_t>(r.fields_bytes), r.height, r.width, out, want);
        if (window)
            for (field_value& v : out)
                if (v.kind == field_kind::boxes)
                    window_boxes(v.boxes, window->x, window->y, window->width, window->height, window->hflip, window->vflip,
                                 min_box_visibility);
        return {r.height, r.width};
    } catch (const error& ex) {
        throw error(s_->where(k, local) + ": " + ex.what());
    }
}

inline std::vector<field_value> dataset::fields(std::size_t i) const {
    read_context ctx;
    std::vector<field_value> out;
    read_fields(i, out, ctx);
    return out;
}

inline std::size_t dataset::field_index(const std::string& name) const {
    const auto& f = s_->schema.fields;
    for (std::size_t j = 0; j < f.size(); ++j)
        if (f[j].name == name) return j;
    std::string known;
    for (std::size_t j = 0; j < f.size(); ++j) known += (j ? ", " : "") + f[j].name;
    throw error(s_->path + ": no field named '" + name + "'" + (f.empty() ? " (the dataset has no fields)" : " (fields: " + known + ")"));
}

inline std::vector<field_value> sample::fields() const {
    const auto& s = state_->schema;
    if (s.fields.empty()) throw error("fields(): the dataset has no fields");
    std::vector<field_value> out;
    detail::decode_field_values(s.fields, rec_ + layout_.fields_offset, static_cast<std::size_t>(layout_.fields_bytes),
                                layout_.height, layout_.width, out);
    return out;
}

// read_batch's fields: the window read_slot gives slot `slot` (plan_augmentation is a pure
// function of the augmentation, the index and the slot), so boxes follow the pixels exactly.
inline void dataset::read_slot_fields(std::size_t i, const sample_buffers& out, read_context& ctx, std::size_t slot) const {
    field_batch& fb = *out.fields;
    const std::size_t at = out.first_slot + slot;
    if (fb.slots.size() <= at)
        throw error("read_batch: sample_buffers::fields->slots has " + std::to_string(fb.slots.size()) +
                    " slots, slot " + std::to_string(at) + " is needed (size it to the batch)");
    const auto& decls = s_->schema.fields;
    std::vector<bool> want(decls.size(), fb.fields.empty());
    for (std::size_t f : fb.fields) {
        if (f >= decls.size()) throw error("read_batch: field index " + std::to_string(f) + " is out of range");
        want[f] = true;
    }
    std::vector<field_value>& values = fb.slots[at];
    const auto [height, width] = read_fields(i, values, ctx, nullptr, fb.min_box_visibility, &want);
    if (out.augment) {
        const crop_box b = plan_augmentation(*out.augment, i, height, width, at);
        for (field_value& v : values)
            if (v.kind == field_kind::boxes)
                detail::window_boxes(v.boxes, b.x, b.y, b.width, b.height, b.hflip, b.vflip, fb.min_box_visibility);
    }
}

}  // namespace shardpack
