// shardpack/reader.hpp: the header-only reader for shardpack datasets (format v1, up to 1.6).
//
// USAGE
//     #include <shardpack/reader.hpp>          // link with -lzstd; needs xxhash.h (header only)
//
//     auto ds = shardpack::dataset::open("path/to/dataset");   // a folder with manifest.json
//     for (std::size_t i = 0; i < ds.size(); ++i) {
//         shardpack::sample s = ds.at(i);                       // owns its bytes
//         auto img = s.image();                                 // uint8, shape {height, width, channels}
//         // (uint16 datasets, format 1.4: s.image16(); read_into's image_u16; float is x / 65535)
//         auto lab = s.label();                                 // segmentation: as stored (one-hot or index)
//         std::int32_t cls = s.class_id();                      // classification (-1 for segmentation)
//         std::string_view key = s.key();                       // the source path as the CSV wrote it
//     }
//
//   Training loops read into buffers they own, with no allocation once warm:
//     shardpack::read_context ctx;                              // one per thread
//     std::vector<float> images(batch * H * W * C), labels(batch * H * W * K);
//     shardpack::sample_buffers out;
//     out.image_f32 = images.data(); out.image_capacity = images.size();
//     out.norm = shardpack::normalization::imagenet();           // or the default: x / 255
//     out.label_f32 = labels.data(); out.label_capacity = labels.size();   // one-hot, any stored layout
//     ds.read_batch(indices.data(), batch, out, ctx);
//     out.channels_first = true;   // images C*H*W, one-hot labels K*H*W per sample (NCHW), no extra pass
//     out.label_index_i64 = ids;   // or class ids as int64 (H*W per sample), as PyTorch's losses take them
//     out.label_index_u8 = ids8;   // or as uint8 (at most 255 classes): 1/8 of the bytes
//
//   Random crops and flips at read time, the same for image and label (see augmentation):
//     shardpack::augmentation aug; aug.height = aug.width = 512;
//     aug.position = shardpack::crop_position::random; aug.hflip = shardpack::flip_mode::random;
//     aug.seed = seed; aug.epoch = epoch;  out.augment = &aug;  // buffers sized for 512 x 512
//
//   Distributed training: auto share = ds.rank_share(rank, world);  then read share[k] for k < share.size().
//
// I/O
//   Every byte is read through a storage (the folder) and its byte sources (the shards), see
//   detail/storage.hpp. open_options::io says how:
//     io_mode::mmap   shards are memory-mapped; a raw record is a zero-copy view into the page
//                     cache. Wins when the data is resident.
//     io_mode::pread  one pread per record into the reader's buffers (at() copies); a batch's
//                     ranges are announced to the kernel first (posix_fadvise WILLNEED).
//     io_mode::stream the reader's I/O engine (detail/io_engine.hpp) reads every shard whole,
//                     in file order, in 4 MiB reads, in the background, and serves any order
//                     from what has arrived (a read of bytes not there yet waits for them);
//                     later epochs read from memory: the page cache's for a local folder (the
//                     reader keeps no copy), the engine's own for object storage. Asked for
//                     (dataset::keep_decoded), it also decodes every record as it arrives into
//                     a decoded copy that read_batch copies out of.
//     io_mode::blocks the engine reads the ranges prefetch() and read_batch ask for, sorted by
//                     position, in large reads, into a cache of cache_bytes (LRU).
//     io_mode::automatic (the default) chooses at open: mmap when the shards are in the page
//                     cache (mincore of up to 64 shards), else stream when the dataset fits
//                     open_options::cache_bytes (default: half the available memory), else
//                     blocks, and then preferred_order() is "blocks" and a line is logged once.
//   Why an engine: Linux carries out WILLNEED hints and read-ahead only up to max(read_ahead_kb,
//   the device's largest request) per call, 128 KiB on most disks and NFS, so a cold shuffled
//   epoch through hints or page faults seeks for every record. The engine asks for what it needs
//   itself, ahead, in large sorted reads, whatever read_ahead_kb is. open_options::storage takes
//   any other storage (object storage, ...): it implements shardpack::storage and
//   shardpack::byte_source outside this header, and stream/blocks run the engine over it.
//   A mapped shard truncated under the reader is an error naming it, not a SIGBUS
//   (detail/mapped_guard.hpp), except in a zero-copy view the caller reads later.
//
// MANY SHARDS
//   A dataset of at most open_options::max_open_shards shards (automatic: 4096, or with pread
//   half the open-file limit if lower) opens and checks every shard at open(). A larger one
//   reads the manifest's shard table at open, opens shard 0 (the schema), and opens every other
//   shard when first read, checking it then; at most max_open_shards stay open (least recently
//   used closed first; a shard in use by a read or a sample stays open until released), so the
//   process stays under vm.max_map_count and the open-file limit. A dataset of more than 4096
//   shards (format 1.2) lists them in a binary shard table (24 bytes a shard, spec 13.8) that
//   manifest.json names, instead of a JSON list; the dataset keeps ~50 bytes a shard either way
//   (never the parsed JSON list). Measured with tools/bench_open: see scripts/bench/scaling.md.
//   A storage whose opens cost requests (object storage, storage::opens_shards_lazily) opens
//   shards when first read whatever their number, unless max_open_shards is set; read_batch
//   and prefetch announce a batch's unopened shards together (storage::will_open) first.
//
// LIMITS
//   Images and masks up to 65536 x 65536; records up to 4 GiB decoded; up to 65535 classes;
//   keys up to 64 KiB; manifest.json up to 64 MiB and 2,097,152 JSON values; a shard table up
//   to 4,194,304 shards (128 MiB). Offsets are 64-bit everywhere. Every size and offset read from a file is
//   checked against the mapping and these limits before use.
//
// ERROR MODEL
//   Every failure throws shardpack::error (a std::runtime_error). Messages name the dataset
//   folder, the shard file and the record (its number in the shard and in the dataset). open()
//   checks the manifest, every shard's header, trailer, index and their checksum, so a
//   truncated or half-written dataset is refused at open (with more shards than
//   max_open_shards: shard 0 at open, each other shard at its first read). Records are checked when read: the
//   XXH3-64 of the stored bytes (unless open_options::verify_checksums is false), the
//   decompressed size (first against what the zstd frame's block headers can hold, before any
//   allocation, then exactly), and the record's own header against the schema. A reader never
//   returns bytes from a damaged record.
//
// THREAD SAFETY
//   A dataset is immutable after open(); all its const members may be called from any number
//   of threads at once (lazily opened shards: a shard is opened by one thread while the others
//   that need it wait; opening runs outside the cache's lock). at() keeps one zstd context per thread (thread_local). A read_context
//   belongs to one thread at a time; use one per thread.
//
// LIFETIMES
//   A dataset is a cheap handle (copies share the open shards). The shards stay mapped while
//   any copy of the dataset, or any sample from it, is alive. A sample from at() owns its
//   decoded bytes (raw records point into the mapping). A sample from read(i, ctx) borrows the
//   context's buffer: it is valid until the next read with that context. Views (tensor_view,
//   key()) are valid while the sample they came from is; taking a view from a temporary sample
//   (auto img = ds.at(i).image();) does not compile, and a temporary's key() is a std::string.
//
// REBUILDS
//   A rebuild replaces manifest.json atomically and keeps the shards of the manifest it
//   replaced until the next build, so a reader that read the previous manifest still opens its
//   shards. An open shard (mapped, or an open file with pread) stays readable after a rebuild
//   removes its name; if opening fails and manifest.json was replaced meanwhile, open() reads
//   the new manifest and tries again (up to 8 attempts, each one after a replaced manifest).
//   With more shards than max_open_shards, a shard first opened (or reopened after being
//   closed) after two rebuilds may be gone: the read then fails with a message that says the
//   manifest was replaced and to open the dataset again.
//
// FORMAT
//   formats/shardpack-v1.md describes every byte. This reader accepts major version 1, any
//   minor version, skips optional sections it does not know and refuses unknown required
//   sections and feature bits. It reads a manifest's shard list (1.0, 1.1) or its binary shard
//   table (1.2), checking the table's size and XXH3-64 against the manifest before using it.
//
// SOURCE
//   This file holds the documentation and every public declaration; include only it. The
//   bodies and internal classes are in detail/: dataset_state.hpp and shard_cache.hpp (what a
//   dataset handle shares, the open shards), dataset_open.hpp (open, its checks and retry),
//   record_read.hpp (load, at, read_into, read_batch, prefetch), convert.hpp (stored bytes into
//   sample_buffers), augment.hpp (crops and flips), and, shared with the writer, format.hpp,
//   shard_file.hpp, shard_table.hpp, band_frames.hpp and storage.hpp.
#pragma once
#include <zstd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "detail/error.hpp"
#include "detail/format.hpp"
#include "detail/json.hpp"
#include "detail/shard_file.hpp"
#include "detail/storage.hpp"

