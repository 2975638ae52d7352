// bench_read: how close the header-only reader comes to bare zstd on the same dataset.
//
//   bench_read DATASET [--threads N] [--passes P | --seconds S] [--seed S] [--verify on|off]
//                      [--image u8|f32] [--label u8|f32|index|index_u8|none] [--min-time S]
//                      [--breakdown on|off] [--check on|off] [--modes NAME,NAME,...]
//                      [--io auto|mmap|pread]
//
// Every mode reads the records in the SAME seeded random permutation of the dataset's indices:
//   reader_1t          1 thread, dataset::read_into into caller-owned buffers, one reused
//                      read_context (the allocation-free training path); checksums per --verify
//                      (default on);
//   reader_1t_nocheck  the same with open_options::verify_checksums = false;
//   reader_nt          N threads (default: all cores), one read_context and buffers each, each
//                      thread a contiguous share of the permutation; checksums per --verify;
//   zstd_1t            the limit: ZSTD_decompressDCtx of the very same stored frames (found through
//                      the shard index) into one reused buffer, same order; a raw record counts
//                      as a memcpy of its bytes;
//   zstd_nt            the same on N threads.
// With --breakdown on, also (1 thread, same order), to split reader_1t's cost:
//   xxh3_1t            XXH3-64 of each record's stored bytes only (the checksum's cost);
//   zstd_copy_1t       zstd_1t + copying the image and label regions into the caller's buffers;
//   manual_1t          xxh3 + zstd + the copies: what read_into does, written out by hand;
//   reader_view_1t     dataset::read(i, ctx): the zero-copy view into the context's buffer
//                      (checksums per --verify), i.e. read_into without the copy-out.
// Selectable with --modes only:
//   zstd_stream_1t     an experiment: ZSTD_decompressStream writing the image and label regions
//                      straight into the caller's buffers (header and padding into scratch);
//   split_frames_1t    a format experiment: every record recompressed (at the build's level) as
//                      concatenated frames cut at the image and label boundaries, read as a
//                      reader could: XXH3 of the stored bytes, then each frame decompressed
//                      straight into its destination (no copy-out); one-hot labels only;
//   split_zstd_1t      the same recompressed bytes in one ZSTD_decompressDCtx call into one
//                      buffer (split_frames_1t's bare-zstd baseline).
// --modes picks modes by name (in that order; for profiling one mode alone); ratios are given
// for the pairs that ran.
//
// read_into fills: per --image, image_u8 (H*W*C as stored, the default; image_u16 for a uint16
// dataset, format 1.4) or image_f32 (normalised
// with normalization::imagenet()); per --label, label_u8 (one-hot uint8, the default: H*W*K for
// segmentation, K for classification), label_f32 (the same as float), label_index (uint16 H*W,
// segmentation only), label_index_u8 (uint8 H*W, segmentation datasets of at most 255 classes:
// for labels stored as uint8 class ids, the stored form, which the reader decompresses straight
// into the caller's buffer, so the read is the codec's cost alone) or nothing; class_id always.
// Buffers are sized once for the largest record.
// The zstd and breakdown modes always copy uint8 (they show the floor, not the conversions).
//
// One measurement of a mode = `loops` traversals of the permutation, loops chosen once (from a
// warm-up traversal of reader_1t) so that a measurement lasts at least --min-time seconds
// (default 0.2). A round measures every mode once, in an order rotated by one each round; the
// machine is noisy, so there are --passes rounds (default 5), or rounds until --seconds have
// passed (at least 3), and the JSON gives per-mode medians (and the best), plus the ratios
// reader/zstd both as the ratio of the medians and as the median of the per-round ratios.
//
// gb_per_s counts decoded record bytes (the index's decoded_size: header, key, image and label,
// padding included) for every mode, so gb_per_s ratios equal samples_per_s ratios;
// delivered_gb_per_s (reader modes) counts the bytes read_into writes into the caller's buffers.
// GB = 1e9 bytes. Every untimed warm-up traversal also faults the shards into memory, so the
// figures are for a dataset in the page cache.
//
// --io picks open_options::io for the reader modes (default auto); the zstd and breakdown modes
// always read the stored frames through a mapping.
//
// --check on (default) first compares, for every record, what read_into delivers with the
// bytes bare zstd decodes (image, one-hot label when stored one-hot and read as u8, uint8 class
// ids when stored so and read as index_u8, class id).
//
// Output: one JSON line on stdout; logs on stderr. Exit 0; 1 on a read error or a --check
// mismatch; 2 on bad usage.
#include <time.h>
#include <zstd.h>

#include <algorithm>
#include <iterator>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bare_zstd.hpp"
#include "bench_common.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "shardpack/reader.hpp"

