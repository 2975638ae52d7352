// shardpack/reader.hpp: the header-only reader for shardpack datasets (format v1, up to 1.2).
//
// USAGE
//     #include <shardpack/reader.hpp>          // link with -lzstd; needs xxhash.h (header only)
//
//     auto ds = shardpack::dataset::open("path/to/dataset");   // a folder with manifest.json
//     for (std::size_t i = 0; i < ds.size(); ++i) {
//         shardpack::sample s = ds.at(i);                       // owns its bytes
//         auto img = s.image();                                 // uint8, shape {height, width, channels}
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
//   detail/storage.hpp. Locally, open_options::io picks how:
//     io_mode::mmap   shards are memory-mapped (MADV_RANDOM: no read-around of each record);
//                     a raw record is a zero-copy view into the page cache;
//     io_mode::pread  records are read with one pread each into the reader's buffers (at()
//                     copies); the file stays open;
//     io_mode::automatic (the default): mmap. Measured with tools/bench_cold_io (cold = every
//                     file evicted with posix_fadvise DONTNEED, then one epoch of read_batch):
//                     warm, mmap is as fast or faster (no copy of raw records); cold, on this
//                     project's virtual disk neither mode won consistently. Use pread where
//                     page faults are costly (network file systems), or to keep RSS free of
//                     mapped pages.
//   read_batch first gathers the byte ranges its records need, per shard, merges neighbours
//   (gaps under 128 KiB) and announces them (posix_fadvise / madvise WILLNEED), so a cold disk
//   serves them as large requests in the order it prefers; dataset::prefetch does the same for
//   a batch to come. open_options::storage takes any other storage (object storage, ...): it
//   implements shardpack::storage and shardpack::byte_source outside this header.
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
#pragma once
#include <sys/stat.h>
#include <zstd.h>
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>  // SSSE3 shuffles for channel planes, AVX2 float conversions (compiled for them only where used)
#endif

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <condition_variable>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <sys/resource.h>
#include <type_traits>
#include <vector>

#include "detail/band_frames.hpp"
#include "detail/error.hpp"
#include "detail/format.hpp"
#include "detail/json.hpp"
#include "detail/regular_file.hpp"
#include "detail/shard_file.hpp"
#include "detail/shard_table.hpp"
#include "detail/storage.hpp"
#include "detail/zstd_frames.hpp"

namespace shardpack {

inline constexpr const char* manifest_file_name = "manifest.json";

enum class task { segmentation, classification };
enum class label_layout { one_hot, index, class_id };
enum class channel_order { gray, rgb, rgba };
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
    label_layout layout = label_layout::one_hot;
    std::size_t label_value_bytes = 1;  // index layout: 1 (uint8) or 2 (uint16)
    std::size_t fixed_height = 0;       // 0 when records differ in size
    std::size_t fixed_width = 0;
    std::size_t class_count = 0;
    std::uint32_t ignore_value = 255;   // index value of ignored pixels; all-zero in one-hot
};

struct open_options {
    bool verify_checksums = true;  // XXH3-64 of every record's stored bytes, at every read
    // How local shards are read: io_mode::mmap, io_mode::pread, or io_mode::automatic (see
    // "I/O" above). Ignored when `storage` is set (the storage decides).
    io_mode io = io_mode::automatic;
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

// Per-channel normalisation for float output: value = (u8 / 255 - mean[c]) / stddev[c].
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
};

struct augmentation {
    std::size_t height = 0, width = 0;  // output size; 0 and 0: the record's own size (flips only)
    crop_position position = crop_position::center;
    flip_mode hflip = flip_mode::none, vflip = flip_mode::none;
    float hflip_probability = 0.5f, vflip_probability = 0.5f;
    const crop_box* given = nullptr;  // one per sample of the batch, for crop_position::given / flip_mode::given
    std::uint64_t seed = 0, epoch = 0;
};

// The window and flips a record of `record_height` x `record_width` gets under `a`: a pure function
// of a, the record's dataset index and (for given boxes) the batch slot, so the same for any
// thread count, worker count and order of reads. Random draws: r_j = splitmix64(h + j) for
// h = splitmix64(seed ^ splitmix64(epoch ^ splitmix64(index))); y = r_1 mod (H - height + 1),
// x = r_2 mod (W - width + 1), hflip = (r_3 >> 40) < p * 2^24, vflip likewise with r_4.
crop_box plan_augmentation(const augmentation& a, std::size_t index, std::size_t record_height, std::size_t record_width,
                           std::size_t slot = 0);

// Buffers a caller owns, for read_into / read_batch. Set the pointers you want filled; leave the
// others null. Capacities count elements (not bytes) and are checked. For a batch they hold the
// whole batch, sample after sample, which needs a fixed image size.
struct sample_buffers {
    std::uint8_t* image_u8 = nullptr;    // H*W*C, as stored
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
};

}  // namespace shardpack

// The state dataset handles share (it uses schema_info and class_info above).
#include "detail/dataset_state.hpp"

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
    tensor_view<std::uint8_t> image() const& {
        return {rec_ + layout_.image_offset, {layout_.height, layout_.width, std::size_t(state_->schema.channels)}};
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
    tensor_view<std::uint8_t> label() const&& = delete;
    tensor_view<std::uint16_t> label_index16() const&& = delete;
    std::int32_t class_id() const { return layout_.class_id; }
    // The one-hot label whatever the stored layout: {H, W, K} for segmentation, {1, 1, K} for
    // classification. Allocates; training loops use dataset::read_into instead.
    std::vector<std::uint8_t> one_hot() const;

private:
    friend class dataset;
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
    // read_into for `count` samples, laid out one after the other in each buffer.
    void read_batch(const std::size_t* indices, std::size_t count, const sample_buffers& out, read_context& ctx) const;
    // Read-ahead: tells the storage that these records will be read soon (the next batch), so
    // that a cold disk or a remote store fetches their byte ranges, merged per shard, while the
    // current batch decodes. read_batch does this for its own batch first. A hint: returns at
    // once and reads nothing itself.
    void prefetch(const std::size_t* indices, std::size_t count) const;
    void prefetch(const std::size_t* indices, std::size_t count, read_context& ctx) const;

    // Rank `rank`'s share of the records when `world` ranks read the dataset (contiguous; the
    // Python package's epoch_order strides instead, see its docs).
    shardpack::rank_share rank_share(std::size_t rank, std::size_t world,
                                     rank_share_policy policy = rank_share_policy::pad) const;
    // The former name of rank_share.
    shardpack::rank_share partition(std::size_t rank, std::size_t world,
                                    rank_share_policy policy = rank_share_policy::pad) const {
        return rank_share(rank, world, policy);
    }

private:
    friend class sample;
    std::shared_ptr<const detail::dataset_state> s_;

    // `manifest_version`: storage::version_of(manifest.json) before this attempt.
    static dataset open_once(const std::string& folder, const open_options& options, const std::string& manifest_version);
    static std::size_t resolve_max_open_shards(const open_options& options);
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
    // The window `b` of `full`, flipped, as a compact record in ctx's window buffer.
    sample window(const sample& full, const crop_box& b, read_context& ctx) const;
};