namespace shardpack {

inline constexpr const char* manifest_file_name = "manifest.json";

enum class task { segmentation, classification };
enum class label_layout { one_hot, index, class_id };
enum class channel_order { gray, rgb, rgba, bands };  // bands: 1-255 channels as the source stored them (format 1.4)
// How dataset::rank_share splits the records among the ranks of distributed training.
enum class rank_share_policy {
    pad,     // every rank gets ceil(n / world) indices; the last ranks wrap around to index 0
    drop,    // every rank gets floor(n / world) indices; the last n % world records are unused
    uneven,  // contiguous blocks; the first n % world ranks get one index more
};
// The former name ("partition" now means only the parts of `shardpack build --partition`).
using partition_policy = rank_share_policy;

struct class_info {
    std::string name;
    bool has_color = false;
    std::uint8_t r = 0, g = 0, b = 0;
};

struct schema_info {
    shardpack::task task = task::segmentation;
    channel_order order = channel_order::rgb;
    std::size_t channels = 3;
    std::size_t image_value_bytes = 1;  // 1: uint8 images; 2: uint16 images (format 1.4)
    label_layout layout = label_layout::one_hot;
    std::size_t label_value_bytes = 1;  // index layout: 1 (uint8) or 2 (uint16)
    std::size_t fixed_height = 0;       // 0 when records differ in size
    std::size_t fixed_width = 0;
    std::size_t class_count = 0;
    std::uint32_t ignore_value = 255;   // index value of ignored pixels; all-zero in one-hot
};

struct open_options {
    bool verify_checksums = true;  // XXH3-64 of every record's stored bytes, at every read
    // How shards are read: io_mode::automatic (the default), mmap, pread, stream or blocks (see
    // "I/O" above). With a `storage` set, mmap and pread mean "as the storage reads".
    io_mode io = io_mode::automatic;
    // The I/O engine's cache (stream, blocks), in bytes; 0: automatic, half the memory
    // available at open. io_mode::automatic streams a dataset no larger than this.
    std::uint64_t cache_bytes = 0;
    // The engine's I/O threads; 0: automatic (1 for a local folder: one disk head, whose
    // requests a second thread would interleave; 4 for remote storage, where requests wait
    // on the network, not on a head).
    unsigned io_threads = 0;
    // Where open() says what it chose when that is not what a user would guess (the blocks
    // order for a dataset larger than cache_bytes). Null: one line on stderr, once a process.
    std::function<void(const std::string&)> log;
    // Where the dataset is: null for the local folder given to open(); or any implementation
    // of shardpack::storage (detail/storage.hpp), such as an object-storage client. The
    // folder argument of open() then only names the dataset in messages.
    std::shared_ptr<const shardpack::storage> storage;
    // At most this many shards open (mapped, or with a descriptor) at once; 0: automatic (see
    // "MANY SHARDS" above). A dataset of no more shards than this opens and checks every shard
    // at open(); a larger one opens shards when first read and closes the least recently used.
    std::size_t max_open_shards = 0;
    // max_open_shards value that opens (and maps) every shard at open(), for tools that hold
    // on to shard bytes (merge, incremental builds).
    static constexpr std::size_t all_shards = ~std::size_t(0);
};

// A read-only view of a dense row-major tensor of rank 3 (HWC).
template <class T>
class tensor_view {
public:
    tensor_view() = default;
    tensor_view(const T* data, std::array<std::size_t, 3> shape) : data_(data), shape_(shape) {}
    const T* data() const { return data_; }
    const std::array<std::size_t, 3>& shape() const { return shape_; }
    std::size_t size() const { return shape_[0] * shape_[1] * shape_[2]; }
    std::size_t bytes() const { return size() * sizeof(T); }
    const T& operator[](std::size_t i) const { return data_[i]; }
    const T* begin() const { return data_; }
    const T* end() const { return data_ + size(); }

private:
    const T* data_ = nullptr;
    std::array<std::size_t, 3> shape_{0, 0, 0};
};

// Per-channel normalisation for float output: value = (u8 / 255 - mean[c]) / stddev[c], or
// (u16 / 65535 - mean[c]) / stddev[c] for uint16 images. Images of more than 4 channels take one
// mean and stddev for all: mean[0..3] and stddev[0..3] must then be equal (read_into refuses others).
struct normalization {
    float mean[4] = {0, 0, 0, 0};
    float stddev[4] = {1, 1, 1, 1};
    static normalization unit() { return {}; }  // [0, 1]
    static normalization imagenet() {
        normalization n;
        const float m[3] = {0.485f, 0.456f, 0.406f}, s[3] = {0.229f, 0.224f, 0.225f};
        for (int c = 0; c < 3; ++c) { n.mean[c] = m[c]; n.stddev[c] = s[c]; }
        return n;
    }
};

// Crops and flips at read time (read_into / read_batch): an output window of height x width
// pixels taken from each decoded record, then flipped, the same for the image and the label,
// before any conversion. A crop of a band-frame record (format 1.1) decompresses only the bands
// its rows lie in.
enum class crop_position {
    center,  // offset (H - height) / 2, (W - width) / 2, rounded down
    random,  // uniform over every valid offset, from (seed, epoch, record index) alone
    given,   // augmentation::given[slot].y and .x, per sample of the batch
    // Centred on one labelled pixel (clamped into the record): a pixel drawn uniformly among the
    // record's pixels of a class not in augmentation::background (ignored pixels never count),
    // from (seed, epoch, record index) alone. Segmentation only; reads the record's whole label
    // before its window. A record with no such pixel gets a uniform (random) window, and
    // crop_box::fallback says so.
    foreground,
};
enum class flip_mode {
    none,
    random,  // with the probability below, from (seed, epoch, record index) alone
    given,   // augmentation::given[slot].hflip / .vflip
};

// The window a sample got: rows [y, y + height), columns [x, x + width) of the record, then
// mirrored left-right (hflip) and/or top-bottom (vflip).
struct crop_box {
    std::uint32_t y = 0, x = 0, height = 0, width = 0;
    bool hflip = false, vflip = false;
    bool fallback = false;  // crop_position::foreground on a record with no foreground: a uniform window
};

struct augmentation {
    std::size_t height = 0, width = 0;  // output size; 0 and 0: the record's own size (flips only)
    crop_position position = crop_position::center;
    flip_mode hflip = flip_mode::none, vflip = flip_mode::none;
    float hflip_probability = 0.5f, vflip_probability = 0.5f;
    const crop_box* given = nullptr;  // one per sample of the batch, for crop_position::given / flip_mode::given
    std::uint64_t seed = 0, epoch = 0;
    // crop_position::foreground: the class ids that are not foreground (by default class 0).
    std::vector<std::uint32_t> background = {0};
};

class sample;

// The window and flips a record of `record_height` x `record_width` gets under `a`: a pure function
// of a, the record's dataset index and (for given boxes) the batch slot, so the same for any
// thread count, worker count and order of reads. Random draws: r_j = splitmix64(h + j) for
// h = splitmix64(seed ^ splitmix64(epoch ^ splitmix64(index))); y = r_1 mod (H - height + 1),
// x = r_2 mod (W - width + 1), hflip = (r_3 >> 40) < p * 2^24, vflip likewise with r_4.
// crop_position::foreground: the (r_5 mod F)-th foreground pixel in row-major order, of the
// record's F; the window's top-left is (py - height / 2, px - width / 2), clamped into the
// record. It needs the record's label: this form throws for it; use the next one.
crop_box plan_augmentation(const augmentation& a, std::size_t index, std::size_t record_height, std::size_t record_width,
                           std::size_t slot = 0);
// The same for a decoded record (dataset::at or read), any crop_position.
crop_box plan_augmentation(const augmentation& a, const sample& record, std::size_t slot = 0);

// Per-sample fields (format 1.5) of a batch, for read_batch / read_into (sample_buffers::fields).
// Values are variable-length (lists, boxes), so they come per slot in the reader's own vectors,
// boxes already moved, clipped and flipped with the slot's window (spec 10.4.1).
struct field_batch {
    std::vector<std::size_t> fields;  // the declared fields to read (dataset::field_index); empty: all
    double min_box_visibility = 0.0;  // keep a box when at least this fraction of its area is in the window
    // [slot][declared field]: fields not asked for stay empty. Sized by read_batch for a whole
    // batch; a caller splitting a batch over threads (sample_buffers::slice) sizes it first.
    std::vector<std::vector<field_value>> slots;
};

// Buffers a caller owns, for read_into / read_batch. Set the pointers you want filled; leave the
// others null. Capacities count elements (not bytes) and are checked. For a batch they hold the
// whole batch, sample after sample, all of one size: the dataset's fixed size (built with
// --size), the crop's, or, for a dataset whose records vary, batch_height x batch_width.
struct sample_buffers {
    std::uint8_t* image_u8 = nullptr;    // H*W*C, as stored (uint8 images only: a uint16 dataset is refused)
    std::uint16_t* image_u16 = nullptr;  // H*W*C: uint16 images as stored; uint8 images' values, widened
    float* image_f32 = nullptr;          // H*W*C, normalised with `norm`
    std::size_t image_capacity = 0;
    normalization norm;
    std::uint8_t* label_u8 = nullptr;    // one-hot 0/1: H*W*K (segmentation) or K (classification)
    float* label_f32 = nullptr;          // the same, as 0.0/1.0
    std::size_t label_capacity = 0;
    std::uint16_t* label_index = nullptr;  // segmentation: H*W class ids, ignore_value where ignored
    std::int64_t* label_index_i64 = nullptr;  // the same as int64 (PyTorch's class-index targets)
    std::uint8_t* label_index_u8 = nullptr;   // the same as uint8: datasets of at most 255 classes
    std::size_t label_index_capacity = 0;     // for label_index, label_index_i64 and label_index_u8
    std::int32_t* class_id = nullptr;    // one per sample (-1 for segmentation)
    std::int64_t* class_id_i64 = nullptr;  // the same as int64
    // Channels first: images C*H*W and one-hot labels K*H*W per sample (NCHW batches), written
    // directly in that order, with no second pass. Index maps and class ids do not change.
    bool channels_first = false;
    // Crops and flips (see augmentation); null: the whole record as stored. With a crop the
    // sizes above count the output window (height x width), not the record.
    const augmentation* augment = nullptr;
    crop_box* applied = nullptr;  // optional, one per sample: the window and flips each sample got
    field_batch* fields = nullptr;  // optional: per-sample fields (format 1.5), see field_batch
    // The batch slot of this buffer's first sample: augment->given is looked up at first_slot +
    // slot (0 for a whole batch; a slice's begin).
    std::size_t first_slot = 0;
    // Without a crop, the size every record of a batch must have; a record of another size is
    // an error naming it (a batch never holds samples of two sizes). 0 x 0: the dataset's fixed
    // size, or, when its records vary, the size of the batch's first record (dataset::record_size),
    // so a dataset whose records all share one size batches whether or not it was built with
    // --size. A caller that splits such a batch over threads (slice) sets it for the whole batch.
    std::size_t batch_height = 0, batch_width = 0;

