// Reading records: dataset::load (find, checksum, decompress and parse one record), at, read,
// read_into, and read_slot, which read_batch calls per sample: band-frame records decompress
// straight into the caller's buffers where the layout allows, and a crop decompresses only the
// bands its rows lie in. prefetch announces a batch's byte ranges, merged per shard.
// Part of reader.hpp, which includes it after the declarations it uses: include
// <shardpack/reader.hpp>, not this file.
#pragma once
#include <zstd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "augment.hpp"
#include "band_frames.hpp"
#include "convert.hpp"
#include "dataset_state.hpp"
#include "error.hpp"
#include "format.hpp"
#include "mapped_guard.hpp"
#include "shard_file.hpp"
#include "storage.hpp"
#include "xxhash.hpp"
#include "zstd_frames.hpp"

namespace shardpack {

namespace detail {

// The first step of every record read (load, read_slot): the record's stored bytes, in place in
// a mapped shard (its pages touched first), else read into `copy`; checked against the index's
// XXH3-64 when the dataset verifies. Errors name the record.
inline const unsigned char* read_stored(const dataset_state& st, const shard_file& shard, std::size_t k, std::size_t local,
                                        const index_entry& e, std::vector<unsigned char>& copy) {
    const unsigned char* stored = shard.bytes() + e.offset;
    if (shard.bytes() && e.offset <= shard.size() && e.stored_size <= shard.size() - e.offset)
        touch_pages(stored, static_cast<std::size_t>(e.stored_size));
    if (!shard.bytes()) {
        copy.resize(static_cast<std::size_t>(e.stored_size));
        try {
            shard.source()->read_at(e.offset, copy.size(), copy.data());
        } catch (const error& ex) {
            throw error(st.where(k, local) + ": " + ex.what());
        }
        stored = copy.data();
    }
    if (st.verify && XXH3_64bits(stored, static_cast<std::size_t>(e.stored_size)) != e.checksum)
        throw error(st.where(k, local) + ": checksum mismatch: the stored bytes are damaged");
    return stored;
}

// A band-frame record's layout and band table, from its stored bytes. Errors name the record.
inline void parse_banded(const dataset_state& st, std::size_t k, std::size_t local, const unsigned char* stored,
                         const index_entry& e, record_layout& layout, band_table& bands) {
    try {
        layout = parse_record(st.schema, stored, e.decoded_size, e.stored_size);
        bands = parse_band_table(layout, stored, e.stored_size, e.codec);
    } catch (const error& ex) {
        throw error(st.where(k, local) + ": " + ex.what());
    }
}

}  // namespace detail

inline const unsigned char* dataset::load(std::size_t i, ZSTD_DCtx* dctx, std::vector<unsigned char>& buffer,
                                          std::vector<unsigned char>& stored_copy, detail::record_layout& layout,
                                          detail::shard_pin& pinned) const {
    std::size_t k = 0, local = 0;
    locate(i, k, local);
    pinned = s_->pin(k);
    const detail::shard_file& shard = *pinned;
    return detail::guarded(
        shard.bytes(), shard.size(), [&] { return s_->where(k, local); },
        [&] { return load_pinned(shard, k, local, dctx, buffer, stored_copy, layout); });
}

inline const unsigned char* dataset::load_pinned(const detail::shard_file& shard, std::size_t k, std::size_t local,
                                                 ZSTD_DCtx* dctx, std::vector<unsigned char>& buffer,
                                                 std::vector<unsigned char>& stored_copy,
                                                 detail::record_layout& layout) const {
    using namespace detail;
    const index_entry e = shard.entry(local);
    // Not mapped: one read of the stored bytes, straight into the record buffer for a raw
    // record, else into the stored-bytes buffer.
    const unsigned char* stored = read_stored(*s_, shard, k, local, e, e.codec == codec_raw ? buffer : stored_copy);
    const unsigned char* rec = stored;
    if (e.codec == codec_zstd) {
        // Refuse before allocating when the frames' block headers cannot hold decoded_size
        // bytes: a damaged index entry must not make the reader allocate up to 4 GiB.
        const std::uint64_t bound = zstd_decoded_bound(stored, static_cast<std::size_t>(e.stored_size));
        if (e.decoded_size > bound)
            throw error(s_->where(k, local) + ": zstd: the stored frame holds at most " + std::to_string(bound) +
                        " bytes, the index says " + std::to_string(e.decoded_size));
        buffer.resize(static_cast<std::size_t>(e.decoded_size));
        const std::size_t n = ZSTD_decompressDCtx(dctx, buffer.data(), buffer.size(), stored, static_cast<std::size_t>(e.stored_size));
        if (ZSTD_isError(n)) throw error(s_->where(k, local) + ": zstd: " + ZSTD_getErrorName(n));
        if (n != e.decoded_size)
            throw error(s_->where(k, local) + ": decompressed to " + std::to_string(n) + " bytes, the index says " +
                        std::to_string(e.decoded_size));
        rec = buffer.data();
    } else if (is_band_codec(e.codec)) {
        band_table bands;
        parse_banded(*s_, k, local, stored, e, layout, bands);
        try {
            buffer.resize(static_cast<std::size_t>(e.decoded_size));
            unsigned char* out = buffer.data();
            std::memcpy(out, stored, static_cast<std::size_t>(layout.image_offset));
            const std::uint64_t image_end = layout.image_offset + layout.image_bytes;
            std::memset(out + image_end, 0, static_cast<std::size_t>(layout.label_offset - image_end));
            decompress_bands(dctx, bands, layout.height, 0, layout.height, out + layout.image_offset,
                             out + layout.label_offset);
        } catch (const error& ex) {
            throw error(s_->where(k, local) + ": " + ex.what());
        }
        return buffer.data();
    }
    try {
        layout = parse_record(s_->schema, rec, e.decoded_size);
    } catch (const error& ex) {
        throw error(s_->where(k, local) + ": " + ex.what());
    }
    return rec;
}

inline sample dataset::at(std::size_t i) const {
    thread_local std::unique_ptr<ZSTD_DCtx, detail::dctx_deleter> dctx(ZSTD_createDCtx());
    thread_local std::vector<unsigned char> stored_copy;  // stored bytes of unmapped shards
    if (!dctx) throw error("cannot create a zstd decompression context");
    std::size_t k = 0, local = 0;
    locate(i, k, local);
    sample s;
    s.state_ = s_;
    s.index_ = i;
    detail::shard_pin pinned = s_->pin(k);
    const detail::shard_file& shard = *pinned;
    const bool view = detail::guarded(
        shard.bytes(), shard.size(), [&] { return s_->where(k, local); },
        [&] { return shard.bytes() && shard.entry(local).codec == detail::codec_raw; });
    if (view) {
        // A raw record of a mapped shard: a view into the mapping, which the sample keeps.
        std::vector<unsigned char> unused;
        s.rec_ = load(i, dctx.get(), unused, stored_copy, s.layout_, pinned);
        s.keep_ = pinned->source();
    } else {
        auto owned = std::make_shared<std::vector<unsigned char>>();
        s.rec_ = load(i, dctx.get(), *owned, stored_copy, s.layout_, pinned);
        s.keep_ = std::move(owned);
    }
    return s;
}

inline bool dataset::zero_copy(std::size_t i) const {
    std::size_t k = 0, local = 0;
    locate(i, k, local);
    const detail::shard_pin pinned = s_->pin(k);
    return detail::guarded(
        pinned->bytes(), pinned->size(), [&] { return s_->where(k, local); },
        [&] { return pinned->bytes() && pinned->entry(local).codec == detail::codec_raw; });
}

inline sample dataset::read(std::size_t i, read_context& ctx) const {
    sample s;
    s.state_ = s_;
    s.index_ = i;
    s.rec_ = load(i, ctx.dctx_.get(), ctx.buffer_, ctx.stored_, s.layout_, ctx.pin_);
    return s;
}
inline void dataset::fill(const sample& smp, const sample_buffers& out, std::size_t slot) {
    using namespace detail;
    const schema_record& s = smp.state_->schema;
    const record_layout& r = smp.layout_;
    const pixel_span all{0, std::size_t(r.height) * r.width, std::size_t(r.height) * r.width};
    fill_image_span(s, smp.rec_ + r.image_offset, all, out, slot);
    fill_record_labels(s, r, out, slot);
    if (s.task != task_code::classification) fill_label_span(s, smp.rec_ + r.label_offset, all, out, slot);
}

inline void dataset::read_into(std::size_t i, const sample_buffers& out, read_context& ctx) const {
    if (out.fields && out.fields->slots.size() <= out.first_slot) out.fields->slots.resize(out.first_slot + 1);
    read_slot(i, out, ctx, 0);
}
inline void dataset::read_slot(std::size_t i, const sample_buffers& out, read_context& ctx, std::size_t slot) const {
    std::size_t k = 0, local = 0;
    locate(i, k, local);
    if (detail::decoded_copy* copy = s_->decoded.load(std::memory_order_acquire)) {
        start_decoding(*copy);
        if (const detail::decoded_copy::record* r = copy->find(i)) {
            if (out.fields) read_slot_fields(i, out, ctx, slot);
            sample full;
            full.state_ = s_;
            full.index_ = i;
            full.layout_ = r->layout;
            full.rec_ = r->bytes;
            return fill_decoded(full, k, local, out, ctx, slot);
        }
    }
    const detail::shard_pin pinned = s_->pin(k);
    detail::guarded(
        pinned->bytes(), pinned->size(), [&] { return s_->where(k, local); },
        [&] { read_slot_pinned(i, k, local, *pinned, out, ctx, slot); });
}

inline void dataset::read_slot_pinned(std::size_t i, std::size_t k, std::size_t local, const detail::shard_file& shard,
                                      const sample_buffers& out, read_context& ctx, std::size_t slot) const {
    using namespace detail;
    const index_entry e = shard.entry(local);
    const augmentation* aug = out.augment;
    if (out.fields) read_slot_fields(i, out, ctx, slot);
    if (!is_band_codec(e.codec)) {
        const sample full = read(i, ctx);
        // A whole record decoded here goes into the decoded copy, which then skips it.
        if (detail::decoded_copy* copy = s_->decoded.load(std::memory_order_acquire)) copy->put(i, full.rec_, full.layout_);
        return fill_decoded(full, k, local, out, ctx, slot);
    }
    const unsigned char* stored = read_stored(*s_, shard, k, local, e, ctx.stored_);
    record_layout layout;
    band_table bands;
    parse_banded(*s_, k, local, stored, e, layout, bands);
    check_batch_size(out, layout, k, local);
    if (aug) {
        ctx.buffer_.resize(static_cast<std::size_t>(e.decoded_size));
        const crop_box b = decompress_window(i, k, local, *aug, out.first_slot + slot, layout, bands, ctx);
        if (out.applied) out.applied[slot] = b;
        sample decoded;  // the window's rows, decoded into ctx.buffer_
        decoded.state_ = s_;
        decoded.index_ = i;
        decoded.layout_ = layout;
        decoded.rec_ = ctx.buffer_.data();
        return fill(window(decoded, b, ctx), out, slot);
    }
    fill_banded(k, local, layout, bands, out, ctx, slot);
}

inline void dataset::fill_decoded(const sample& full, std::size_t k, std::size_t local, const sample_buffers& out,
                                  read_context& ctx, std::size_t slot) const {
    check_batch_size(out, full.layout_, k, local);
    if (!out.augment) return fill(full, out, slot);
    const crop_box b = plan_augmentation(*out.augment, full, out.first_slot + slot);
    if (out.applied) out.applied[slot] = b;
    fill(window(full, b, ctx), out, slot);
}

inline bool dataset::keep_decoded() const {
    using namespace detail;
    if (s_->decoded.load(std::memory_order_acquire)) return true;
    if (s_->io != io_mode::stream || !s_->engine || !s_->shards.eager()) return false;
    std::uint64_t stored = 0, decoded = 0;
    std::vector<std::uint64_t> sizes;
    sizes.reserve(size());
    for (std::size_t k = 0; k < s_->shard_count(); ++k) {
        stored += s_->shard_bytes[k];
        const shard_file& shard = *s_->shards.eager_at(k);
        for (std::size_t local = 0; local < shard.record_count(); ++local) {
            sizes.push_back(shard.entry(local).decoded_size);
            decoded += sizes.back();
        }
    }
    if (stored + decoded > s_->engine->config().cache_bytes) return false;
    std::lock_guard<std::mutex> lock(s_->decoded_mutex);
    if (!s_->decoded_owner) {
        s_->decoded_owner = std::make_unique<decoded_copy>(sizes);
        s_->decoded.store(s_->decoded_owner.get(), std::memory_order_release);
    }
    return true;
}

inline std::uint64_t dataset::decoded_bytes() const {
    if (!s_->shards.eager()) return 0;
    std::uint64_t decoded = 0;
    for (std::size_t k = 0; k < s_->shard_count(); ++k) {
        const detail::shard_file& shard = *s_->shards.eager_at(k);
        for (std::size_t local = 0; local < shard.record_count(); ++local) decoded += shard.entry(local).decoded_size;
    }
    return decoded;
}

inline void dataset::start_decoding(detail::decoded_copy& copy) const {
    // The thread must not keep the dataset alive (the state owns the copy, which joins it):
    // it reads through a handle that does not own the state.
    const detail::dataset_state* st = s_.get();
    copy.start([st, &copy](const std::atomic<bool>& stop) {
        dataset self;
        self.s_ = std::shared_ptr<const detail::dataset_state>(std::shared_ptr<const detail::dataset_state>(), st);
        self.decode_ahead(copy, stop);
    });
}

inline void dataset::decode_ahead(detail::decoded_copy& copy, const std::atomic<bool>& stop) const {
    std::unique_ptr<ZSTD_DCtx, detail::dctx_deleter> dctx(ZSTD_createDCtx());
    if (!dctx) return;
    std::vector<unsigned char> buffer, stored;
    detail::record_layout layout;
    for (std::size_t i = 0; i < size() && !stop.load(std::memory_order_relaxed); ++i) {
        if (copy.has(i)) continue;
        try {
            detail::shard_pin pinned;
            copy.put(i, load(i, dctx.get(), buffer, stored, layout, pinned), layout);
        } catch (const std::exception&) {
            return;  // this record and the rest are read the ordinary way, whose error names it
        }
    }
}

// Only the bands that hold the window's rows, into their places in ctx's buffer (sized for the
// whole record); returns the window.
inline crop_box dataset::decompress_window(std::size_t i, std::size_t k, std::size_t local, const augmentation& aug,
                                           std::size_t batch_slot, const detail::record_layout& layout,
                                           const detail::band_table& bands, read_context& ctx) const {
    using namespace detail;
    const schema_record& s = s_->schema;
    const bool seg = s.task == task_code::segmentation;
    unsigned char* buf = ctx.buffer_.data();
    unsigned char* label = seg ? buf + layout.label_offset : nullptr;
    try {
        if (aug.position != crop_position::foreground) {
            const crop_box b = detail::plan_augmentation(aug, i, layout.height, layout.width, batch_slot, nullptr);
            decompress_bands(ctx.dctx_.get(), bands, layout.height, b.y, b.y + b.height, buf + layout.image_offset, label);
            return b;
        }
        // A foreground crop needs the label's foreground per row: counted from the whole label
        // at the record's first read, then kept by the dataset (s_->foreground), so later reads
        // decompress only the window's rows, as uniform crops do.
        if (!seg) throw error("crop_position::foreground needs a segmentation dataset");
        const foreground_map fm(s, aug.background);
        foreground_rows::counts rows = s_->foreground.find(i, aug.background);
        bool whole = false;
        if (!rows) {
            decompress_bands(ctx.dctx_.get(), bands, layout.height, 0, layout.height, nullptr, label);
            auto counted = std::make_shared<std::vector<std::uint32_t>>();
            fm.count_rows(label, layout.height, layout.width, *counted);
            s_->foreground.keep(i, aug.background, counted);
            rows = std::move(counted);
            whole = true;
        }
        foreground_pick fg;
        std::uint64_t rank = 0;
        fg.found = foreground_map::pick_row(*rows, splitmix64(augmentation_seed(aug, i) + 5), fg.y, rank);
        // The window's rows: those of the chosen pixel's window, or of the uniform fallback.
        const crop_box rows_of = detail::plan_augmentation(aug, i, layout.height, layout.width, batch_slot, &fg);
        decompress_bands(ctx.dctx_.get(), bands, layout.height, rows_of.y, rows_of.y + rows_of.height,
                         buf + layout.image_offset, whole ? nullptr : label);
        if (fg.found) fg.x = fm.nth_in_row(label + fg.y * fm.row_bytes(layout.width), rank);
        return detail::plan_augmentation(aug, i, layout.height, layout.width, batch_slot, &fg);
    } catch (const error& ex) {
        throw error(s_->where(k, local) + ": " + ex.what());
    }
}

// A banded record without augmentation: a region's frames decompress straight into the caller's buffers where
// those hold the stored bytes as they are (uint8 image, interleaved; one-hot label stored
// one-hot; uint8 index map stored as one). Otherwise they decompress band by band into the
// context's band buffer, and each band is converted into the outputs while its rows are
// still in the cache (a whole record decompressed first, then converted, would come back
// from memory: 2.4 MB for a 512x512 RGB record with a 6-class one-hot label).
inline void dataset::fill_banded(std::size_t k, std::size_t local, const detail::record_layout& layout,
                                 const detail::band_table& bands, const sample_buffers& out, read_context& ctx,
                                 std::size_t slot) const {
    using namespace detail;
    const schema_record& s = s_->schema;
    const bool seg = s.task == task_code::segmentation;
    const std::size_t pixels = std::size_t(layout.height) * layout.width;
    const std::size_t image_n = pixels * s.channels;
    sample_buffers rest = out;
    unsigned char* image_dst = nullptr;
    unsigned char* label_dst = nullptr;
    const bool image_direct = !out.image_f32 && (!out.channels_first || s.channels == 1);
    if (out.image_u8 && image_direct && s.image_dtype_bytes == 1 && !out.image_u16) {
        need(out.image_capacity, (slot + 1) * image_n, "image");
        image_dst = out.image_u8 + slot * image_n;
        rest.image_u8 = nullptr;
    }
    if (out.image_u16 && image_direct && s.image_dtype_bytes == 2 && !out.image_u8 && little_endian_host()) {
        need(out.image_capacity, (slot + 1) * image_n, "image");  // uint16 images as stored
        image_dst = reinterpret_cast<unsigned char*>(out.image_u16 + slot * image_n);
        rest.image_u16 = nullptr;
    }
    if (seg && out.label_u8 && s.label_layout == layout_code::one_hot && !out.channels_first && !out.label_f32 &&
        !out.label_index && !out.label_index_i64 && !out.label_index_u8) {
        const std::size_t one_hot_n = pixels * s.class_count;
        need(out.label_capacity, (slot + 1) * one_hot_n, "label");
        label_dst = out.label_u8 + slot * one_hot_n;
        rest.label_u8 = nullptr;
    }
    if (seg && out.label_index_u8 && s.label_layout == layout_code::index && s.label_dtype_bytes == 1 &&
        !out.label_u8 && !out.label_f32 && !out.label_index && !out.label_index_i64) {
        need(out.label_index_capacity, (slot + 1) * pixels, "label index");
        label_dst = out.label_index_u8 + slot * pixels;  // a uint8 index map as stored
        rest.label_index_u8 = nullptr;
    }
    const bool image_convert = !image_dst && (rest.image_u8 || rest.image_u16 || rest.image_f32);
    const bool label_convert = seg && !label_dst && (rest.label_u8 || rest.label_f32 || rest.label_index ||
                                                     rest.label_index_i64 || rest.label_index_u8);
    try {
        decompress_bands(ctx.dctx_.get(), bands, layout.height, 0, layout.height, image_dst, label_dst);
        for (std::uint32_t region = 0; region < 2; ++region) {
            if (!(region == 0 ? image_convert : label_convert)) continue;
            for_each_band(ctx.dctx_.get(), bands, layout.height, region, ctx.band_,
                          [&](std::uint32_t first, std::uint32_t last, const unsigned char* rows) {
                              const pixel_span span{std::size_t(first) * layout.width,
                                                    std::size_t(last - first) * layout.width, pixels};
                              if (region == 0) fill_image_span(s, rows, span, rest, slot);
                              else fill_label_span(s, rows, span, rest, slot);
                          });
        }
    } catch (const error& ex) {
        throw error(s_->where(k, local) + ": " + ex.what());
    }
    fill_record_labels(s, layout, rest, slot);
}

inline sample_buffers sample_buffers::slice(std::size_t begin, std::size_t count, std::size_t batch) const {
    sample_buffers part = *this;
    const auto per_sample = [batch](std::size_t capacity) { return batch == 0 ? 0 : capacity / batch; };
    const std::size_t image_n = per_sample(image_capacity), label_n = per_sample(label_capacity),
                      index_n = per_sample(label_index_capacity);
    part.image_capacity = count * image_n;
    part.label_capacity = count * label_n;
    part.label_index_capacity = count * index_n;
    if (image_u8) part.image_u8 += begin * image_n;
    if (image_f32) part.image_f32 += begin * image_n;
    if (image_u16) part.image_u16 += begin * image_n;
    if (label_u8) part.label_u8 += begin * label_n;
    if (label_f32) part.label_f32 += begin * label_n;
    if (label_index) part.label_index += begin * index_n;
    if (label_index_i64) part.label_index_i64 += begin * index_n;
    if (label_index_u8) part.label_index_u8 += begin * index_n;
    if (class_id) part.class_id += begin;
    if (class_id_i64) part.class_id_i64 += begin;
    if (applied) part.applied += begin;
    part.first_slot = first_slot + begin;
    return part;
}

inline void dataset::read_batch(const std::size_t* indices, std::size_t count, const sample_buffers& out,
                                read_context& ctx) const {
    if (count > 1) prefetch(indices, count, ctx);
    if (out.fields && out.fields->slots.size() < out.first_slot + count) out.fields->slots.resize(out.first_slot + count);
    const bool cropped = out.augment && out.augment->height;
    if (count > 1 && !cropped && out.batch_height == 0 && s_->schema.fixed_height == 0) {
        // Records of varying size: the batch takes its first record's, and read_slot checks
        // every other record against it.
        sample_buffers sized = out;
        const auto size = record_size(indices[0], ctx);
        sized.batch_height = size.first;
        sized.batch_width = size.second;
        for (std::size_t j = 0; j < count; ++j) read_slot(indices[j], sized, ctx, j);
        return;
    }
    for (std::size_t j = 0; j < count; ++j) read_slot(indices[j], out, ctx, j);
}

inline std::pair<std::size_t, std::size_t> dataset::record_size(std::size_t i, read_context& ctx) const {
    std::size_t k = 0, local = 0;
    locate(i, k, local);
    const detail::shard_pin pinned = s_->pin(k);
    // read_fields's prefix read, decoding no field value.
    thread_local std::vector<field_value> unused;
    const std::vector<bool> none(s_->schema.fields.size(), false);
    return detail::guarded(pinned->bytes(), pinned->size(), [&] { return s_->where(k, local); },
                           [&] { return read_fields_pinned(*pinned, k, local, unused, ctx, nullptr, 0.0, &none); });
}

inline void dataset::check_batch_size(const sample_buffers& out, const detail::record_layout& layout, std::size_t k,
                                      std::size_t local) const {
    if (out.batch_height == 0 || (out.augment && out.augment->height)) return;
    if (layout.height != out.batch_height || layout.width != out.batch_width)
        throw error(s_->where(k, local) + ": the record is " + std::to_string(layout.width) + "x" +
                    std::to_string(layout.height) + " but its batch holds " + std::to_string(out.batch_width) + "x" +
                    std::to_string(out.batch_height) +
                    " samples (the size of the batch's first record): records of one batch must share a size; "
                    "read with a crop size, or build with --size");
}

inline void dataset::prefetch(const std::size_t* indices, std::size_t count) const {
    read_context ctx;
    prefetch(indices, count, ctx);
}

inline void dataset::prefetch(const std::size_t* indices, std::size_t count, read_context& ctx) const {
    if (detail::decoded_copy* copy = s_->decoded.load(std::memory_order_acquire)) {
        start_decoding(*copy);
        if (copy->complete()) return;
    }
    // Byte ranges that lie within this many bytes of each other are fetched as one: a gap this
    // small costs a disk less than another request (and an object store less than another GET).
    constexpr std::uint64_t merge_gap = 128 * 1024;
    std::vector<byte_range>& ranges = ctx.ranges_;
    // Indices grouped by shard: sort (shard, offset) pairs, then one prefetch call per shard.
    struct wanted {
        std::size_t shard, local;
    };
    thread_local std::vector<wanted> wants;
    thread_local std::vector<std::string> opening;
    wants.clear();
    for (std::size_t j = 0; j < count; ++j) {
        if (indices[j] >= size()) continue;  // read_slot reports it
        std::size_t k = 0, local = 0;
        locate(indices[j], k, local);
        wants.push_back({k, local});
    }
    std::sort(wants.begin(), wants.end(), [](const wanted& a, const wanted& b) { return a.shard < b.shard; });
    // Shards not open yet are announced together first, so that a storage whose opens cost
    // requests (object storage) makes them all at once rather than one shard after the other.
    opening.clear();
    for (std::size_t a = 0; a < wants.size(); ++a)
        if ((a == 0 || wants[a].shard != wants[a - 1].shard) && !s_->shards.is_open(wants[a].shard))
            opening.push_back(s_->name(wants[a].shard));
    if (!opening.empty()) s_->store->will_open(opening.data(), opening.size());
    for (std::size_t a = 0; a < wants.size();) {
        const detail::shard_pin shard = s_->pin(wants[a].shard);
        std::size_t b = a;
        ranges.clear();
        detail::guarded(
            shard->bytes(), shard->size(), [&] { return s_->path + ": " + s_->name(wants[a].shard); },
            [&] {
                for (; b < wants.size() && wants[b].shard == wants[a].shard; ++b) {
                    const detail::index_entry e = shard->entry(wants[b].local);
                    ranges.push_back({e.offset, e.stored_size});
                }
            });
        detail::merge_ranges(ranges, merge_gap);
        shard->source()->prefetch(ranges.data(), ranges.size());
        a = b;
    }
}


}  // namespace shardpack