// ---------------------------------------------------------------------------------------------
// Implementation

namespace detail {
// What tells one manifest.json from the next: a rebuild renames a new file over it.
struct file_identity {
    bool exists = false;
    std::uint64_t device = 0, inode = 0, size = 0;
    std::int64_t mtime_ns = 0;
    bool operator==(const file_identity& o) const {
        return exists == o.exists && device == o.device && inode == o.inode && size == o.size && mtime_ns == o.mtime_ns;
    }
};
inline file_identity identify_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    return {true, std::uint64_t(st.st_dev), std::uint64_t(st.st_ino), std::uint64_t(st.st_size),
            std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}
}  // namespace detail

// A rebuild publishing while open() reads can remove a shard the manifest it read names (the
// shards of the manifest before the previous one). The failure then concerns a dataset that is
// no longer current: when manifest.json has been replaced since the attempt began, it opens the
// current one (up to 8 attempts in all).
namespace detail {
// The storage of an s3:// URL, when a remote library registered one (src/remote/s3_storage.cpp,
// shardpack::remote::enable_s3_urls()): this header itself reads only local folders.
using url_storage_opener = std::shared_ptr<const storage> (*)(const std::string& url);
inline url_storage_opener& s3_storage_opener() {
    static url_storage_opener opener = nullptr;
    return opener;
}
}  // namespace detail

inline dataset dataset::open(const std::string& folder, const open_options& options) {
    open_options resolved = options;
    if (!resolved.storage && folder.rfind("s3://", 0) == 0) {
        if (!detail::s3_storage_opener())
            throw error(folder + ": s3:// URLs are read by shardpack's remote library (src/remote/, libcurl): link it and "
                                 "call shardpack::remote::enable_s3_urls(), or pass open_options::storage");
        resolved.storage = detail::s3_storage_opener()(folder);
    }
    if (!resolved.storage)
        resolved.storage = std::make_shared<detail::local_storage>(
            folder, options.io == io_mode::pread ? io_mode::pread : io_mode::mmap);
    const storage& store = *resolved.storage;
    // A reader slower than the rebuilds (a slow file system, many shards) can see the manifest
    // replaced more than once while it opens; it tries again while each failure coincides with
    // a new manifest, a bounded number of times.
    constexpr int max_attempts = 8;
    std::string before = store.version_of(manifest_file_name);
    for (int attempt = 1;; ++attempt) {
        try {
            return open_once(folder, resolved, before);
        } catch (const error&) {
            const std::string after = store.version_of(manifest_file_name);
            if (attempt == max_attempts || after.empty() || after == before) throw;
            before = after;
        }
    }
}