    // Samples [begin, begin + count) of a batch of `batch` samples laid out in these buffers,
    // for one thread of a batch split among several: every pointer moved on by `begin` samples,
    // every capacity `count` samples' worth (each capacity / batch per sample), `applied` and
    // `first_slot` moved on with them.
    sample_buffers slice(std::size_t begin, std::size_t count, std::size_t batch) const;
};

}  // namespace shardpack

// The state dataset handles share (it uses schema_info and class_info above).
#include "detail/dataset_state.hpp"

namespace shardpack::detail {
struct band_table;  // detail/band_frames.hpp
}

namespace shardpack {

// Scratch for reads that allocate nothing once warm: a zstd context and a growing buffer.
class read_context {
public:
    read_context() : dctx_(ZSTD_createDCtx()) {
        if (!dctx_) throw error("cannot create a zstd decompression context");
    }
    // Reserve room for records of up to `bytes` decoded bytes, so that no read allocates.
    void reserve(std::size_t bytes) { buffer_.reserve(bytes); }

private:
    friend class dataset;
    std::unique_ptr<ZSTD_DCtx, detail::dctx_deleter> dctx_;
    std::vector<unsigned char> buffer_;
    std::vector<unsigned char> stored_;  // a record's stored bytes, when its shard is not mapped
    std::vector<byte_range> ranges_;     // a batch's byte ranges, for read-ahead
    detail::shard_pin pin_;              // keeps the last read's shard open (its sample may point into it)
    std::vector<unsigned char> window_;  // a cropped, flipped record for augmented reads
    std::vector<unsigned char> band_;    // one band's decompressed rows, converted before the next
};

// One decoded record. See LIFETIMES above.
class sample {
public:
    std::size_t index() const { return index_; }
    std::string_view key() const& { return {reinterpret_cast<const char*>(rec_ + detail::record_header_size), layout_.key_length}; }
    std::size_t height() const { return layout_.height; }
    std::size_t width() const { return layout_.width; }
    // The image as stored, {H, W, C} of uint8. A uint16 image is read with image16().
    tensor_view<std::uint8_t> image() const& {
        if (state_->schema.image_dtype_bytes != 1)
            throw error("image(): this dataset stores uint16 images; use image16()");
        return {rec_ + layout_.image_offset, {layout_.height, layout_.width, std::size_t(state_->schema.channels)}};
    }
    // A uint16 image {H, W, C} (format 1.4). Little-endian on disk; this view needs a
    // little-endian host (read_into with image_u16 works on any host).
    tensor_view<std::uint16_t> image16() const& {
        if (state_->schema.image_dtype_bytes != 2)
            throw error("image16(): this dataset stores uint8 images; use image()");
        return {reinterpret_cast<const std::uint16_t*>(rec_ + layout_.image_offset),
                {layout_.height, layout_.width, std::size_t(state_->schema.channels)}};
    }
    // Segmentation labels as stored: one-hot {H, W, K}, or an index map {H, W, 1} of uint8.
    // A uint16 index map is read with label_index16(). Classification: empty (see class_id()).
    tensor_view<std::uint8_t> label() const& {
        const auto& s = state_->schema;
        if (s.label_layout == detail::layout_code::one_hot)
            return {rec_ + layout_.label_offset, {layout_.height, layout_.width, std::size_t(s.class_count)}};
        if (s.label_layout == detail::layout_code::index && s.label_dtype_bytes == 1)
            return {rec_ + layout_.label_offset, {layout_.height, layout_.width, 1}};
        if (s.label_layout == detail::layout_code::index)
            throw error("label(): this dataset stores uint16 index maps; use label_index16()");
        return {};
    }
    // A uint16 index map {H, W, 1}; its values are class ids or ignore_value. Little-endian
    // on disk; this view needs a little-endian host (read_into works on any host).
    tensor_view<std::uint16_t> label_index16() const& {
        const auto& s = state_->schema;
        if (s.label_layout != detail::layout_code::index || s.label_dtype_bytes != 2)
            throw error("label_index16(): this dataset does not store uint16 index maps");
        return {reinterpret_cast<const std::uint16_t*>(rec_ + layout_.label_offset), {layout_.height, layout_.width, 1}};
    }
    // A view from a temporary (ds.at(i).image()) would dangle at the end of the statement: name
    // the sample first (auto s = ds.at(i); s.image()). The key of a temporary comes as a copy.
    std::string key() const&& { return std::string(static_cast<const sample&>(*this).key()); }
    tensor_view<std::uint8_t> image() const&& = delete;
    tensor_view<std::uint16_t> image16() const&& = delete;
    tensor_view<std::uint8_t> label() const&& = delete;
    tensor_view<std::uint16_t> label_index16() const&& = delete;
    std::int32_t class_id() const { return layout_.class_id; }
    // Per-sample fields (format 1.5), one per declared field, boxes in the record's pixels.
    std::vector<field_value> fields() const;
    // The one-hot label whatever the stored layout: {H, W, K} for segmentation, {1, 1, K} for
    // classification. Allocates; training loops use dataset::read_into instead.
    std::vector<std::uint8_t> one_hot() const;

private:
    friend class dataset;
    friend crop_box plan_augmentation(const augmentation& a, const sample& record, std::size_t slot);
    std::shared_ptr<const detail::dataset_state> state_;
    std::shared_ptr<const void> keep_;  // owns the bytes, or null when they belong to a read_context
    const unsigned char* rec_ = nullptr;
    detail::record_layout layout_;
    std::size_t index_ = 0;
};

// A rank's share of the dataset: contiguous indices in dataset order; see rank_share_policy.
class rank_share {
public:
    rank_share(std::size_t begin, std::size_t count, std::size_t total) : begin_(begin), count_(count), total_(total) {}
    std::size_t size() const { return count_; }
    std::size_t operator[](std::size_t k) const { return (begin_ + k) % total_; }

private:
    std::size_t begin_, count_, total_;
};
// The former name of rank_share. A class, not an alias: GCC's -Wshadow reports every variable
// named `partition` in a user's code (a manifest member is one) as shadowing an alias.
class partition : public rank_share {
public:
    using rank_share::rank_share;
    partition(const rank_share& share) : rank_share(share) {}  // implicit: ds.partition(...) gives a rank_share
};

// One shard of a dataset, kept open while this handle lives (see dataset::shard).
class shard_ref {
public:
    explicit shard_ref(std::shared_ptr<const detail::shard_file> f) : f_(std::move(f)) {}
    const detail::shard_file& operator*() const { return *f_; }
    const detail::shard_file* operator->() const { return f_.get(); }
    const std::string& name() const { return f_->name(); }
    const detail::shard_header& header() const { return f_->header(); }
    const detail::schema_record& schema() const { return f_->schema(); }
    const std::vector<detail::class_record>& classes() const { return f_->classes(); }
    const std::string& schema_bytes() const { return f_->schema_bytes(); }
    std::size_t record_count() const { return f_->record_count(); }
    detail::index_entry entry(std::size_t i) const { return f_->entry(i); }
    // The whole file when mapped (io_mode::mmap), else null.
    const unsigned char* bytes() const { return f_->bytes(); }
    std::size_t size() const { return f_->size(); }
    const std::shared_ptr<byte_source>& source() const { return f_->source(); }
    std::uint64_t index_offset() const { return f_->index_offset(); }

private:
    std::shared_ptr<const detail::shard_file> f_;
};

class dataset {
public:
    static dataset open(const std::string& folder, const open_options& options = {});
    // open() of a manifest.json the caller has read and parsed already (the packer's merge,
    // which checks each part's manifest before it opens the part's shards): the same checks,
    // no second read or parse, and no retry, so the shards opened are the ones it names.
    static dataset open_from_manifest(const std::string& folder, detail::json manifest, const open_options& options = {});

