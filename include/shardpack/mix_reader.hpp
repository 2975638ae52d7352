// shardpack/mix_reader.hpp: reading a weighted mix of datasets (mix.hpp) in batches, as
// dataset::read_batch reads one dataset (header-only, C++17; what reader.hpp needs).
//
//   #include <shardpack/mix_reader.hpp>                        // link -lzstd
//   auto mixed = shardpack::mixed_dataset::open({"data/web", "data/curated", "data/synthetic"},
//                                               {0.6, 0.3, 0.1});
//   shardpack::mix_read_context ctx;                            // one per thread
//   shardpack::sample_buffers out;                              // as for dataset::read_batch
//   out.image_f32 = images; out.image_capacity = batch * H * W * C;
//   out.label_index_i64 = ids; out.label_index_capacity = batch * H * W;
//   const auto mine = mixed.epoch_order(seed, epoch, rank, world, /*drop_last=*/false);
//   std::vector<std::size_t> batch_indices(mine.begin(), mine.begin() + batch);
//   mixed.read_batch(batch_indices.data(), batch, out, ctx);    // mixed indices (mix.hpp)
//
// read_batch fills sample_buffers exactly as dataset::read_batch does (the same outputs, layout,
// capacities, crops, flips, `applied` and `first_slot`), sample after sample, each record read
// from its own dataset straight into its place (no copy of the batch), after a read-ahead of each
// dataset's part of the batch. What differs:
// - Labels are in the mix's classes (mix.hpp's match_classes: matched by name): class ids, index
//   maps and one-hot planes renumbered exactly; a dataset's missing classes have all-zero planes;
//   its ignored pixels take the mix's ignore value (255 up to 255 classes, else 65535). A dataset
//   whose classes are the mix's, in order, and whose ignore value is the mix's is read with no
//   renumbering.
// - Images: the datasets must have one task and one channel count (else the constructor refuses).
//   A batch needs one image size: every dataset of one fixed size, or a crop (out.augment with
//   height and width) no larger than the smallest record, which each dataset's read checks; a mix
//   of several sizes read without a crop is refused, naming each dataset's size, whatever the
//   batch holds. image_u16 of a mix of uint8 and uint16 datasets is refused (two scales in one
//   batch); read float instead.
// - Random crops and flips of dataset k are drawn with seed + k (mod 2^64) and the record's index
//   in its dataset, as Python's shardpack.mix does, so both read the same windows.
// - Per-sample fields (out.fields) are each dataset's own: a mix refuses them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "mix.hpp"
#include "order.hpp"
#include "reader.hpp"

namespace shardpack {

// Scratch of a mixed_dataset's reads: one per thread, as a read_context (which it holds).
class mix_read_context {
public:
    read_context reader;

private:
    friend class mixed_dataset;
    std::vector<std::vector<std::size_t>> local_;  // per dataset: its records in the batch (read-ahead)
    std::vector<augmentation> augment_;            // per dataset: the caller's augmentation, seed + k
    std::vector<std::uint16_t> index_;             // a sample's index map in its dataset's class ids
    std::vector<std::uint8_t> one_hot_;            // a sample's one-hot planes in its dataset's classes
    augmentation whole_;                           // no crop, no flips: reports a record's own size
};

class mixed_dataset {
public:
    // weights: one per dataset (empty: the datasets' sizes, so an epoch reads each record once);
    // options: the epoch (mix_options). names: what messages call the datasets (empty: "dataset k").
    mixed_dataset(std::vector<dataset> datasets, std::vector<double> weights = {}, mix_options options = {},
                  std::vector<std::string> names = {})
        : datasets_(std::move(datasets)), options_(options), names_(std::move(names)) {
        if (datasets_.empty()) throw std::invalid_argument("shardpack mix: no datasets");
        if (names_.empty())
            for (std::size_t k = 0; k < datasets_.size(); ++k) names_.push_back("dataset " + std::to_string(k));
        if (names_.size() != datasets_.size())
            throw std::invalid_argument("shardpack mix: " + std::to_string(names_.size()) + " names for " +
                                        std::to_string(datasets_.size()) + " datasets");
        if (weights.empty())
            for (const dataset& d : datasets_) weights.push_back(static_cast<double>(d.size()));
        if (weights.size() != datasets_.size())
            throw std::invalid_argument("shardpack mix: " + std::to_string(weights.size()) + " weights for " +
                                        std::to_string(datasets_.size()) + " datasets");
        for (std::size_t k = 0; k < datasets_.size(); ++k) {
            mix_source s;
            s.records = datasets_[k].size();
            s.weight = weights[k];
            s.shard_starts = shard_starts_of(datasets_[k]);
            s.block = default_block(datasets_[k]);
            sources_.push_back(std::move(s));
        }
        offsets_ = mix_offsets(sources_);
        counts_ = mix_counts(weights, mix_epoch_size(sources_, options_));  // checks the weights
        for (std::size_t k = 0; k < datasets_.size(); ++k)
            if (counts_[k] && !sources_[k].records)
                throw std::invalid_argument("shardpack mix: " + names_[k] + " has no records but its weight gives it " +
                                            std::to_string(counts_[k]) + " an epoch");
        match_schemas();
    }