namespace {

using shardpack::bench::clock_type;
namespace bench = shardpack::bench;
using shardpack::detail::json;

const char* const usage_text =
    "usage: bench_read DATASET [--threads N] [--passes P | --seconds S] [--seed S] [--verify on|off]\n"
    "                  [--image u8|f32] [--label u8|f32|index|index_u8|none] [--min-time S] [--breakdown on|off] [--check on|off]\n"
    "                  [--modes reader_1t,zstd_1t,reader_1t_nocheck,reader_nt,zstd_nt,reader_view_1t,xxh3_1t,\n"
    "                           zstd_copy_1t,manual_1t,zstd_stream_1t,split_frames_1t,split_zstd_1t]\n"
    "                  [--io auto|mmap|pread]\n";

[[noreturn]] void usage(const std::string& why) {
    if (!why.empty()) std::fprintf(stderr, "bench_read: %s\n", why.c_str());
    std::fputs(usage_text, stderr);
    std::exit(2);
}

enum class label_mode { u8, f32, index, index_u8, none };

// --label's values: the option's word, and what the JSON calls the output.
struct label_choice {
    const char* word;
    label_mode mode;
    const char* output;
};
constexpr label_choice label_choices[] = {{"u8", label_mode::u8, "u8 one-hot"},
                                          {"f32", label_mode::f32, "f32 one-hot"},
                                          {"index", label_mode::index, "uint16 index"},
                                          {"index_u8", label_mode::index_u8, "uint8 index"},
                                          {"none", label_mode::none, "none"}};

struct options {
    std::string dataset;
    unsigned threads = 0;
    unsigned passes = 5;
    double seconds = 0;  // > 0: rounds until this much time has passed
    std::uint64_t seed = 1;
    bool verify = true;
    label_mode label = label_mode::u8;
    bool image_f32 = false;
    double min_time = 0.2;
    bool breakdown = false;
    shardpack::io_mode io = shardpack::io_mode::automatic;
    bool check = true;
    std::vector<std::string> modes;  // empty: the default set
};

options parse_args(int argc, char** argv) {
    options o;
    bool have_passes = false;
    for (bench::arg_walker args(argc, argv, usage); args.next();) {
        const std::string& a = args.arg();
        auto value = [&] { return args.value(); };
        if (a == "--threads") o.threads = unsigned(args.uint_value(0, 4096));
        else if (a == "--passes") { o.passes = unsigned(args.uint_value(1, 100000)); have_passes = true; }
        else if (a == "--seconds") o.seconds = args.seconds_value();
        else if (a == "--seed") o.seed = args.uint_value(0);
        else if (a == "--verify") o.verify = args.on_off_value();
        else if (a == "--breakdown") o.breakdown = args.on_off_value();
        else if (a == "--check") o.check = args.on_off_value();
        else if (a == "--min-time") o.min_time = args.seconds_value();
        else if (a == "--modes") {
            const std::string v = value();
            std::size_t at = 0;
            while (at <= v.size()) {
                const std::size_t comma = std::min(v.find(',', at), v.size());
                if (comma == at) usage("--modes needs a comma-separated list of mode names");
                const std::string name = v.substr(at, comma - at);
                static const char* const known[] = {"reader_1t", "zstd_1t",  "reader_1t_nocheck", "reader_nt",
                                                    "zstd_nt",   "xxh3_1t", "zstd_copy_1t",      "manual_1t", "zstd_stream_1t", "reader_view_1t",
                                                    "split_frames_1t", "split_zstd_1t"};
                if (std::find(std::begin(known), std::end(known), name) == std::end(known))
                    usage("unknown mode \"" + name + "\" in --modes");
                o.modes.push_back(name);
                at = comma + 1;
            }
        }
        else if (a == "--label") {
            const std::string v = value();
            const label_choice* c = std::find_if(std::begin(label_choices), std::end(label_choices),
                                                 [&](const label_choice& l) { return v == l.word; });
            if (c == std::end(label_choices)) usage("--label is u8, f32, index, index_u8 or none, not \"" + v + "\"");
            o.label = c->mode;
        } else if (a == "--image") {
            const std::string v = value();
            if (v == "u8") o.image_f32 = false;
            else if (v == "f32") o.image_f32 = true;
            else usage("--image is u8 or f32, not \"" + v + "\"");
        } else if (a == "--io") {
            const std::string v = value();
            if (v == "auto") o.io = shardpack::io_mode::automatic;
            else if (v == "mmap") o.io = shardpack::io_mode::mmap;
            else if (v == "pread") o.io = shardpack::io_mode::pread;
            else usage("--io is auto, mmap or pread, not \"" + v + "\"");
        } else if (a == "-h" || a == "--help") {
            std::fputs(usage_text, stderr);
            std::exit(2);
        } else if (!a.empty() && a[0] == '-') usage("unknown option \"" + a + "\"");
        else if (o.dataset.empty()) o.dataset = a;
        else usage("more than one DATASET given (\"" + o.dataset + "\", \"" + a + "\")");
    }
    if (o.dataset.empty()) usage("DATASET is required");
    if (have_passes && o.seconds > 0) usage("--passes and --seconds exclude each other");
    if (o.threads == 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
    return o;
}

// One record's stored bytes, as the index locates them, and its checksum.
struct stored_record : shardpack::bench::stored_frames {
    std::uint64_t checksum = 0;
};
using shardpack::bench::bare_decode;

struct zstd_dctx_deleter {
    void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};
using dctx_ptr = std::unique_ptr<ZSTD_DCtx, zstd_dctx_deleter>;

// Per-thread state, reused across every measurement.
struct worker_state {
    shardpack::read_context ctx;
    std::vector<std::uint8_t> image, label_u8;
    std::vector<std::uint16_t> image16;  // uint16 datasets (format 1.4): the images as stored
    std::vector<std::uint16_t> label_index;
    std::vector<std::uint8_t> label_index_u8;
    std::vector<float> image_f32, label_f32;
    std::int32_t class_id = 0;
    shardpack::sample_buffers out;
    dctx_ptr dctx{ZSTD_createDCtx()};
    std::vector<unsigned char> zbuf;
    std::uint64_t sink = 0;  // folds in a byte of every result, so nothing is optimised away
};

}  // namespace

int main(int argc, char** argv) {
    const options o = parse_args(argc, argv);
    try {
        shardpack::open_options with_check, without_check;
        with_check.verify_checksums = true;
        without_check.verify_checksums = false;
        with_check.io = without_check.io = o.io;
        // The stored frames for the zstd modes, in place: a mapping whatever --io says.
        shardpack::open_options mapped;
        mapped.io = shardpack::io_mode::mmap;
        mapped.max_open_shards = shardpack::open_options::all_shards;  // holds pointers into every shard
        const auto ds_frames = shardpack::dataset::open(o.dataset, mapped);
        const auto ds_check = shardpack::dataset::open(o.dataset, with_check);
        const auto ds_nocheck = shardpack::dataset::open(o.dataset, without_check);
        const auto& ds_main = o.verify ? ds_check : ds_nocheck;
        const auto& info = ds_check.schema();
        const bool seg = info.task == shardpack::task::segmentation;
        // The bare zstd and manual paths lay records out themselves, without per-sample fields.
        if (!ds_check.fields().empty() &&
            (o.check || o.modes.empty() ||
             std::any_of(o.modes.begin(), o.modes.end(), [](const std::string& m) { return m.rfind("reader", 0) != 0; })))
            usage("a dataset with per-sample fields (format 1.5) is read with --check off and reader_* modes only");
        if ((o.label == label_mode::index || o.label == label_mode::index_u8) && !seg)
            usage("--label index and index_u8 are for segmentation datasets");
        if (o.label == label_mode::index_u8 && info.class_count > 255)
            usage("--label index_u8 is for datasets of at most 255 classes (this one has " +
                  std::to_string(info.class_count) + ")");

        // The stored frames, through the shard index, and the dataset's facts.
        const std::size_t n = ds_check.size();
        if (n == 0) throw std::runtime_error(o.dataset + ": holds no records");
        std::vector<stored_record> recs;
        recs.reserve(n);
        std::uint64_t stored_bytes = 0, decoded_bytes = 0, file_bytes = 0;
        std::size_t zstd_records = 0, max_decoded = 0;
        for (std::size_t k = 0; k < ds_check.shard_count(); ++k) {
            const auto& shard = ds_frames.shard(k);
            file_bytes += shard.size();
            for (std::size_t i = 0; i < shard.record_count(); ++i) {
                const auto e = shard.entry(i);
                stored_record r;
                r.data = shard.bytes() + e.offset;
                r.stored = std::size_t(e.stored_size);
                r.decoded = std::size_t(e.decoded_size);
                r.codec = e.codec;
                r.checksum = e.checksum;
                recs.push_back(r);
                stored_bytes += r.stored;
                decoded_bytes += r.decoded;
                zstd_records += r.codec != shardpack::detail::codec_raw;
                max_decoded = std::max(max_decoded, r.decoded);
            }
        }
        if (recs.size() != n) throw std::runtime_error("the shard indexes list " + std::to_string(recs.size()) +
                                                       " records, the dataset " + std::to_string(n));

        // Buffer sizes: the largest image and label any record has.
        std::size_t max_pixels = 0;
        if (info.fixed_height) {
            max_pixels = info.fixed_height * info.fixed_width;
        } else {
            shardpack::read_context ctx;
            for (std::size_t i = 0; i < n; ++i) {
                const auto s = ds_nocheck.read(i, ctx);
                max_pixels = std::max(max_pixels, s.height() * s.width());
            }
        }
        const std::size_t k_classes = info.class_count;
        const std::size_t image_cap = max_pixels * info.channels;
        const bool wide = info.image_value_bytes == 2;
        const std::size_t one_hot_cap = seg ? max_pixels * k_classes : k_classes;
        const std::size_t label_u8_cap = o.label == label_mode::u8 ? one_hot_cap : 0;
        const std::size_t label_f32_cap = o.label == label_mode::f32 ? one_hot_cap : 0;
        const std::size_t label_index_cap = o.label == label_mode::index ? max_pixels : 0;
        const std::size_t label_index_u8_cap = o.label == label_mode::index_u8 ? max_pixels : 0;

        const unsigned nt = o.threads;
        std::vector<std::unique_ptr<worker_state>> workers;
        for (unsigned t = 0; t < std::max(nt, 1u); ++t) {
            auto w = std::make_unique<worker_state>();
            if (!w->dctx) throw std::runtime_error("cannot create a zstd context");
            w->ctx.reserve(max_decoded);
            w->zbuf.resize(max_decoded);
            w->image.resize(image_cap * info.image_value_bytes);  // the zstd modes copy the stored bytes
            w->label_u8.resize(label_u8_cap);
            w->label_index.resize(label_index_cap);
            w->label_index_u8.resize(label_index_u8_cap);
            w->image_f32.resize(o.image_f32 ? image_cap : 0);
            w->label_f32.resize(label_f32_cap);
            if (o.image_f32) {
                w->out.image_f32 = w->image_f32.data();
                w->out.norm = shardpack::normalization::imagenet();
            } else if (wide) {  // --image u8 of a uint16 dataset: its images as stored, uint16
                w->image16.resize(image_cap);
                w->out.image_u16 = w->image16.data();
            } else {
                w->out.image_u8 = w->image.data();
            }
            w->out.image_capacity = image_cap;
            if (label_f32_cap) {
                w->out.label_f32 = w->label_f32.data();
                w->out.label_capacity = label_f32_cap;
            }
            if (label_u8_cap) {
                w->out.label_u8 = w->label_u8.data();
                w->out.label_capacity = label_u8_cap;
            }
            if (label_index_cap) {
                w->out.label_index = w->label_index.data();
                w->out.label_index_capacity = label_index_cap;
            }
            if (label_index_u8_cap) {
                w->out.label_index_u8 = w->label_index_u8.data();
                w->out.label_index_capacity = label_index_u8_cap;
            }
            w->out.class_id = &w->class_id;
            workers.push_back(std::move(w));
        }

        // The permutation every mode follows.
        std::vector<std::size_t> perm(n);
        std::iota(perm.begin(), perm.end(), std::size_t(0));
        std::mt19937_64 rng(o.seed);
        for (std::size_t i = n; i > 1; --i) std::swap(perm[i - 1], perm[std::size_t(rng() % i)]);

        // Bytes read_into delivers for record i (layout from the record's own header).
        auto delivered = [&](const shardpack::sample& s) {
            const std::size_t px = s.height() * s.width();
            std::size_t b = px * info.channels * (o.image_f32 ? sizeof(float) : info.image_value_bytes) + sizeof(std::int32_t);
            if (o.label == label_mode::u8) b += seg ? px * k_classes : k_classes;
            if (o.label == label_mode::f32) b += (seg ? px * k_classes : k_classes) * sizeof(float);
            if (o.label == label_mode::index) b += px * 2;
            if (o.label == label_mode::index_u8) b += px;
            return b;
        };
        std::uint64_t delivered_bytes = 0;
        {
            shardpack::read_context ctx;
            for (std::size_t i = 0; i < n; ++i) delivered_bytes += delivered(ds_nocheck.read(i, ctx));
        }

        // Optional cross-check: read_into delivers exactly the bytes bare zstd decodes.
        if (o.check) {
            auto& w = *workers[0];
            for (std::size_t i = 0; i < n; ++i) {
                const auto& r = recs[i];
                const unsigned char* rec = r.data;
                if (r.codec != shardpack::detail::codec_raw) {
                    bare_decode(w.dctx.get(), r, ds_frames.shard(0).schema(), w.zbuf.data(), i);
                    rec = w.zbuf.data();
                }
                const auto lay = shardpack::detail::parse_record(ds_frames.shard(0).schema(), rec, r.decoded);
                ds_check.read_into(i, w.out, w.ctx);
                const void* image = wide ? static_cast<const void*>(w.image16.data()) : w.image.data();
                bool ok = o.image_f32 || std::memcmp(image, rec + lay.image_offset, lay.image_bytes) == 0;
                ok = ok && w.class_id == lay.class_id;
                if (seg && o.label == label_mode::u8 && info.layout == shardpack::label_layout::one_hot)
                    ok = ok && std::memcmp(w.label_u8.data(), rec + lay.label_offset, lay.label_bytes) == 0;
                if (seg && o.label == label_mode::index_u8 && info.layout == shardpack::label_layout::index &&
                    lay.label_bytes == std::size_t(lay.height) * lay.width)
                    ok = ok && std::memcmp(w.label_index_u8.data(), rec + lay.label_offset, lay.label_bytes) == 0;
                if (!ok) {
                    std::fprintf(stderr, "bench_read: record %zu: read_into and bare zstd disagree\n", i);
                    return 1;
                }
            }
            std::fprintf(stderr, "bench_read: check: read_into matches bare zstd on all %zu records\n", n);
        }

        // The work of each mode on one slice of the permutation, `loops` times.
        struct mode {
            std::string name;
            bool multi;
            std::function<void(worker_state&, const std::size_t*, std::size_t)> run;
            bool reader;
            std::vector<double> rates, seconds, cpu_rates;  // cpu_rates: samples per CPU-second
        };

        auto reader_fn = [&](const shardpack::dataset& ds) {
            return [&ds](worker_state& w, const std::size_t* idx, std::size_t count) {
                for (std::size_t j = 0; j < count; ++j) {
                    ds.read_into(idx[j], w.out, w.ctx);
                    w.sink += w.out.image_u8 ? w.out.image_u8[0]
                            : w.out.image_u16 ? w.out.image_u16[0] : std::uint64_t(w.out.image_f32[0] != 0.0f);
                }
            };
        };
        const shardpack::detail::schema_record bare_schema = ds_frames.shard(0).schema();
        auto zstd_one = [&recs, bare_schema](worker_state& w, std::size_t i) -> const unsigned char* {
            bare_decode(w.dctx.get(), recs[i], bare_schema, w.zbuf.data(), i);
            return w.zbuf.data();
        };
        const shardpack::detail::schema_record schema = ds_frames.shard(0).schema();
        // Copies out what read_into would (image, and a one-hot label stored one-hot).
        auto copy_out = [&, schema](worker_state& w, const unsigned char* rec, std::size_t decoded) {
            const auto lay = shardpack::detail::parse_record(schema, rec, decoded);
            std::memcpy(w.image.data(), rec + lay.image_offset, lay.image_bytes);
            if (!w.label_u8.empty() && lay.label_bytes) std::memcpy(w.label_u8.data(), rec + lay.label_offset, lay.label_bytes);
            w.class_id = lay.class_id;
            w.sink += w.image[0];
        };

        // Experimental: the streaming decoder writes each region of the record straight into its
        // destination (header and padding into scratch, image and label into the caller's
        // buffers), so the copy-out reads blocks still in cache instead of the whole record.
        auto stream_out = [](worker_state& w, const shardpack::detail::schema_record& sc, const stored_record& r,
                             std::size_t i) {
            if (r.codec == shardpack::detail::codec_zstd_bands || r.codec == shardpack::detail::codec_zstd_region_bands) {  // band frames: their own experiment
                bare_decode(w.dctx.get(), r, sc, w.zbuf.data(), i);
                const auto lay = shardpack::detail::parse_record(sc, w.zbuf.data(), r.decoded);
                std::memcpy(w.image.data(), w.zbuf.data() + lay.image_offset, lay.image_bytes);
                w.sink += w.image[0];
                return;
            }
            if (r.codec != shardpack::detail::codec_zstd) {
                const auto lay = shardpack::detail::parse_record(sc, r.data, r.decoded);
                std::memcpy(w.image.data(), r.data + lay.image_offset, lay.image_bytes);
                if (!w.label_u8.empty() && lay.label_bytes) std::memcpy(w.label_u8.data(), r.data + lay.label_offset, lay.label_bytes);
                w.sink += w.image[0];
                return;
            }
            ZSTD_DCtx_reset(w.dctx.get(), ZSTD_reset_session_only);
            ZSTD_inBuffer in{r.data, r.stored, 0};
            std::size_t produced = 0;
            auto segment = [&](void* dst, std::size_t bytes) {
                ZSTD_outBuffer out{dst, bytes, 0};
                while (out.pos < out.size) {
                    const std::size_t ret = ZSTD_decompressStream(w.dctx.get(), &out, &in);
                    if (ZSTD_isError(ret)) throw std::runtime_error("record " + std::to_string(i) + ": zstd: " + ZSTD_getErrorName(ret));
                    if (ret == 0 && out.pos < out.size) throw std::runtime_error("record " + std::to_string(i) + ": frame ends early");
                }
                produced += bytes;
            };
            unsigned char head[64];
            segment(head, shardpack::detail::record_header_size);
            const std::uint32_t key_length = shardpack::detail::load_u32(head + 12);
            const auto lay = shardpack::detail::make_record_layout(sc, shardpack::detail::load_u32(head),
                                                                   shardpack::detail::load_u32(head + 4),
                                                                   static_cast<std::int32_t>(shardpack::detail::load_u32(head + 8)), key_length);
            if (lay.total_bytes != r.decoded) throw std::runtime_error("record " + std::to_string(i) + ": size mismatch");
            w.zbuf.resize(std::max<std::size_t>(w.zbuf.size(), lay.image_offset));
            segment(w.zbuf.data(), std::size_t(lay.image_offset) - produced);
            segment(w.image.data(), std::size_t(lay.image_bytes));
            if (lay.label_bytes) {
                segment(w.zbuf.data(), std::size_t(lay.label_offset) - produced);
                segment(w.label_u8.empty() ? w.zbuf.data() : w.label_u8.data(), std::size_t(lay.label_bytes));
            }
            w.sink += w.image[0];
        };
        // Experimental (--modes split_frames_1t): each zstd record recompressed, at the build's
        // level, as concatenated frames cut at the image and label boundaries, so that each
        // region decompresses straight into its destination. Built only when selected.
        struct split_record {
            std::vector<unsigned char> bytes;          // the concatenated frames
            std::vector<std::size_t> frame_end, content;  // per frame: end offset in bytes, decoded size
            std::uint64_t checksum = 0;
        };
        std::vector<split_record> split;
        std::uint64_t split_stored = 0, single_stored = 0;
        const bool want_split = std::find(o.modes.begin(), o.modes.end(), "split_frames_1t") != o.modes.end() ||
                                std::find(o.modes.begin(), o.modes.end(), "split_zstd_1t") != o.modes.end();
        if (want_split) {
            int level = 3;
            if (const auto* b = ds_check.manifest().find("build"))
                if (const auto* l = b->find("level")) level = int(l->as_i64());
            std::unique_ptr<ZSTD_CCtx, decltype(&ZSTD_freeCCtx)> cctx(ZSTD_createCCtx(), &ZSTD_freeCCtx);
            ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_compressionLevel, level);
            ZSTD_CCtx_setParameter(cctx.get(), ZSTD_c_contentSizeFlag, 1);
            auto& w = *workers[0];
            split.resize(n);
            for (std::size_t i = 0; i < n; ++i) {
                const auto& r = recs[i];
                const unsigned char* rec = r.data;
                if (r.codec != shardpack::detail::codec_raw) {
                    bare_decode(w.dctx.get(), r, schema, w.zbuf.data(), i);
                    rec = w.zbuf.data();
                }
                const auto lay = shardpack::detail::parse_record(schema, rec, r.decoded);
                const std::size_t cuts[] = {0, std::size_t(lay.image_offset), std::size_t(lay.image_offset + lay.image_bytes),
                                            std::size_t(lay.label_offset), r.decoded};
                auto& sr = split[i];
                for (int f = 0; f < 4; ++f) {
                    const std::size_t len = cuts[f + 1] - cuts[f];
                    if (len == 0) continue;
                    const std::size_t at = sr.bytes.size();
                    sr.bytes.resize(at + ZSTD_compressBound(len));
                    const std::size_t c = ZSTD_compress2(cctx.get(), sr.bytes.data() + at, ZSTD_compressBound(len), rec + cuts[f], len);
                    if (ZSTD_isError(c)) throw std::runtime_error("recompression failed");
                    sr.bytes.resize(at + c);
                    sr.frame_end.push_back(at + c);
                    sr.content.push_back(len);
                }
                sr.checksum = XXH3_64bits(sr.bytes.data(), sr.bytes.size());
                split_stored += sr.bytes.size();
                single_stored += r.stored;
            }
            std::fprintf(stderr, "bench_read: split frames: %llu stored bytes vs %llu as single frames (%+.2f%%)\n",
                         static_cast<unsigned long long>(split_stored), static_cast<unsigned long long>(single_stored),
                         100.0 * (double(split_stored) / double(single_stored) - 1));
        }
        // Reads a split record as a reader would: checksum, then frame by frame into place.
        auto split_out = [&split, &recs, schema](worker_state& w, std::size_t i) {
            const auto& sr = split[i];
            if (XXH3_64bits(sr.bytes.data(), sr.bytes.size()) != sr.checksum) throw std::runtime_error("checksum mismatch");
            // Frame 0 (header, key, padding) into scratch; then the layout says where the rest goes.
            std::size_t got = ZSTD_decompressDCtx(w.dctx.get(), w.zbuf.data(), sr.content[0], sr.bytes.data(), sr.frame_end[0]);
            if (ZSTD_isError(got) || got != sr.content[0]) throw std::runtime_error("zstd failed");
            const std::uint32_t key_length = shardpack::detail::load_u32(w.zbuf.data() + 12);
            const auto lay = shardpack::detail::make_record_layout(
                schema, shardpack::detail::load_u32(w.zbuf.data()), shardpack::detail::load_u32(w.zbuf.data() + 4),
                static_cast<std::int32_t>(shardpack::detail::load_u32(w.zbuf.data() + 8)), key_length);
            if (lay.total_bytes != recs[i].decoded) throw std::runtime_error("size mismatch");
            for (std::size_t f = 1; f < sr.content.size(); ++f) {
                unsigned char* dst = w.zbuf.data();  // padding frames
                if (sr.content[f] == lay.image_bytes && f == 1) dst = w.image.data();
                else if (f + 1 == sr.content.size() && lay.label_bytes && sr.content[f] == lay.label_bytes && !w.label_u8.empty())
                    dst = w.label_u8.data();
                got = ZSTD_decompressDCtx(w.dctx.get(), dst, sr.content[f], sr.bytes.data() + sr.frame_end[f - 1],
                                          sr.frame_end[f] - sr.frame_end[f - 1]);
                if (ZSTD_isError(got) || got != sr.content[f]) throw std::runtime_error("zstd failed");
            }
            w.class_id = lay.class_id;
            w.sink += w.image[0];
        };
        if (want_split && o.check) {
            // split_out must deliver exactly what read_into does.
            auto& w = *workers[0];
            std::vector<std::uint8_t> image_ref(image_cap), label_ref(label_u8_cap);
            for (std::size_t i = 0; i < n; ++i) {
                ds_check.read_into(i, w.out, w.ctx);
                image_ref = w.image;
                label_ref = w.label_u8;
                split_out(w, i);
                const bool same_label = !(seg && info.layout == shardpack::label_layout::one_hot && !w.label_u8.empty()) ||
                                        label_ref == w.label_u8;
                if (image_ref != w.image || !same_label) {
                    std::fprintf(stderr, "bench_read: record %zu: split frames disagree with read_into\n", i);
                    return 1;
                }
            }
            std::fprintf(stderr, "bench_read: check: split frames match read_into on all %zu records\n", n);
        }
        // The same frames decompressed in one call into one buffer (the baseline for split_out).
        auto split_single = [&split, &recs](worker_state& w, std::size_t i) {
            const auto& sr = split[i];
            const std::size_t got = ZSTD_decompressDCtx(w.dctx.get(), w.zbuf.data(), recs[i].decoded, sr.bytes.data(), sr.bytes.size());
            if (ZSTD_isError(got) || got != recs[i].decoded) throw std::runtime_error("zstd failed");
            w.sink += w.zbuf[0];
        };
        std::vector<mode> modes;
        modes.push_back({"reader_1t", false, reader_fn(ds_main), true, {}, {}, {}});
        modes.push_back({"zstd_1t", false,
                         [&](worker_state& w, const std::size_t* idx, std::size_t count) {
                             for (std::size_t j = 0; j < count; ++j) w.sink += zstd_one(w, idx[j])[0];
                         },
                         false, {}, {}, {}});
        modes.push_back({"reader_1t_nocheck", false, reader_fn(ds_nocheck), true, {}, {}, {}});
        modes.push_back({"reader_view_1t", false,
                         [&](worker_state& w, const std::size_t* idx, std::size_t count) {
                             for (std::size_t j = 0; j < count; ++j) {
                                 const auto s = ds_main.read(idx[j], w.ctx);
                                 w.sink += s.image()[0];
                             }
                         },
                         true, {}, {}, {}});
        modes.push_back({"reader_nt", true, reader_fn(ds_main), true, {}, {}, {}});
        modes.push_back({"zstd_nt", true, modes[1].run, false, {}, {}, {}});
        {
            modes.push_back({"xxh3_1t", false,
                             [&](worker_state& w, const std::size_t* idx, std::size_t count) {
                                 for (std::size_t j = 0; j < count; ++j)
                                     w.sink += XXH3_64bits(recs[idx[j]].data, recs[idx[j]].stored);
                             },
                             false, {}, {}, {}});
            modes.push_back({"zstd_copy_1t", false,
                             [&](worker_state& w, const std::size_t* idx, std::size_t count) {
                                 for (std::size_t j = 0; j < count; ++j)
                                     copy_out(w, zstd_one(w, idx[j]), recs[idx[j]].decoded);
                             },
                             false, {}, {}, {}});
            modes.push_back({"zstd_stream_1t", false,
                             [&, schema](worker_state& w, const std::size_t* idx, std::size_t count) {
                                 for (std::size_t j = 0; j < count; ++j) stream_out(w, schema, recs[idx[j]], idx[j]);
                             },
                             false, {}, {}, {}});
            modes.push_back({"split_frames_1t", false,
                             [&](worker_state& w, const std::size_t* idx, std::size_t count) {
                                 for (std::size_t j = 0; j < count; ++j) split_out(w, idx[j]);
                             },
                             true, {}, {}, {}});
            modes.push_back({"split_zstd_1t", false,
                             [&](worker_state& w, const std::size_t* idx, std::size_t count) {
                                 for (std::size_t j = 0; j < count; ++j) split_single(w, idx[j]);
                             },
                             false, {}, {}, {}});
            modes.push_back({"manual_1t", false,
                             [&](worker_state& w, const std::size_t* idx, std::size_t count) {
                                 for (std::size_t j = 0; j < count; ++j) {
                                     const auto& r = recs[idx[j]];
                                     if (XXH3_64bits(r.data, r.stored) != r.checksum)
                                         throw std::runtime_error("record " + std::to_string(idx[j]) + ": checksum mismatch");
                                     copy_out(w, zstd_one(w, idx[j]), r.decoded);
                                 }
                             },
                             false, {}, {}, {}});
        }
        {
            std::vector<std::string> wanted = o.modes;
            if (wanted.empty()) {
                wanted = {"reader_1t", "zstd_1t", "reader_1t_nocheck", "reader_nt", "zstd_nt"};
                if (o.breakdown) wanted.insert(wanted.end(), {"reader_view_1t", "xxh3_1t", "zstd_copy_1t", "manual_1t"});
            }
            std::vector<mode> chosen;
            for (const auto& name : wanted) {
                auto it = std::find_if(modes.begin(), modes.end(), [&](const mode& m) { return m.name == name; });
                if (it == modes.end()) usage("unknown mode \"" + name + "\" in --modes");
                if (std::any_of(chosen.begin(), chosen.end(), [&](const mode& m) { return m.name == name; }))
                    usage("mode \"" + name + "\" is listed twice in --modes");
                chosen.push_back(*it);
            }
            modes = std::move(chosen);
        }
        auto find_mode = [&](const char* name) -> const mode* {
            for (const auto& m : modes)
                if (m.name == name) return &m;
            return nullptr;
        };

        // Runs one measurement: `loops` traversals, on 1 or nt threads; returns wall seconds and
        // sets cpu_s to the CPU time spent (the thread's for 1 thread, the process's for N).
        double cpu_s = 0;
        auto cpu_now = [](clockid_t id) {
            timespec ts{};
            clock_gettime(id, &ts);
            return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
        };
        auto measure = [&](const mode& m, std::size_t loops) {
            if (!m.multi) {
                const double c0 = cpu_now(CLOCK_THREAD_CPUTIME_ID);
                const auto start = clock_type::now();
                for (std::size_t l = 0; l < loops; ++l) m.run(*workers[0], perm.data(), n);
                const double s = std::chrono::duration<double>(clock_type::now() - start).count();
                cpu_s = cpu_now(CLOCK_THREAD_CPUTIME_ID) - c0;
                return s;
            }
            const double c0 = cpu_now(CLOCK_PROCESS_CPUTIME_ID);
            std::atomic<unsigned> ready{0};
            std::atomic<bool> go{false};
            std::vector<std::string> errors(nt);
            std::vector<std::thread> pool;
            for (unsigned t = 0; t < nt; ++t)
                pool.emplace_back([&, t] {
                    const std::size_t b = n * t / nt, e = n * (t + 1) / nt;
                    ++ready;
                    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
                    try {
                        for (std::size_t l = 0; l < loops; ++l) m.run(*workers[t], perm.data() + b, e - b);
                    } catch (const std::exception& ex) {
                        errors[t] = ex.what();
                    }
                });
            while (ready.load() < nt) std::this_thread::yield();
            const auto start = clock_type::now();
            go.store(true, std::memory_order_release);
            for (auto& th : pool) th.join();
            const double s = std::chrono::duration<double>(clock_type::now() - start).count();
            cpu_s = cpu_now(CLOCK_PROCESS_CPUTIME_ID) - c0;
            for (const auto& e : errors)
                if (!e.empty()) throw std::runtime_error(e);
            return s;
        };

        // Warm-up: every mode once (faults the shards in, warms contexts); calibrates loops.
        for (const auto& m : modes) measure(m, 1);
        const mode& calibrator = find_mode("reader_1t") ? *find_mode("reader_1t") : modes[0];
        const double one = measure(calibrator, 1);
        const std::size_t loops = std::max<std::size_t>(1, std::size_t(std::ceil(o.min_time / std::max(one, 1e-9))));
        std::fprintf(stderr, "bench_read: %zu records, one %s traversal %.4f s, %zu traversal(s) per measurement\n", n,
                     calibrator.name.c_str(), one, loops);

        const auto bench_start = clock_type::now();
        std::size_t rounds = 0;
        for (;;) {
            for (std::size_t j = 0; j < modes.size(); ++j) {
                mode& m = modes[(j + rounds) % modes.size()];
                const double s = measure(m, loops);
                m.seconds.push_back(s);
                m.rates.push_back(double(n * loops) / s);
                m.cpu_rates.push_back(double(n * loops) / std::max(cpu_s, 1e-9));
            }
            ++rounds;
            const double elapsed = std::chrono::duration<double>(clock_type::now() - bench_start).count();
            std::string line = "bench_read: round " + std::to_string(rounds) + ":";
            for (const auto& m : modes)
                line += " " + m.name + " " + bench::fixed(m.rates.back(), 1) + "/s (" + bench::fixed(m.cpu_rates.back(), 1) + "/cpu-s)";
            std::fprintf(stderr, "%s\n", line.c_str());
            if (o.seconds > 0 ? (rounds >= 3 && elapsed >= o.seconds) : rounds >= o.passes) break;
        }

        std::uint64_t sink = 0;
        for (const auto& w : workers) sink += w->sink;

        const double samples = double(n * loops);
        std::string js = "{\"tool\":\"bench_read\",\"dataset\":{";
        js += "\"path\":" + json(o.dataset).dump(-1);
        js += ",\"records\":" + std::to_string(n) + ",\"shards\":" + std::to_string(ds_check.shard_count());
        js += ",\"file_bytes\":" + std::to_string(file_bytes) + ",\"stored_bytes\":" + std::to_string(stored_bytes);
        js += ",\"decoded_bytes\":" + std::to_string(decoded_bytes);
        js += ",\"delivered_bytes\":" + std::to_string(delivered_bytes);
        js += ",\"ratio\":" + bench::fixed(double(decoded_bytes) / double(stored_bytes), 3);
        js += ",\"zstd_records\":" + std::to_string(zstd_records) + ",\"raw_records\":" + std::to_string(n - zstd_records);
        js += std::string(",\"task\":\"") + (seg ? "segmentation" : "classification") + "\"";
        const char* layout = info.layout == shardpack::label_layout::one_hot ? "one_hot"
                           : info.layout == shardpack::label_layout::index ? "index" : "class_id";
        js += std::string(",\"label_layout\":\"") + layout + "\",\"classes\":" + std::to_string(k_classes);
        const std::string h = info.fixed_height ? std::to_string(info.fixed_height) : "null";
        const std::string wd = info.fixed_width ? std::to_string(info.fixed_width) : "null";
        js += ",\"image_shape\":[" + h + "," + wd + "," + std::to_string(info.channels) + "]";
        if (!seg) js += ",\"label_shape\":[]";
        else if (info.layout == shardpack::label_layout::one_hot) js += ",\"label_shape\":[" + h + "," + wd + "," + std::to_string(k_classes) + "]";
        else js += ",\"label_shape\":[" + h + "," + wd + ",1],\"label_bytes_per_value\":" + std::to_string(info.label_value_bytes);
        js += "}";
        const char* label_name = std::find_if(std::begin(label_choices), std::end(label_choices),
                                              [&](const label_choice& l) { return l.mode == o.label; })->output;
        js += ",\"threads\":" + std::to_string(nt) + ",\"seed\":" + std::to_string(o.seed);
        js += std::string(",\"verify_checksums\":") + (o.verify ? "true" : "false");
        js += std::string(",\"read_into_image\":\"") + (o.image_f32 ? "f32 imagenet-normalised" : wide ? "u16" : "u8") + "\"";
        js += std::string(",\"read_into_label\":\"") + label_name + "\"";
        js += ",\"rounds\":" + std::to_string(rounds) + ",\"traversals_per_measurement\":" + std::to_string(loops);
        js += ",\"gb_basis\":\"record decoded bytes (index decoded_size); delivered_gb_per_s: bytes written to caller buffers\"";
        js += ",\"modes\":{";
        for (std::size_t j = 0; j < modes.size(); ++j) {
            const mode& m = modes[j];
            const double rate = bench::median(m.rates);
            const double best = *std::max_element(m.rates.begin(), m.rates.end());
            const double per_sample_decoded = double(decoded_bytes) / double(n);
            if (j) js += ",";
            js += "\"" + m.name + "\":{\"samples\":" + std::to_string(std::uint64_t(samples));
            js += ",\"threads\":" + std::to_string(m.multi ? nt : 1u);
            js += ",\"seconds\":" + bench::fixed(bench::median(m.seconds), 6);
            js += ",\"samples_per_s\":" + bench::fixed(rate, 2) + ",\"samples_per_s_best\":" + bench::fixed(best, 2);
            js += ",\"gb_per_s\":" + bench::fixed(rate * per_sample_decoded / 1e9, 4);
            js += ",\"samples_per_cpu_s\":" + bench::fixed(bench::median(m.cpu_rates), 2);
            if (m.reader) js += ",\"delivered_gb_per_s\":" + bench::fixed(rate * double(delivered_bytes) / double(n) / 1e9, 4);
            js += "}";
        }
        js += "}";
        // Ratios of samples/s between two modes, where both ran.
        std::string ratios;
        auto ratio = [&](const char* a_name, const char* b_name) {
            const mode* a = find_mode(a_name);
            const mode* b = find_mode(b_name);
            if (!a || !b) return;
            std::vector<double> per_round, per_round_cpu;
            for (std::size_t r = 0; r < rounds; ++r) {
                per_round.push_back(a->rates[r] / b->rates[r]);
                per_round_cpu.push_back(a->cpu_rates[r] / b->cpu_rates[r]);
            }
            ratios += std::string(ratios.empty() ? "" : ",") + "\"" + a_name + "/" + b_name + "\":{\"of_medians\":" +
                      bench::fixed(bench::median(a->rates) / bench::median(b->rates), 4) + ",\"median_of_rounds\":" + bench::fixed(bench::median(per_round), 4) +
                      ",\"cpu_time\":" + bench::fixed(bench::median(per_round_cpu), 4) + "}";
        };
        ratio("reader_1t", "zstd_1t");
        ratio("reader_1t_nocheck", "zstd_1t");
        ratio("reader_nt", "zstd_nt");
        ratio("reader_1t", "manual_1t");
        ratio("zstd_copy_1t", "zstd_1t");
        ratio("manual_1t", "zstd_1t");
        ratio("reader_1t", "reader_1t_nocheck");
        ratio("reader_view_1t", "zstd_1t");
        ratio("reader_1t", "reader_view_1t");
        ratio("zstd_stream_1t", "zstd_1t");
        ratio("split_frames_1t", "zstd_1t");
        ratio("split_frames_1t", "split_zstd_1t");
        ratio("split_zstd_1t", "zstd_1t");
        ratio("zstd_stream_1t", "zstd_copy_1t");
        js += ",\"ratios\":{" + ratios + "}";
        if (find_mode("reader_1t") && find_mode("zstd_1t")) {
            const double r = bench::median(find_mode("reader_1t")->rates) / bench::median(find_mode("zstd_1t")->rates);
            js += ",\"target\":{\"reader_1t/zstd_1t\":0.85,\"met\":";
            js += r >= 0.85 ? "true}" : "false}";
        }
        js += "}";
        std::printf("%s\n", js.c_str());
        std::fprintf(stderr, "bench_read: (sink %llu)\n", static_cast<unsigned long long>(sink & 0xff));
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_read: %s\n", e.what());
        return 1;
    }
}