inline dataset dataset::open_once(const std::string& folder, const open_options& options,
                                  const std::string& manifest_version) {
    using namespace detail;
    auto st = std::make_shared<dataset_state>();
    st->path = folder;
    st->store = options.storage;
    st->verify = options.verify_checksums;
    const storage& store = *st->store;
    st->manifest_version = manifest_version;
    const std::string manifest_path = folder + "/" + manifest_file_name;
    const std::string manifest_text = store.read_small_file(manifest_file_name, manifest_max_bytes);  // its errors name the file
    try {
        st->manifest = json::parse(manifest_text, manifest_max_values);
    } catch (const error& e) {
        throw error(manifest_path + ": " + e.what());
    }
    const json& m = st->manifest;
    try {
        if (m.at("format").as_string() != "shardpack") throw error("not a shardpack manifest");
        const std::string& version = m.at("format_version").as_string();
        if (version.rfind(std::to_string(version_major) + ".", 0) != 0)
            throw error("format version " + version + " is not supported by this reader (it reads major version " +
                        std::to_string(version_major) + ")");
        const json* table = m.find("shard_table");
        const json* list = m.find("shards");
        if (table && list)
            throw error("has both \"shards\" and \"shard_table\"; a manifest lists its shards in one of them");
        std::uint64_t total = 0;
        if (table) {
            // Format 1.2: the shards are listed in a binary table (spec 13.8), checked whole
            // against the manifest's size and XXH3-64 before any entry is used.
            const std::string& file = table->at("file").as_string();
            if (file.empty() || file.find('/') != std::string::npos || file[0] == '.')
                throw error("shard table name \"" + file + "\" is not a plain file name");
            const std::uint64_t bytes = table->at("bytes").as_u64();
            std::uint64_t hash = 0;
            if (!parse_hex16(table->at("xxh3").as_string(), hash))
                throw error("shard_table: \"xxh3\" is not 16 lowercase hex digits");
            if (bytes > shard_table_max_bytes)
                throw error(file + ": the manifest says " + std::to_string(bytes) + " bytes, more than a shard table may have (" +
                            std::to_string(shard_table_max_bytes) + ")");
            std::string bytes_read;
            try {
                bytes_read = store.read_small_file(file, shard_table_max_bytes);
            } catch (const error& e) {
                throw error(std::string(e.what()) + " (the manifest's shard table)");
            }
            const auto* p = reinterpret_cast<const unsigned char*>(bytes_read.data());
            if (bytes_read.size() != bytes)
                throw error(file + ": the shard table is " + std::to_string(bytes_read.size()) + " bytes, the manifest says " +
                            std::to_string(bytes) + " (truncated, or not the table this manifest names)");
            const std::uint64_t h = XXH3_64bits(p, bytes_read.size());
            if (h != hash)
                throw error(file + ": the shard table's XXH3-64 is " + hex16(h) + ", the manifest says " + hex16(hash) +
                            ": it is damaged");
            std::vector<shard_table_entry> entries;
            try {
                entries = decode_shard_table(p, bytes_read.size());
            } catch (const error& e) {
                throw error(file + ": " + e.what());
            }
            bytes_read = std::string();
            st->names_from_hashes = true;
            st->shard_hash.reserve(entries.size());
            st->shard_bytes.reserve(entries.size());
            st->first_record.reserve(entries.size() + 1);
            for (std::size_t k = 0; k < entries.size(); ++k) {
                st->shard_hash.push_back(entries[k].hash);
                st->shard_bytes.push_back(entries[k].bytes);
                st->first_record.push_back(total);
                if (entries[k].records > ~std::uint64_t(0) - total)
                    throw error(file + ": lists more records than 2^64");
                total += entries[k].records;
            }
        } else {
            if (!list) throw error("JSON: missing field \"shards\"");
            const auto& shards = list->as_array();
            if (shards.empty()) throw error("lists no shards");
            st->name_end.reserve(shards.size());
            st->shard_hash.reserve(shards.size());
            st->shard_hash_problem.reserve(shards.size());
            st->shard_bytes.reserve(shards.size());
            st->first_record.reserve(shards.size() + 1);
            for (std::size_t k = 0; k < shards.size(); ++k) {
                const json& e = shards[k];
                const std::string& name = e.at("file").as_string();
                if (name.empty() || name.find('/') != std::string::npos || name[0] == '.')
                    throw error("shard name \"" + name + "\" is not a plain file name");
                const std::uint64_t records = e.at("records").as_u64();
                if (e.at("first_record").as_u64() != total)
                    throw error(name + ": the manifest lists it as starting at record " +
                                std::to_string(e.at("first_record").as_u64()) + ", after " + std::to_string(total) +
                                " records in the shards before it");
                st->names += name;
                st->name_end.push_back(st->names.size());
                st->shard_bytes.push_back(e.at("bytes").as_u64());
                st->first_record.push_back(total);
                // Not needed to read (verify checks it): kept compactly, with what is wrong with it.
                const json* x = e.is_object() ? e.find("xxh3") : nullptr;
                std::uint64_t hash = 0;
                st->shard_hash_problem.push_back(!x ? 1 : !x->is_string() ? 2 : parse_hex16(x->as_string(), hash) ? 0 : 3);
                st->shard_hash.push_back(hash);
                if (records > ~std::uint64_t(0) - total) throw error("lists more records than 2^64");
                total += records;
            }
            st->names.shrink_to_fit();
        }
        st->first_record.push_back(total);
        if (total != m.at("records").as_u64())
            throw error("the shards hold " + std::to_string(total) + " records, the manifest says " +
                        std::to_string(m.at("records").as_u64()));
        // The dataset keeps the manifest without its shard list (~0.8 KB a shard as a JSON
        // tree): the vectors above hold what readers need.
        if (list) {
            json kept = json::object();
            for (const auto& member : m.as_object())
                if (member.first != "shards") kept.set(member.first, member.second);
            st->manifest = std::move(kept);
        }
        // Shard 0 gives the schema; with no more shards than may be open at once, every shard
        // is opened and checked now (a damaged dataset is refused at open); else, or when the
        // storage's opens cost requests (object storage) and max_open_shards is automatic,
        // each is opened and checked when first read.
        const std::size_t count = st->shard_count();
        const std::size_t limit = resolve_max_open_shards(options);
        st->shards.init(count, limit, count <= limit && !(options.max_open_shards == 0 && store.opens_shards_lazily()));
        auto first = st->open_shard(0);
        st->schema_bytes = first->schema_bytes();
        if (st->shards.eager()) {
            st->shards.set_eager(0, first);
            constexpr std::size_t announce = 64;  // shards whose opens the storage may start ahead
            std::vector<std::string> next;
            for (std::size_t k = 1; k < count; ++k) {
                if (k % announce == 1) {
                    next.clear();
                    for (std::size_t j = k; j < std::min(count, k + announce); ++j) next.push_back(st->name(j));
                    store.will_open(next.data(), next.size());
                }
                st->shards.set_eager(k, st->open_shard(k));
            }
        } else {
            st->shards.get(0, [&first](std::size_t) { return first; });
        }
        st->schema = first->schema();
        st->info = to_info(st->schema);
        for (const auto& c : first->classes()) st->classes.push_back({c.name, c.has_color, c.r, c.g, c.b});
    } catch (const error& e) {
        throw error(folder + ": " + e.what());
    }
    dataset ds;
    ds.s_ = std::move(st);
    return ds;
}

inline shard_ref dataset::shard(std::size_t k) const {
    checked_shard(k);
    if (s_->shards.eager()) return shard_ref(s_->shards.eager_ptr(k));
    return shard_ref(s_->pin(k).hold);
}

namespace detail {
// The automatic bound on open shards: mappings count against vm.max_map_count (65,530 by
// default, shared with the rest of the process), descriptors against the open-file limit
// (often 1,024), so pread keeps at most half of the latter.
inline std::size_t automatic_max_open_shards(io_mode mode) {
    constexpr std::size_t mapped_limit = 4096;
    if (mode != io_mode::pread) return mapped_limit;
    struct rlimit rl {};
    std::size_t files = 1024;
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) files = static_cast<std::size_t>(rl.rlim_cur);
    return std::max<std::size_t>(16, std::min(mapped_limit, files / 2));
}
}  // namespace detail

inline std::size_t dataset::resolve_max_open_shards(const open_options& options) {
    if (options.max_open_shards) return options.max_open_shards;
    const auto* local = dynamic_cast<const detail::local_storage*>(options.storage.get());
    return detail::automatic_max_open_shards(local ? local->mode() : io_mode::mmap);
}