    // Opens each folder (dataset::open with `open`) and names it by its folder in messages.
    static mixed_dataset open(const std::vector<std::string>& folders, std::vector<double> weights = {},
                              mix_options options = {}, const open_options& open = {}) {
        std::vector<dataset> opened;
        for (const std::string& f : folders) opened.push_back(dataset::open(f, open));
        return mixed_dataset(std::move(opened), std::move(weights), options, folders);
    }

    // Mixed indices: the sum of the datasets' sizes (dataset k holds [offsets()[k], offsets()[k + 1])).
    std::size_t size() const { return static_cast<std::size_t>(offsets_.back()); }
    const std::vector<dataset>& datasets() const { return datasets_; }
    const std::vector<std::string>& names() const { return names_; }
    const std::vector<std::uint64_t>& offsets() const { return offsets_; }
    // Each dataset's size, weight, shard starts and block (about 4 MiB of its bytes, as Python's
    // shardpack.mix takes by default), for mix_epoch_order and friends.
    const std::vector<mix_source>& sources() const { return sources_; }
    const mix_options& options() const { return options_; }
    std::uint64_t epoch_size() const { return mix_epoch_size(sources_, options_); }
    // Samples of each dataset in every epoch (mix_counts).
    const std::vector<std::uint64_t>& counts() const { return counts_; }
    // The mix's schema: its task, channels, classes (class_count) and ignore value; fixed_height
    // and fixed_width when every dataset has that one size, else 0 (read with a crop); the
    // datasets' label layout when they share one, else index; the largest image_value_bytes.
    const schema_info& schema() const { return schema_; }
    const std::vector<std::string>& class_names() const { return classes_.names; }
    // Dataset k's class ids -> the mix's.
    const std::vector<std::uint32_t>& class_ids(std::size_t k) const { return classes_.ids.at(k); }
    std::pair<std::size_t, std::uint64_t> locate(std::uint64_t g) const { return mix_locate(offsets_, g); }

    // The mixed indices rank `rank` of `world` reads in epoch `epoch` (mix_epoch_order over sources()).
    std::vector<std::uint64_t> epoch_order(std::uint64_t seed, std::uint64_t epoch, std::size_t rank, std::size_t world,
                                           bool drop_last) const {
        return mix_epoch_order(sources_, seed, epoch, rank, world, drop_last, options_);
    }

    // Mixed record g into `out` (dataset::read_into's contract; a record at its own size).
    void read_into(std::size_t g, const sample_buffers& out, mix_read_context& ctx) const {
        check_outputs(out);
        prepare(out, ctx);
        read_slot(g, out, ctx);
    }

    // dataset::read_batch over mixed indices: `count` samples, one after the other in each buffer.
    void read_batch(const std::size_t* indices, std::size_t count, const sample_buffers& out,
                    mix_read_context& ctx) const {
        check_outputs(out);
        const bool cropped = out.augment && out.augment->height;
        if (!cropped && schema_.fixed_height == 0) throw error(sizes_message());
        const std::size_t height = cropped ? out.augment->height : schema_.fixed_height;
        const std::size_t width = cropped ? out.augment->width : schema_.fixed_width;
        prepare(out, ctx);
        if (count > 1) prefetch(indices, count, ctx);
        // Per sample, as dataset::read_batch lays a batch out.
        const std::size_t pixels = height * width;
        const bool seg = schema_.task == task::segmentation;
        const std::size_t image_n = pixels * schema_.channels;
        const std::size_t label_n = seg ? pixels * schema_.class_count : schema_.class_count;
        for (std::size_t j = 0; j < count; ++j) read_slot(indices[j], at_slot(out, j, image_n, label_n, pixels), ctx);
    }