    std::size_t size() const { return static_cast<std::size_t>(s_->first_record.back()); }
    const schema_info& schema() const { return s_->info; }
    const std::vector<class_info>& classes() const { return s_->classes; }
    // The parsed manifest.json (build options, versions, hashes), without its "shards" list:
    // the shard accessors below answer from the dataset's compact shard table.
    const detail::json& manifest() const { return s_->manifest; }
    // The binary shard table's file name (format 1.2), or "" when manifest.json lists the shards.
    std::string shard_table_file() const {
        const detail::json* t = s_->manifest.find("shard_table");
        return t ? t->at("file").as_string() : std::string();
    }
    const std::string& content_hash() const { return s_->manifest.at("content_hash").as_string(); }
    std::size_t shard_count() const { return s_->shard_count(); }
    // Shard k, opened now if it is not open; it stays open while the handle lives.
    shard_ref shard(std::size_t k) const;
    // From the manifest's shard table, without opening the shard:
    std::string shard_name(std::size_t k) const { return s_->name(checked_shard(k)); }
    std::uint64_t shard_first_record(std::size_t k) const { return s_->first_record[checked_shard(k)]; }
    std::uint64_t shard_records(std::size_t k) const {
        return s_->first_record[checked_shard(k) + 1] - s_->first_record[k];
    }
    std::uint64_t shard_bytes(std::size_t k) const { return s_->shard_bytes[checked_shard(k)]; }
    // The whole-file XXH3-64 listed for shard k (readers do not check it; verify does). False
    // when the manifest's entry has no "xxh3" of 16 hex digits; `why` then says what is wrong.
    bool listed_shard_hash(std::size_t k, std::uint64_t& hash, std::string* why = nullptr) const {
        const std::size_t j = checked_shard(k);
        const unsigned char problem = s_->shard_hash_problem.empty() ? 0 : s_->shard_hash_problem[j];
        if (why)
            *why = problem == 1 ? "no \"xxh3\" member" : problem == 2 ? "\"xxh3\" is not a string"
                 : problem == 3 ? "\"xxh3\" is not 16 lowercase hex digits" : "";
        hash = s_->shard_hash[j];
        return problem == 0;
    }
    // How many shards are open now, and at most (open_options::max_open_shards, resolved).
    std::size_t open_shard_count() const { return s_->shards.open_count(); }
    std::size_t max_open_shards() const { return s_->shards.limit(); }
    // How this dataset's shards are read: open_options::io, or what io_mode::automatic chose.
    io_mode io() const { return s_->io; }
    // The epoch order that suits io(): "blocks" when the engine reads blocks (the dataset is
    // larger than its cache and not in memory: a global shuffle would seek for every record),
    // else "global". order.hpp's and Python's order "auto" take it.
    const char* preferred_order() const { return s_->io == io_mode::blocks ? "blocks" : "global"; }
    // The blocks order's parameters for this dataset (order.hpp's order_options::block and
    // ::window; records per block and blocks per window): blocks of about 4 MiB of records and
    // windows of 16 blocks; with the I/O engine, fewer blocks a window (and, below 2, smaller
    // blocks) so that three windows fit cache_bytes(): a window read ahead stays cached until its
    // records are read, and the next one fits beside it. Each rank of a job must have the same
    // cache_bytes() where it is this small (under 192 MiB), or the ranks' orders differ.
    struct blocks_layout_t {
        std::size_t block;
        std::size_t window;
    };
    blocks_layout_t blocks_layout() const;
    // Call at the start of each epoch (the Python adapters do). With io stream over a local
    // folder, where the page cache no longer holds the dataset (under 90% of a sample of up to 64
    // shards, mincore: ~10 us a shard), reads it again, whole, in file order, ahead of the
    // epoch, instead of record by record at the kernel's read-ahead; true then. With io blocks,
    // the blocks read for the last epoch are read again when the new one wants them (the page
    // cache may have dropped them). Else nothing.
    bool begin_epoch() const;
    // Asks for the decoded copy (detail/decoded_copy.hpp), for a reader that reads every record
    // each epoch: with io stream, one thread
    // decodes every record into this process's memory as the stream brings it in (from the
    // first read on), and read_batch copies out of it; once complete, begin_epoch streams
    // nothing again. Kept only where the dataset is streamed, every shard is open (not lazily)
    // and its stored and decoded bytes together fit cache_bytes(). Returns whether it is kept.
    bool keep_decoded() const;
    // The records' decoded bytes, summed: what the decoded copy takes (against the shards' bytes,
    // whether a copy saves any decoding; raw records decode to their stored size). 0 where the
    // shards are opened lazily (not known before each is read).
    std::uint64_t decoded_bytes() const;
    // Records in the decoded copy so far (0 without it).
    std::size_t decoded_count() const {
        const detail::decoded_copy* copy = s_->decoded.load(std::memory_order_acquire);
        return copy ? copy->count() : 0;
    }
    // The I/O engine's cache size (0 without the engine) and its counters (all zero without it).
    std::uint64_t cache_bytes() const { return s_->engine ? s_->engine->config().cache_bytes : 0; }
    detail::io_engine::counters io_counters() const { return s_->engine ? s_->engine->stats() : detail::io_engine::counters{}; }