inline const unsigned char* dataset::load(std::size_t i, ZSTD_DCtx* dctx, std::vector<unsigned char>& buffer,
                                          std::vector<unsigned char>& stored_copy, detail::record_layout& layout,
                                          detail::shard_pin& pinned) const {
    using namespace detail;
    std::size_t k = 0, local = 0;
    locate(i, k, local);
    pinned = s_->pin(k);
    const shard_file& shard = *pinned;
    const index_entry e = shard.entry(local);
    const unsigned char* stored = shard.bytes() + e.offset;
    if (!shard.bytes()) {
        // Not mapped: one read of the stored bytes, straight into the record buffer for a raw
        // record, else into the stored-bytes buffer.
        std::vector<unsigned char>& dst = e.codec == codec_raw ? buffer : stored_copy;
        dst.resize(static_cast<std::size_t>(e.stored_size));
        try {
            shard.source()->read_at(e.offset, dst.size(), dst.data());
        } catch (const error& ex) {
            throw error(s_->where(k, local) + ": " + ex.what());
        }
        stored = dst.data();
    }
    if (s_->verify) {
        const std::uint64_t h = XXH3_64bits(stored, static_cast<std::size_t>(e.stored_size));
        if (h != e.checksum) throw error(s_->where(k, local) + ": checksum mismatch: the stored bytes are damaged");
    }
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
        try {
            layout = parse_record(s_->schema, stored, e.decoded_size);
            const band_table bands = parse_band_table(layout, stored, e.stored_size, e.codec);
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
    if (shard.bytes() && shard.entry(local).codec == detail::codec_raw) {
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
    return pinned->bytes() && pinned->entry(local).codec == detail::codec_raw;
}

inline sample dataset::read(std::size_t i, read_context& ctx) const {
    sample s;
    s.state_ = s_;
    s.index_ = i;
    s.rec_ = load(i, ctx.dctx_.get(), ctx.buffer_, ctx.stored_, s.layout_, ctx.pin_);
    return s;
}

inline std::vector<std::uint8_t> sample::one_hot() const {
    const auto& s = state_->schema;
    const std::size_t k = s.class_count;
    if (s.task == detail::task_code::classification) {
        std::vector<std::uint8_t> v(k, 0);
        v[std::size_t(layout_.class_id)] = 1;
        return v;
    }
    const std::size_t pixels = std::size_t(layout_.height) * layout_.width;
    std::vector<std::uint8_t> v(pixels * k, 0);
    sample_buffers out;
    out.label_u8 = v.data();
    out.label_capacity = v.size();
    dataset::fill(*this, out, 0);
    return v;
}

namespace detail {

// The class id of pixel p of a stored segmentation label, or the ignore value.
inline std::uint32_t stored_class(const schema_record& s, const unsigned char* label, std::size_t p) {
    if (s.label_layout == layout_code::index)
        return s.label_dtype_bytes == 1 ? label[p] : load_u16(label + 2 * p);
    const unsigned char* v = label + p * s.class_count;
    for (std::uint32_t c = 0; c < s.class_count; ++c)
        if (v[c]) return c;
    return s.ignore_value;
}

// The index of the lowest nonzero byte of v (v != 0), bytes numbered from the least significant.
inline std::uint32_t lowest_set_byte(std::uint64_t v) {
#if defined(__GNUC__) || defined(__clang__)
    return static_cast<std::uint32_t>(__builtin_ctzll(v)) / 8;
#else
    std::uint32_t c = 0;
    while (!(v & 0xff)) {
        v >>= 8;
        ++c;
    }
    return c;
#endif
}

// Calls f(p, stored_class(s, label, p)) for every pixel p in order, choosing the stored layout
// once: the per-pixel loop then keeps everything in registers (stores through uint8_t pointers
// may alias anything, so a loop that read the schema per pixel would reload it every time).
template <class F>
inline void for_each_stored_class(const schema_record& s, const unsigned char* label, std::size_t pixels, F&& f) {
    const std::uint32_t k = s.class_count, ignore = s.ignore_value;
    if (s.label_layout == layout_code::index && s.label_dtype_bytes == 1) {
        for (std::size_t p = 0; p < pixels; ++p) f(p, std::uint32_t(label[p]));
    } else if (s.label_layout == layout_code::index) {
        for (std::size_t p = 0; p < pixels; ++p) f(p, std::uint32_t(load_u16(label + 2 * p)));
    } else {
        std::size_t p = 0;
        if (k <= 8) {
            // One 8-byte load per pixel: its lowest nonzero byte is the class. A search byte by
            // byte branches on the data, and random class boundaries mispredict most of those
            // branches (it cost more than decompressing the record). The last few pixels, whose
            // load would run past the label, take the loop below.
            const std::uint64_t mask = k == 8 ? ~std::uint64_t(0) : (std::uint64_t(1) << (8 * k)) - 1;
            const std::size_t fast = pixels * k >= 8 ? (pixels * k - 8) / k + 1 : 0;
            for (; p < fast; ++p) {
                const std::uint64_t v = load_u64(label + p * k) & mask;
                f(p, v ? lowest_set_byte(v) : ignore);
            }
        }
        for (; p < pixels; ++p) {
            const unsigned char* v = label + p * k;
            std::uint32_t c = 0;
            while (c < k && !v[c]) ++c;
            f(p, c < k ? c : ignore);
        }
    }
}

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
// Three uint8 planes from 3-channel pixels with SSSE3 byte shuffles, 16 pixels a step (the
// compiler's own code for the scalar loop, SSE2 only, moved about a third as many bytes a
// second). Compiled for SSSE3 whatever the build's flags, and called only where the CPU has it.
__attribute__((target("ssse3"))) inline std::size_t planes3_ssse3(const unsigned char* src, std::uint8_t* out0,
                                                                   std::uint8_t* out1, std::uint8_t* out2,
                                                                   std::size_t count) {
    // mask[plane][vector][j]: the byte of input vector `vector` (of the 3 that hold 16 pixels)
    // that goes to byte j of `plane`, or 0x80 (zero).
    alignas(16) static const auto masks = [] {
        std::array<std::array<std::array<std::uint8_t, 16>, 3>, 3> m{};
        for (int plane = 0; plane < 3; ++plane)
            for (int v = 0; v < 3; ++v)
                for (int j = 0; j < 16; ++j) {
                    const int at = 3 * j + plane;
                    m[plane][v][j] = at / 16 == v ? std::uint8_t(at % 16) : std::uint8_t(0x80);
                }
        return m;
    }();
    std::uint8_t* out[3] = {out0, out1, out2};
    __m128i shuffle[3][3];
    for (int plane = 0; plane < 3; ++plane)
        for (int v = 0; v < 3; ++v)
            shuffle[plane][v] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(masks[plane][v].data()));
    std::size_t p = 0;
    for (; p + 16 <= count; p += 16, src += 48) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
        for (int plane = 0; plane < 3; ++plane) {
            const __m128i v = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(a, shuffle[plane][0]), _mm_shuffle_epi8(b, shuffle[plane][1])),
                                           _mm_shuffle_epi8(c, shuffle[plane][2]));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out[plane] + p), v);
        }
    }
    return p;  // pixels done; the caller does the rest
}

inline bool cpu_has_ssse3() {
    static const bool has = __builtin_cpu_supports("ssse3");
    return has;
}