    // Read-ahead of a batch (dataset::prefetch of each dataset's part of it).
    void prefetch(const std::size_t* indices, std::size_t count, mix_read_context& ctx) const {
        ctx.local_.resize(datasets_.size());
        for (auto& l : ctx.local_) l.clear();
        for (std::size_t j = 0; j < count; ++j) {
            const auto [k, r] = checked_locate(indices[j]);
            ctx.local_[k].push_back(static_cast<std::size_t>(r));
        }
        for (std::size_t k = 0; k < datasets_.size(); ++k)
            if (!ctx.local_[k].empty()) datasets_[k].prefetch(ctx.local_[k].data(), ctx.local_[k].size(), ctx.reader);
    }

private:
    std::vector<dataset> datasets_;
    mix_options options_;
    std::vector<std::string> names_;
    std::vector<mix_source> sources_;
    std::vector<std::uint64_t> offsets_, counts_;
    mix_classes classes_;
    schema_info schema_;
    std::vector<bool> same_;                             // dataset k's labels need no renumbering
    std::vector<std::vector<std::uint32_t>> index_map_;  // segmentation: dataset k's index value -> the mix's
    bool mixed_image_bytes_ = false;                     // uint8 and uint16 datasets together

    // round(4 MiB x records / bytes), half to even, at least 1: Python's default block of a mix
    // (formats/orders.md), whatever the reader's cache, so that every rank reads one order.
    static std::size_t default_block(const dataset& d) {
        std::uint64_t bytes = 0;
        for (std::size_t k = 0; k < d.shard_count(); ++k) bytes += d.shard_bytes(k);
        if (d.size() == 0) return 64;
        const double b = std::nearbyint(double(std::uint64_t(4) << 20) * double(d.size()) / double(std::max<std::uint64_t>(1, bytes)));
        return b < 1 ? 1 : static_cast<std::size_t>(b);
    }

    void match_schemas() {
        const schema_info& first = datasets_[0].schema();
        std::vector<std::vector<std::string>> names;
        bool one_size = true, one_layout = true;
        for (std::size_t k = 0; k < datasets_.size(); ++k) {
            const schema_info& s = datasets_[k].schema();
            if (s.task != first.task)
                throw std::invalid_argument("shardpack mix: " + names_[k] + " is of another task than " + names_[0] +
                                            " (segmentation and classification do not mix)");
            if (s.channels != first.channels)
                throw std::invalid_argument("shardpack mix: the datasets' images have different channel counts (" +
                                            names_[0] + ": " + std::to_string(first.channels) + ", " + names_[k] +
                                            ": " + std::to_string(s.channels) + "): a mix needs one");
            one_size = one_size && s.fixed_height && s.fixed_height == first.fixed_height &&
                       s.fixed_width == first.fixed_width;
            one_layout = one_layout && s.layout == first.layout;
            mixed_image_bytes_ = mixed_image_bytes_ || s.image_value_bytes != first.image_value_bytes;
            std::vector<std::string> mine;
            for (const class_info& c : datasets_[k].classes()) mine.push_back(c.name);
            names.push_back(std::move(mine));
        }
        try {
            classes_ = match_classes(names);
        } catch (const std::invalid_argument& e) {  // "dataset k names class ... twice": name the folder
            const std::string what = e.what();
            const std::size_t at = what.find("dataset ");
            const std::size_t k = at == std::string::npos ? 0 : std::stoul(what.substr(at + 8));
            throw std::invalid_argument("shardpack mix: " + names_.at(k) + what.substr(what.find(" names class")));
        }
        const bool seg = first.task == task::segmentation;
        const std::size_t classes = classes_.names.size();
        schema_ = first;
        schema_.class_count = classes;
        schema_.ignore_value = seg ? (classes <= 255 ? 255u : 65535u) : first.ignore_value;
        schema_.fixed_height = one_size ? first.fixed_height : 0;
        schema_.fixed_width = one_size ? first.fixed_width : 0;
        schema_.layout = one_layout ? first.layout : seg ? label_layout::index : label_layout::class_id;
        for (const dataset& d : datasets_)
            if (d.schema().image_value_bytes > schema_.image_value_bytes) schema_.image_value_bytes = d.schema().image_value_bytes;
        for (std::size_t k = 0; k < datasets_.size(); ++k) {
            const schema_info& s = datasets_[k].schema();
            same_.push_back(names[k] == classes_.names && (!seg || s.ignore_value == schema_.ignore_value));
            std::vector<std::uint32_t> map;
            if (seg) {
                map.assign(std::max<std::size_t>(names[k].size(), std::size_t(s.ignore_value) + 1), schema_.ignore_value);
                for (std::size_t j = 0; j < names[k].size(); ++j) map[j] = classes_.ids[k][j];
            }
            index_map_.push_back(std::move(map));
        }
    }