    // O(1) random access; the sample owns its bytes (or, for a raw record of a mapped shard,
    // keeps the mapping alive and points into it). Thread-safe.
    sample at(std::size_t i) const;
    // Whether at(i) is a zero-copy view into the storage's mapping (a raw record of a mapped
    // shard) rather than a copy.
    bool zero_copy(std::size_t i) const;
    // Decodes into ctx's buffer; the sample is valid until the next read with ctx.
    sample read(std::size_t i, read_context& ctx) const;
    // Fills the caller's buffers (see sample_buffers); allocates nothing once ctx is warm.
    void read_into(std::size_t i, const sample_buffers& out, read_context& ctx) const;
    // read_into for `count` samples, laid out one after the other in each buffer, all of one
    // size (see sample_buffers::batch_height).
    void read_batch(const std::size_t* indices, std::size_t count, const sample_buffers& out, read_context& ctx) const;
    // Read-ahead: tells the storage that these records will be read soon (the next batch), so
    // that a cold disk or a remote store fetches their byte ranges, merged per shard, while the
    // current batch decodes. read_batch does this for its own batch first. A hint: returns at
    // once and reads nothing itself.
    void prefetch(const std::size_t* indices, std::size_t count) const;
    void prefetch(const std::size_t* indices, std::size_t count, read_context& ctx) const;