// dst[i] = (float(src[i]) / 255 - mean[i % n]) / stddev[i % n], 24 values a step (n: 1, 3 or
// 4 interleaved channels; 24 is a multiple of each), with AVX2, bit for bit the scalar
// expression's values. `reciprocal` false: each lane does the expression's three IEEE
// single-precision operations in its order (vector divisions). `reciprocal` true: each quotient
// a / b as q = a * RN(1 / b) corrected once, q + (a - q * b) * RN(1 / b), with fused
// multiply-adds (a - q * b is then exact): the correctly rounded quotient except in rare cases,
// and about three times as fast as two divisions, so the caller uses it only where
// reciprocal_is_exact found it equal to the divisions for every byte value of every channel.
// (The lookup table this replaces ran at about one value a cycle.) Returns the values done (a
// multiple of 24); the caller does the rest.
__attribute__((target("avx2,fma"))) inline std::size_t normalize_avx2(const unsigned char* src, float* dst,
                                                                      std::size_t count, std::size_t n, const float* mean,
                                                                      const float* stddev, bool reciprocal) {
    alignas(32) float m[24], sd[24], inv[24];
    for (std::size_t i = 0; i < 24; ++i) {
        m[i] = mean[i % n];
        sd[i] = stddev[i % n];
        inv[i] = 1.0f / sd[i];
    }
    const __m256 scale = _mm256_set1_ps(255.0f), inv_scale = _mm256_set1_ps(1.0f / 255.0f);
    __m256 mv[3], sv[3], iv[3];
    for (int k = 0; k < 3; ++k) {
        mv[k] = _mm256_load_ps(m + 8 * k);
        sv[k] = _mm256_load_ps(sd + 8 * k);
        iv[k] = _mm256_load_ps(inv + 8 * k);
    }
    std::size_t i = 0;
    // (No lambdas or helpers: they would not be compiled for AVX2.)
    if (reciprocal) {
        for (; i + 24 <= count; i += 24)
            for (int k = 0; k < 3; ++k) {
                const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i + 8 * k));
                const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
                const __m256 q = _mm256_mul_ps(v, inv_scale);
                const __m256 t = _mm256_fmadd_ps(_mm256_fnmadd_ps(q, scale, v), inv_scale, q);  // RN(v / 255)
                const __m256 u = _mm256_sub_ps(t, mv[k]);
                const __m256 r = _mm256_mul_ps(u, iv[k]);
                _mm256_storeu_ps(dst + i + 8 * k, _mm256_fmadd_ps(_mm256_fnmadd_ps(r, sv[k], u), iv[k], r));
            }
    } else {
        for (; i + 24 <= count; i += 24)
            for (int k = 0; k < 3; ++k) {
                const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i + 8 * k));
                const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
                _mm256_storeu_ps(dst + i + 8 * k, _mm256_div_ps(_mm256_sub_ps(_mm256_div_ps(v, scale), mv[k]), sv[k]));
            }
    }
    return i;
}

inline bool cpu_has_avx2_fma() {
    static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return has;
}

// Whether normalize_avx2's reciprocal steps give, for every byte value of each of the n
// channels, the bits of the scalar expression. Asked once per thread and normalisation (the
// answer is remembered): 256 values and divisions a channel.
inline bool reciprocal_is_exact(const normalization& norm, std::size_t n) {
    struct answer {
        normalization norm;
        std::size_t n = 0;
        bool exact = false;
    };
    thread_local answer last;
    if (last.n == n && std::memcmp(last.norm.mean, norm.mean, n * sizeof(float)) == 0 &&
        std::memcmp(last.norm.stddev, norm.stddev, n * sizeof(float)) == 0)
        return last.exact;
    unsigned char values[264] = {};  // 0..255, then padding to a multiple of 24
    for (int v = 0; v < 256; ++v) values[v] = static_cast<unsigned char>(v);
    float fast[264];
    bool exact = true;
    for (std::size_t c = 0; c < n && exact; ++c) {
        normalize_avx2(values, fast, 264, 1, &norm.mean[c], &norm.stddev[c], true);
        for (int v = 0; v < 256 && exact; ++v) {
            const float want = (float(v) / 255.0f - norm.mean[c]) / norm.stddev[c];
            exact = std::memcmp(&fast[v], &want, sizeof(float)) == 0;
        }
    }
    last.norm = norm;
    last.n = n;
    last.exact = exact;
    return exact;
}
#endif

// normalize_avx2's values for `count` interleaved values of n channels (1, 3 or 4) in any
// build: the vector loop where the CPU has AVX2 and FMA, the scalar expression one value at a
// time for the rest.
inline void normalize_interleaved(const unsigned char* src, float* dst, std::size_t count, std::size_t n,
                                  const normalization& norm) {
    std::size_t i = 0;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    if (cpu_has_avx2_fma()) i = normalize_avx2(src, dst, count, n, norm.mean, norm.stddev, reciprocal_is_exact(norm, n));
#endif
    for (; i < count; ++i) dst[i] = (float(src[i]) / 255.0f - norm.mean[i % n]) / norm.stddev[i % n];
}

// convert_pixels' planar case for image channels: N (1, 3 or 4) planes written in one pass (the
// planes past N are null).
template <std::size_t N, class T, class Convert>
inline void planar_pixels(const unsigned char* __restrict src, T* __restrict out0, T* __restrict out1, T* __restrict out2,
                          T* __restrict out3, std::size_t count, std::integral_constant<std::size_t, N>, Convert convert) {
    std::size_t p = 0;
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
    if constexpr (N == 3 && std::is_same_v<T, std::uint8_t> &&
                  std::is_same_v<decltype(convert(0, 0)), unsigned char>) {  // the identity: uint8 planes
        if (cpu_has_ssse3()) {
            p = planes3_ssse3(src, out0, out1, out2, count);
            src += 3 * p;
        }
    }
#endif
    for (; p < count; ++p, src += N) {
        out0[p] = convert(0, src[0]);
        if constexpr (N > 1) out1[p] = convert(1, src[1]);
        if constexpr (N > 2) out2[p] = convert(2, src[2]);
        if constexpr (N > 3) out3[p] = convert(3, src[3]);
    }
}