    std::string sizes_message() const {
        std::string sizes;
        for (std::size_t k = 0; k < datasets_.size(); ++k) {
            const schema_info& s = datasets_[k].schema();
            sizes += (k ? ", " : "") + names_[k] + ": " +
                     (s.fixed_height ? std::to_string(s.fixed_width) + "x" + std::to_string(s.fixed_height)
                                     : std::string("records of several sizes"));
        }
        return "shardpack mix: the mixed datasets' images are not all of one size (" + sizes +
               "; width x height); read them with a crop (augmentation height and width) no larger than the smallest";
    }

    void check_outputs(const sample_buffers& out) const {
        if (out.fields)
            throw error("shardpack mix: per-sample fields (sample_buffers::fields) are each dataset's own; a mix "
                        "reads none (read them from datasets()[k])");
        if (out.image_u16 && mixed_image_bytes_)
            throw error("shardpack mix: the mix holds uint8 and uint16 datasets: image_u16 would hold values of two "
                        "scales in one batch; read image_f32 (each scaled to [0, 1])");
        if (out.label_index_u8 && schema_.task == task::segmentation && schema_.class_count > 255)
            throw error("read_into: uint8 label indices need at most 255 classes, the mix has " +
                        std::to_string(schema_.class_count));
    }

    std::pair<std::size_t, std::uint64_t> checked_locate(std::size_t g) const {
        if (g >= size())
            throw error("shardpack mix: index " + std::to_string(g) + " is out of range (" + std::to_string(size()) +
                        " mixed records)");
        return locate(g);
    }

    // Each dataset's augmentation: the caller's, drawn with seed + k.
    void prepare(const sample_buffers& out, mix_read_context& ctx) const {
        if (!out.augment) return;
        ctx.augment_.resize(datasets_.size());
        for (std::size_t k = 0; k < datasets_.size(); ++k) {
            ctx.augment_[k] = *out.augment;
            ctx.augment_[k].seed = out.augment->seed + k;  // wraps mod 2^64, as Python's (seed + k) % 2**64
        }
    }

    // `out` moved on to batch slot j (samples of image_n, label_n and index_n elements).
    static sample_buffers at_slot(const sample_buffers& out, std::size_t j, std::size_t image_n, std::size_t label_n,
                                  std::size_t index_n) {
        if (j == 0) return out;
        sample_buffers s = out;
        const auto left = [](std::size_t capacity, std::size_t used) { return capacity > used ? capacity - used : 0; };
        if (s.image_u8) s.image_u8 += j * image_n;
        if (s.image_u16) s.image_u16 += j * image_n;
        if (s.image_f32) s.image_f32 += j * image_n;
        if (s.label_u8) s.label_u8 += j * label_n;
        if (s.label_f32) s.label_f32 += j * label_n;
        if (s.label_index) s.label_index += j * index_n;
        if (s.label_index_i64) s.label_index_i64 += j * index_n;
        if (s.label_index_u8) s.label_index_u8 += j * index_n;
        if (s.class_id) s.class_id += j;
        if (s.class_id_i64) s.class_id_i64 += j;
        if (s.applied) s.applied += j;
        s.image_capacity = left(out.image_capacity, j * image_n);
        s.label_capacity = left(out.label_capacity, j * label_n);
        s.label_index_capacity = left(out.label_index_capacity, j * index_n);
        s.first_slot = out.first_slot + j;
        return s;
    }