    // Record i's (height, width), from its header only (a compressed record is decompressed only
    // as far as its header; the stored bytes are checksummed as every read does).
    std::pair<std::size_t, std::size_t> record_size(std::size_t i, read_context& ctx) const;

    // Per-sample fields (format 1.5, `shardpack build --field`): the declarations (empty when
    // the dataset has none), a field's position by name, and record i's values (one per
    // declaration; boxes in the record's pixels). read_fields reads only the record's prefix;
    // with `window`, boxes are moved, clipped and flipped as the window's pixels (spec 10.4.1:
    // kept when at least min_box_visibility of a box's area is inside). `want`: per declared
    // field whether to decode it (null: all). Returns the record's (height, width).
    const std::vector<field_info>& fields() const { return s_->schema.fields; }
    std::size_t field_index(const std::string& name) const;
    std::vector<field_value> fields(std::size_t i) const;
    std::pair<std::size_t, std::size_t> read_fields(std::size_t i, std::vector<field_value>& out, read_context& ctx,
                                                    const crop_box* window = nullptr, double min_box_visibility = 0.0,
                                                    const std::vector<bool>* want = nullptr) const;

    // Rank `rank`'s share of the records when `world` ranks read the dataset (contiguous; the
    // Python package's epoch_order strides instead, see its docs).
    shardpack::rank_share rank_share(std::size_t rank, std::size_t world,
                                     rank_share_policy policy = rank_share_policy::pad) const;
    // The former name of rank_share.
    shardpack::rank_share partition(std::size_t rank, std::size_t world,
                                    rank_share_policy policy = rank_share_policy::pad) const {
        return rank_share(rank, world, policy);
    }