// dst = convert(c, src) for every value of `count` interleaved pixels of CH values each, written
// interleaved (dst[p * CH + c]) or planar (dst[c * plane + p]: `plane` is the whole record's
// pixel count, so that a band of rows lands at its place in every plane). `ch` is a
// std::integral_constant for image channels, so the inner loops know it at compile time, or a
// std::size_t (one-hot planes).
template <class Channels, class T, class Convert>
inline void convert_pixels(const unsigned char* src, T* dst, std::size_t count, std::size_t plane, Channels ch,
                           bool planar, Convert convert) {
    const std::size_t n = ch;
    if constexpr (!std::is_same_v<Channels, std::size_t>) {
        if (planar) {
            // Image channels (known at compile time): one pass writing every plane per pixel,
            // which the compiler turns into vector shuffles (a pass of strided loads per plane
            // took about twice as long).
            planar_pixels(src, dst, Channels{} > 1 ? dst + plane : nullptr, Channels{} > 2 ? dst + 2 * plane : nullptr,
                          Channels{} > 3 ? dst + 3 * plane : nullptr, count, ch, convert);
            return;
        }
    }
    if (planar) {
        for (std::size_t c = 0; c < n; ++c) {
            T* out = dst + c * plane;
            const unsigned char* s = src + c;
            for (std::size_t p = 0; p < count; ++p) out[p] = convert(c, s[p * n]);
        }
    } else {
        for (std::size_t p = 0; p < count; ++p, src += n, dst += n)
            for (std::size_t c = 0; c < n; ++c) dst[c] = convert(c, src[c]);
    }
}

// Calls f(std::integral_constant<std::size_t, channels>) for the channel counts the schema allows.
template <class F>
inline void with_channels(std::size_t channels, F&& f) {
    switch (channels) {
        case 1: f(std::integral_constant<std::size_t, 1>{}); break;
        case 3: f(std::integral_constant<std::size_t, 3>{}); break;
        case 4: f(std::integral_constant<std::size_t, 4>{}); break;
        default: throw error("read_into: " + std::to_string(channels) + " channels");  // refused at open
    }
}

inline void need(std::size_t capacity, std::size_t want, const char* what) {
    if (capacity < want)
        throw error(std::string("read_into: ") + what + " buffer holds " + std::to_string(capacity) + " elements, " +
                    std::to_string(want) + " are needed");
}

// Pixels [first, first + count) of a record of `pixels` pixels: the unit the conversions below
// work in, so that a record can be converted band by band while each band's decompressed rows
// are still in the cache (dataset::read_slot), or whole (dataset::fill: first 0, count pixels).
struct pixel_span {
    std::size_t first = 0, count = 0, pixels = 0;
};

// The image outputs of `out` (slot `slot`) for the span's pixels; `image` holds those pixels as
// stored (interleaved).
inline void fill_image_span(const schema_record& s, const unsigned char* image, pixel_span span, const sample_buffers& out,
                            std::size_t slot) {
    const std::size_t ch_n = s.channels, image_n = span.pixels * ch_n;
    const bool planar = out.channels_first;
    if (out.image_u8) {
        need(out.image_capacity, (slot + 1) * image_n, "image");
        std::uint8_t* dst = out.image_u8 + slot * image_n;
        if (!planar || ch_n == 1) std::memcpy(dst + span.first * ch_n, image, span.count * ch_n);
        else with_channels(ch_n, [&](auto ch) {
            convert_pixels(image, dst + span.first, span.count, span.pixels, ch, true,
                           [](std::size_t, unsigned char v) { return v; });
        });
    }
    if (out.image_f32) {
        need(out.image_capacity, (slot + 1) * image_n, "image");
        if (!planar || ch_n == 1) {  // interleaved values in, interleaved out: no lookup table to make
            normalize_interleaved(image, out.image_f32 + slot * image_n + span.first * ch_n, span.count * ch_n, ch_n,
                                  out.norm);
            return;
        }
        float table[4][256];  // per-channel lookup: one multiply-free load per value
        for (std::size_t c = 0; c < ch_n; ++c)
            for (int v = 0; v < 256; ++v)
                table[c][v] = (float(v) / 255.0f - out.norm.mean[c]) / out.norm.stddev[c];
        float* dst = out.image_f32 + slot * image_n + (planar ? span.first : span.first * ch_n);
        with_channels(ch_n, [&](auto ch) {
            convert_pixels(image, dst, span.count, span.pixels, ch, planar,
                           [&table](std::size_t c, unsigned char v) { return table[c][v]; });
        });
    }
}

// A segmentation one-hot output (H*W*K, or K*H*W when planar) as 0/1 in T for the span's pixels,
// whatever the stored layout; `label` holds those pixels as stored.
template <class T>
inline void fill_one_hot_span(const schema_record& s, const unsigned char* label, pixel_span span, bool planar, T* dst) {
    const std::size_t k = s.class_count, first = span.first, count = span.count, pixels = span.pixels;
    if (s.label_layout == layout_code::one_hot && !planar) {
        if constexpr (sizeof(T) == 1) std::memcpy(dst + first * k, label, count * k);
        else for (std::size_t j = 0; j < count * k; ++j) dst[first * k + j] = T(label[j]);
    } else if (s.label_layout == layout_code::one_hot) {
        convert_pixels(label, dst + first, count, pixels, k, true, [](std::size_t, unsigned char v) { return T(v); });
    } else if (planar) {
        for (std::size_t c = 0; c < k; ++c) std::fill(dst + c * pixels + first, dst + c * pixels + first + count, T(0));
        T* at = dst + first;
        for_each_stored_class(s, label, count, [at, k, pixels](std::size_t p, std::uint32_t c) {
            if (c < k) at[c * pixels + p] = T(1);
        });
    } else {
        T* at = dst + first * k;
        std::fill(at, at + count * k, T(0));
        for_each_stored_class(s, label, count, [at, k](std::size_t p, std::uint32_t c) {
            if (c < k) at[p * k + c] = T(1);
        });
    }
}

// The segmentation label outputs of `out` (slot `slot`) for the span's pixels; `label` holds
// those pixels as stored.
inline void fill_label_span(const schema_record& s, const unsigned char* label, pixel_span span, const sample_buffers& out,
                            std::size_t slot) {
    const std::size_t pixels = span.pixels, one_hot_n = pixels * s.class_count;
    if (out.label_u8 || out.label_f32) need(out.label_capacity, (slot + 1) * one_hot_n, "label");
    if (out.label_u8) fill_one_hot_span(s, label, span, out.channels_first, out.label_u8 + slot * one_hot_n);
    if (out.label_f32) fill_one_hot_span(s, label, span, out.channels_first, out.label_f32 + slot * one_hot_n);
    if (out.label_index || out.label_index_i64 || out.label_index_u8)
        need(out.label_index_capacity, (slot + 1) * pixels, "label index");
    const std::size_t at = slot * pixels + span.first;
    if (out.label_index_u8) {
        // Class ids below 255 and the ignore value 255 fit; more classes would wrap.
        if (s.class_count > 255)
            throw error("read_into: uint8 label indices need at most 255 classes, the dataset has " +
                        std::to_string(s.class_count));
        std::uint8_t* dst = out.label_index_u8 + at;
        if (s.label_layout == layout_code::index && s.label_dtype_bytes == 1) std::memcpy(dst, label, span.count);
        else for_each_stored_class(s, label, span.count,
                                   [dst](std::size_t p, std::uint32_t c) { dst[p] = static_cast<std::uint8_t>(c); });
    }
    if (out.label_index) {
        std::uint16_t* dst = out.label_index + at;
        for_each_stored_class(s, label, span.count,
                              [dst](std::size_t p, std::uint32_t c) { dst[p] = static_cast<std::uint16_t>(c); });
    }
    if (out.label_index_i64) {
        std::int64_t* dst = out.label_index_i64 + at;
        for_each_stored_class(s, label, span.count, [dst](std::size_t p, std::uint32_t c) { dst[p] = std::int64_t(c); });
    }
}