    // Mixed record g into slot 0 of `out`.
    void read_slot(std::size_t g, const sample_buffers& out, mix_read_context& ctx) const {
        const auto [k, r] = checked_locate(g);
        const dataset& d = datasets_[k];
        const std::size_t record = static_cast<std::size_t>(r);
        sample_buffers part = out;
        if (out.augment) part.augment = &ctx.augment_[k];
        if (same_[k]) return d.read_into(record, part, ctx.reader);
        const std::size_t mix_k = schema_.class_count, own_k = d.schema().class_count;
        if (schema_.task == task::classification) {
            if (out.label_index || out.label_index_i64 || out.label_index_u8)
                throw error("read_into: label_index is for segmentation datasets");
            std::int32_t id = -1;
            part.label_u8 = nullptr, part.label_f32 = nullptr, part.class_id_i64 = nullptr;
            part.class_id = &id;
            d.read_into(record, part, ctx.reader);
            const std::uint32_t mixed = classes_.ids[k].at(static_cast<std::size_t>(id));
            if (out.class_id) *out.class_id = static_cast<std::int32_t>(mixed);
            if (out.class_id_i64) *out.class_id_i64 = mixed;
            if (out.label_u8 || out.label_f32) detail::need(out.label_capacity, mix_k, "label");
            if (out.label_u8) {
                std::fill(out.label_u8, out.label_u8 + mix_k, std::uint8_t(0));
                out.label_u8[mixed] = 1;
            }
            if (out.label_f32) {
                std::fill(out.label_f32, out.label_f32 + mix_k, 0.0f);
                out.label_f32[mixed] = 1.0f;
            }
            return;
        }
        // Segmentation: the labels in the dataset's own ids into ctx's scratch, then renumbered.
        const bool want_index = out.label_index || out.label_index_i64 || out.label_index_u8;
        const bool want_one_hot = out.label_u8 || out.label_f32;
        part.label_u8 = nullptr, part.label_f32 = nullptr;
        part.label_index = nullptr, part.label_index_i64 = nullptr, part.label_index_u8 = nullptr;
        // The window's size: the crop's, the dataset's fixed size, or (a record at its own size,
        // read_into of a dataset of several sizes) the record's, which an empty crop reports; the
        // scratch then holds what the caller's buffers can.
        const bool cropped = part.augment && part.augment->height;
        const std::size_t known = cropped ? part.augment->height * part.augment->width
                                          : d.schema().fixed_height * d.schema().fixed_width;
        if (want_index) {
            ctx.index_.resize(known ? known : out.label_index_capacity);
            part.label_index = ctx.index_.data();
            part.label_index_capacity = ctx.index_.size();
        }
        if (want_one_hot) {
            ctx.one_hot_.resize((known ? known : mix_k ? out.label_capacity / mix_k : 0) * own_k);
            part.label_u8 = ctx.one_hot_.data();
            part.label_capacity = ctx.one_hot_.size();
        }
        crop_box box;
        if (!part.augment && !known) part.augment = &ctx.whole_;
        if (part.augment) part.applied = &box;
        d.read_into(record, part, ctx.reader);
        if (out.applied && out.augment) *out.applied = box;
        const std::size_t pixels = part.augment ? std::size_t(box.height) * box.width
                                                : d.schema().fixed_height * d.schema().fixed_width;
        if (want_index) {
            detail::need(out.label_index_capacity, pixels, "label index");
            const std::vector<std::uint32_t>& map = index_map_[k];
            for (std::size_t p = 0; p < pixels; ++p) {
                const std::uint16_t v = ctx.index_[p];
                if (v >= map.size())
                    throw error("shardpack mix: " + names_[k] + ": record " + std::to_string(record) + " holds label value " +
                                std::to_string(v) + ", neither a class id nor the ignore value");
                const std::uint32_t m = map[v];
                if (out.label_index) out.label_index[p] = static_cast<std::uint16_t>(m);
                if (out.label_index_i64) out.label_index_i64[p] = m;
                if (out.label_index_u8) out.label_index_u8[p] = static_cast<std::uint8_t>(m);
            }
        }
        if (want_one_hot) {
            detail::need(out.label_capacity, pixels * mix_k, "label");
            const std::vector<std::uint32_t>& ids = classes_.ids[k];
            const std::uint8_t* src = ctx.one_hot_.data();
            const auto scatter = [&](auto* dst) {
                using T = std::remove_pointer_t<decltype(dst)>;
                std::fill(dst, dst + pixels * mix_k, T(0));
                if (out.channels_first) {  // plane j of the dataset is plane ids[j] of the mix
                    for (std::size_t j = 0; j < own_k; ++j)
                        for (std::size_t p = 0; p < pixels; ++p) dst[ids[j] * pixels + p] = T(src[j * pixels + p]);
                } else {
                    for (std::size_t p = 0; p < pixels; ++p)
                        for (std::size_t j = 0; j < own_k; ++j) dst[p * mix_k + ids[j]] = T(src[p * own_k + j]);
                }
            };
            if (out.label_u8) scatter(out.label_u8);
            if (out.label_f32) scatter(out.label_f32);
        }
    }
};

}  // namespace shardpack