    // `options` with its storage set, as open() sets it: options.storage when given, else the
    // s3 opener's for an s3:// URL, else the local folder (what `shardpack verify` lists).
    static open_options with_storage(const std::string& folder, const open_options& options);

private:
    friend class sample;
    std::shared_ptr<const detail::dataset_state> s_;

    // `manifest_version`: storage::version_of(manifest.json) before this attempt.
    static dataset open_once(const std::string& folder, const open_options& options, const std::string& manifest_version);
    // The rest of open_once, from the parsed manifest.
    static dataset open_parsed(const std::string& folder, const open_options& options, const std::string& manifest_version,
                               detail::json manifest);
    static std::size_t resolve_max_open_shards(const open_options& options);
    static void plan_io(const std::string& folder, const open_options& options, detail::dataset_state& st);
    static void open_shards(const open_options& options, detail::dataset_state& st);
    std::size_t checked_shard(std::size_t k) const {
        if (k >= s_->shard_count())
            throw error(s_->path + ": shard " + std::to_string(k) + " is out of range (" +
                        std::to_string(s_->shard_count()) + " shards)");
        return k;
    }

    void locate(std::size_t i, std::size_t& shard, std::size_t& local) const {
        if (i >= size())
            throw error(s_->path + ": index " + std::to_string(i) + " is out of range (" + std::to_string(size()) + " records)");
        const auto& f = s_->first_record;
        shard = static_cast<std::size_t>(std::upper_bound(f.begin(), f.end(), std::uint64_t(i)) - f.begin() - 1);
        local = static_cast<std::size_t>(i - f[shard]);
    }
    // Finds, checks and (if compressed) decompresses record i. Returns the decoded bytes: in the
    // mapping for raw records, else in `buffer`.
    // `stored` holds the stored bytes of a record whose shard is not mapped.
    // `pinned` keeps the record's shard open while the result is used.
    const unsigned char* load(std::size_t i, ZSTD_DCtx* dctx, std::vector<unsigned char>& buffer,
                              std::vector<unsigned char>& stored, detail::record_layout& layout,
                              detail::shard_pin& pinned) const;
    static void fill(const sample& s, const sample_buffers& out, std::size_t slot);
    // read_into for batch slot `slot`: band-frame records decompress straight into the caller's
    // buffers where the layout allows, and augmented reads only the bands their window needs.
    void read_slot(std::size_t i, const sample_buffers& out, read_context& ctx, std::size_t slot) const;
    void read_slot_fields(std::size_t i, const sample_buffers& out, read_context& ctx, std::size_t slot) const;
    // Refuses record (k, local) of `layout` when it is not out's batch_height x batch_width.
    void check_batch_size(const sample_buffers& out, const detail::record_layout& layout, std::size_t k,
                          std::size_t local) const;
    std::pair<std::size_t, std::size_t> read_fields_pinned(const detail::shard_file& shard, std::size_t k, std::size_t local,
                                                           std::vector<field_value>& out, read_context& ctx,
                                                           const crop_box* window, double min_box_visibility,
                                                           const std::vector<bool>* want) const;
    // The bodies of load and read_slot, for shard k, pinned (and, when mapped, guarded against
    // a file truncated under the mapping: detail/mapped_guard.hpp).
    const unsigned char* load_pinned(const detail::shard_file& shard, std::size_t k, std::size_t local, ZSTD_DCtx* dctx,
                                     std::vector<unsigned char>& buffer, std::vector<unsigned char>& stored,
                                     detail::record_layout& layout) const;
    void read_slot_pinned(std::size_t i, std::size_t k, std::size_t local, const detail::shard_file& shard,
                          const sample_buffers& out, read_context& ctx, std::size_t slot) const;
    // A whole decoded record (a non-band record read, or the decoded copy's) into the caller's
    // buffers, cropped and flipped as out.augment says.
    void fill_decoded(const sample& full, std::size_t k, std::size_t local, const sample_buffers& out, read_context& ctx,
                      std::size_t slot) const;
    // The decoded copy's thread: every record in file order, each as soon as its bytes arrive.
    void decode_ahead(detail::decoded_copy& copy, const std::atomic<bool>& stop) const;
    void start_decoding(detail::decoded_copy& copy) const;
    // Parts of read_slot_pinned for band-frame records (spec 8): the bands a read-time crop
    // needs (returns its window), and a whole record into the caller's buffers.
    crop_box decompress_window(std::size_t i, std::size_t k, std::size_t local, const augmentation& aug,
                               std::size_t batch_slot, const detail::record_layout& layout,
                               const detail::band_table& bands, read_context& ctx) const;
    void fill_banded(std::size_t k, std::size_t local, const detail::record_layout& layout,
                     const detail::band_table& bands, const sample_buffers& out, read_context& ctx,
                     std::size_t slot) const;
    // The window `b` of `full`, flipped, as a compact record in ctx's window buffer.
    sample window(const sample& full, const crop_box& b, read_context& ctx) const;
};

}  // namespace shardpack

// Implementation: the bodies of the members declared above, and the helpers only they use.
#include "detail/dataset_open.hpp"  // open(), its checks and retry; shard(), rank_share()
#include "detail/convert.hpp"       // stored bytes -> sample_buffers (uint8, float, one-hot, class ids)
#include "detail/augment.hpp"       // plan_augmentation, dataset::window
#include "detail/record_read.hpp"   // load, at, read, read_into, read_batch, prefetch
#include "detail/field_read.hpp"    // per-sample fields (1.5)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shardpack::sample::label_index16 and raw-record views assume a little-endian host"
#endif