// The outputs of `out` that do not come from the image or label bytes: class ids, and a
// classification record's one-hot label.
inline void fill_record_labels(const schema_record& s, const record_layout& r, const sample_buffers& out, std::size_t slot) {
    if (out.class_id) out.class_id[slot] = r.class_id;
    if (out.class_id_i64) out.class_id_i64[slot] = r.class_id;
    if (s.task != task_code::classification) return;
    const std::size_t k = s.class_count;
    if (out.label_u8 || out.label_f32) need(out.label_capacity, (slot + 1) * k, "label");
    if (out.label_u8) {
        std::fill(out.label_u8 + slot * k, out.label_u8 + (slot + 1) * k, std::uint8_t(0));
        out.label_u8[slot * k + r.class_id] = 1;
    }
    if (out.label_f32) {
        std::fill(out.label_f32 + slot * k, out.label_f32 + (slot + 1) * k, 0.0f);
        out.label_f32[slot * k + r.class_id] = 1.0f;
    }
    if (out.label_index || out.label_index_i64 || out.label_index_u8)
        throw error("read_into: label_index is for segmentation datasets");
}

}  // namespace detail

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
    read_slot(i, out, ctx, 0);
}

namespace detail {

inline std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

inline bool draw_flip(std::uint64_t r, float p) {
    if (!(p > 0.0f)) return false;
    if (p >= 1.0f) return true;
    return double(r >> 40) < double(p) * double(1u << 24);
}

// Copies `count` pixels of `bytes` bytes each from src to dst, in reverse order (a mirrored row).
inline void copy_mirrored(unsigned char* dst, const unsigned char* src, std::size_t count, std::size_t bytes) {
    const unsigned char* s = src + (count - 1) * bytes;
    switch (bytes) {
        case 1: for (std::size_t i = 0; i < count; ++i) dst[i] = src[count - 1 - i]; break;
        case 3: for (std::size_t i = 0; i < count; ++i, dst += 3, s -= 3) { dst[0] = s[0]; dst[1] = s[1]; dst[2] = s[2]; } break;
        default: for (std::size_t i = 0; i < count; ++i, dst += bytes, s -= bytes) std::memcpy(dst, s, bytes);
    }
}

// dst (rows of `width` pixels) = the window of `src` (rows of `src_width` pixels), flipped.
inline void copy_window(unsigned char* dst, const unsigned char* src, std::size_t src_width, std::size_t bytes,
                        const crop_box& b) {
    const std::size_t row = std::size_t(b.width) * bytes;
    for (std::size_t oy = 0; oy < b.height; ++oy) {
        const std::size_t sy = b.vflip ? b.y + b.height - 1 - oy : b.y + oy;
        const unsigned char* s = src + (sy * src_width + b.x) * bytes;
        if (b.hflip) copy_mirrored(dst + oy * row, s, b.width, bytes);
        else std::memcpy(dst + oy * row, s, row);
    }
}

}  // namespace detail

inline crop_box plan_augmentation(const augmentation& a, std::size_t index, std::size_t record_height,
                                  std::size_t record_width, std::size_t slot) {
    using detail::splitmix64;
    crop_box b;
    const std::size_t h = a.height ? a.height : record_height, w = a.width ? a.width : record_width;
    if ((a.height == 0) != (a.width == 0)) throw error("augmentation: set both height and width of the crop, or neither");
    if (h > record_height || w > record_width)
        throw error("crop " + std::to_string(w) + "x" + std::to_string(h) + " is larger than record " + std::to_string(index) +
                    " (" + std::to_string(record_width) + "x" + std::to_string(record_height) + ")");
    b.height = std::uint32_t(h);
    b.width = std::uint32_t(w);
    const std::uint64_t seed = splitmix64(a.seed ^ splitmix64(a.epoch ^ splitmix64(index)));
    if ((a.position == crop_position::given || a.hflip == flip_mode::given || a.vflip == flip_mode::given) && !a.given)
        throw error("augmentation: given boxes or flips need augmentation::given");
    switch (a.position) {
        case crop_position::center:
            b.y = std::uint32_t((record_height - h) / 2);
            b.x = std::uint32_t((record_width - w) / 2);
            break;
        case crop_position::random:
            b.y = std::uint32_t(splitmix64(seed + 1) % (record_height - h + 1));
            b.x = std::uint32_t(splitmix64(seed + 2) % (record_width - w + 1));
            break;
        case crop_position::given: {
            const crop_box& g = a.given[slot];
            if (g.y > record_height - h || g.x > record_width - w)
                throw error("given crop at (y " + std::to_string(g.y) + ", x " + std::to_string(g.x) + ") of " +
                            std::to_string(w) + "x" + std::to_string(h) + " runs past record " + std::to_string(index) + " (" +
                            std::to_string(record_width) + "x" + std::to_string(record_height) + ")");
            b.y = g.y;
            b.x = g.x;
            break;
        }
    }
    b.hflip = a.hflip == flip_mode::given ? a.given[slot].hflip
            : a.hflip == flip_mode::random && detail::draw_flip(splitmix64(seed + 3), a.hflip_probability);
    b.vflip = a.vflip == flip_mode::given ? a.given[slot].vflip
            : a.vflip == flip_mode::random && detail::draw_flip(splitmix64(seed + 4), a.vflip_probability);
    return b;
}

inline sample dataset::window(const sample& full, const crop_box& b, read_context& ctx) const {
    using namespace detail;
    const schema_record& s = s_->schema;
    const record_layout& r = full.layout_;
    const record_layout w = make_record_layout(s, b.height, b.width, r.class_id, 0);
    if (ctx.window_.size() < w.total_bytes) ctx.window_.resize(static_cast<std::size_t>(w.total_bytes));
    unsigned char* out = ctx.window_.data();
    copy_window(out + w.image_offset, full.rec_ + r.image_offset, r.width, s.channels, b);
    if (r.label_bytes)
        copy_window(out + w.label_offset, full.rec_ + r.label_offset, r.width,
                    static_cast<std::size_t>(r.label_bytes / (std::uint64_t(r.height) * r.width)), b);
    sample win;
    win.state_ = s_;
    win.index_ = full.index_;
    win.rec_ = out;
    win.layout_ = w;
    return win;
}

inline void dataset::read_slot(std::size_t i, const sample_buffers& out, read_context& ctx, std::size_t slot) const {
    using namespace detail;
    std::size_t k = 0, local = 0;
    locate(i, k, local);
    const shard_pin pinned = s_->pin(k);
    const shard_file& shard = *pinned;
    const index_entry e = shard.entry(local);
    const augmentation* aug = out.augment;
    if (!is_band_codec(e.codec)) {
        const sample full = read(i, ctx);
        if (!aug) return fill(full, out, slot);
        const crop_box b = plan_augmentation(*aug, i, full.height(), full.width(), slot);
        if (out.applied) out.applied[slot] = b;
        return fill(window(full, b, ctx), out, slot);
    }
    const unsigned char* stored = shard.bytes() + e.offset;
    if (!shard.bytes()) {
        ctx.stored_.resize(static_cast<std::size_t>(e.stored_size));
        try {
            shard.source()->read_at(e.offset, ctx.stored_.size(), ctx.stored_.data());
        } catch (const error& ex) {
            throw error(s_->where(k, local) + ": " + ex.what());
        }
        stored = ctx.stored_.data();
    }
    if (s_->verify && XXH3_64bits(stored, static_cast<std::size_t>(e.stored_size)) != e.checksum)
        throw error(s_->where(k, local) + ": checksum mismatch: the stored bytes are damaged");
    record_layout layout;
    band_table bands;
    try {
        layout = parse_record(s_->schema, stored, e.decoded_size);
        bands = parse_band_table(layout, stored, e.stored_size, e.codec);
    } catch (const error& ex) {
        throw error(s_->where(k, local) + ": " + ex.what());
    }
    const schema_record& s = s_->schema;
    const bool seg = s.task == task_code::segmentation;
    sample smp;
    smp.state_ = s_;
    smp.index_ = i;
    smp.layout_ = layout;
    smp.rec_ = stored;  // only the header is read from here; decoded regions go to ctx.buffer_
    if (aug) {
        // Only the bands that hold the window's rows, into their places in the context's buffer.
        const crop_box b = plan_augmentation(*aug, i, layout.height, layout.width, slot);
        if (out.applied) out.applied[slot] = b;
        ctx.buffer_.resize(static_cast<std::size_t>(e.decoded_size));
        unsigned char* buf = ctx.buffer_.data();
        try {
            decompress_bands(ctx.dctx_.get(), bands, layout.height, b.y, b.y + b.height, buf + layout.image_offset,
                             seg ? buf + layout.label_offset : nullptr);
        } catch (const error& ex) {
            throw error(s_->where(k, local) + ": " + ex.what());
        }
        smp.rec_ = buf;
        return fill(window(smp, b, ctx), out, slot);
    }
    // No augmentation: a region's frames decompress straight into the caller's buffers where
    // those hold the stored bytes as they are (uint8 image, interleaved; one-hot label stored
    // one-hot; uint8 index map stored as one). Otherwise they decompress band by band into the
    // context's band buffer, and each band is converted into the outputs while its rows are
    // still in the cache (a whole record decompressed first, then converted, would come back
    // from memory: 2.4 MB for a 512x512 RGB record with a 6-class one-hot label).
    const std::size_t pixels = std::size_t(layout.height) * layout.width;
    const std::size_t image_n = pixels * s.channels;
    sample_buffers rest = out;
    unsigned char* image_dst = nullptr;
    unsigned char* label_dst = nullptr;
    if (out.image_u8 && !out.image_f32 && (!out.channels_first || s.channels == 1)) {
        need(out.image_capacity, (slot + 1) * image_n, "image");
        image_dst = out.image_u8 + slot * image_n;
        rest.image_u8 = nullptr;
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
    const bool image_convert = !image_dst && (rest.image_u8 || rest.image_f32);
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

inline void dataset::read_batch(const std::size_t* indices, std::size_t count, const sample_buffers& out,
                                read_context& ctx) const {
    if (count > 1 && s_->schema.fixed_height == 0 && !(out.augment && out.augment->height))
        throw error(s_->path + ": read_batch needs a dataset with a fixed image size (built with --size) or a crop size");
    if (count > 1) prefetch(indices, count, ctx);
    for (std::size_t j = 0; j < count; ++j) read_slot(indices[j], out, ctx, j);
}

inline void dataset::prefetch(const std::size_t* indices, std::size_t count) const {
    read_context ctx;
    prefetch(indices, count, ctx);
}

inline void dataset::prefetch(const std::size_t* indices, std::size_t count, read_context& ctx) const {
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
        for (; b < wants.size() && wants[b].shard == wants[a].shard; ++b) {
            const detail::index_entry e = shard->entry(wants[b].local);
            ranges.push_back({e.offset, e.stored_size});
        }
        detail::merge_ranges(ranges, merge_gap);
        shard->source()->prefetch(ranges.data(), ranges.size());
        a = b;
    }
}

inline rank_share dataset::rank_share(std::size_t rank, std::size_t world, rank_share_policy policy) const {
    if (world == 0 || rank >= world)
        throw error("rank_share: rank " + std::to_string(rank) + " is not below world size " + std::to_string(world));
    const std::size_t n = size();
    if (n == 0) return {0, 0, 1};
    switch (policy) {
        case rank_share_policy::pad: {
            const std::size_t per = (n + world - 1) / world;
            return {rank * per, per, n};
        }
        case rank_share_policy::drop: {
            const std::size_t per = n / world;
            return {rank * per, per, n};
        }
        case rank_share_policy::uneven: break;
    }
    const std::size_t base = n / world, extra = n % world;
    return {rank * base + std::min(rank, extra), base + (rank < extra ? 1 : 0), n};
}

}  // namespace shardpack

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "shardpack::sample::label_index16 and raw-record views assume a little-endian host"
#endif
