// libFuzzer target: bytes -> a shard file, read the way a training job and `shardpack verify`
// read it.
//
// Input: one flags byte (fuzz_common.hpp, shard_input_flags: recompute the record checksums and
// then the header/index checksum, so that mutations get past them; open without record
// checksums), then the shard's bytes. The shard is written into a dataset folder on tmpfs with
// a manifest that matches it (name, size, record count, hashes), then:
//   1. detail::shard_file opens it (header, sections, trailer, index) and every index entry is
//      checked against the file, as the open promises;
//   2. dataset::open, and for every record at(), read(), image(), label() / label_index16(),
//      key(), one_hot(), read_into() into every kind of buffer, read_batch(), rank shares: the
//      checksum, zstd decompression and parse_record() of the reader's load();
//   3. verify_dataset() on the folder.
// Only shardpack::error may come out of the reader; any other exception, a sanitizer report or
// a broken invariant is a finding.
#include <zstd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <typeinfo>
#include <vector>

#include "fuzz_common.hpp"
#include "inspect/dataset_verifier.hpp"
#include "shardpack/reader.hpp"

using namespace shardpack;
using shardpack::fuzz::finding;

namespace {

// Buffers handed to read_into are sized by this harness; beyond this many elements it skips
// the float copies (the record itself may legitimately be larger).
constexpr std::size_t max_buffer_elements = std::size_t(1) << 22;

volatile std::uint64_t sink;  // keeps reads of every byte from being optimised away

template <class T>
std::uint64_t touch(const tensor_view<T>& v) {
    std::uint64_t s = 0;
    for (std::size_t i = 0; i < v.size(); ++i) s += v[i];
    return s;
}

// What zstd really makes of the stored bytes, by streaming (no size taken from any header), up
// to `cap` bytes; -1 when zstd refuses them or they make more than that.
long long zstd_streamed_size(const unsigned char* p, std::size_t n, std::size_t cap) {
    static ZSTD_DStream* ds = ZSTD_createDStream();
    ZSTD_initDStream(ds);
    static std::vector<unsigned char> chunk(1 << 16);
    ZSTD_inBuffer in{p, n, 0};
    std::size_t total = 0, r = 0;
    for (;;) {
        ZSTD_outBuffer out{chunk.data(), chunk.size(), 0};
        r = ZSTD_decompressStream(ds, &out, &in);
        if (ZSTD_isError(r)) return -1;
        total += out.pos;
        if (total > cap) return -1;
        if (in.pos == in.size && out.pos < out.size) break;  // all read, all flushed
    }
    return r == 0 ? static_cast<long long>(total) : -1;  // r != 0: the last frame is cut short
}

void check_shard_invariants(const detail::shard_file& shard) {
    // The open promises that no later offset can point outside the file.
    const std::uint64_t size = shard.size();
    for (std::size_t i = 0; i < shard.record_count(); ++i) {
        const auto e = shard.entry(i);
        if (e.offset > size || e.stored_size > size - e.offset || e.offset + e.stored_size > shard.index_offset())
            finding("shard_file accepted record " + std::to_string(i) + " outside the record area");
        if (e.decoded_size > detail::max_record_bytes) finding("shard_file accepted an impossible decoded size");
        // The reader refuses a record whose frames cannot hold decoded_size before allocating;
        // that bound must never be below what zstd really decompresses.
        if (e.codec == detail::codec_zstd) {
            const unsigned char* stored = shard.bytes() + e.offset;
            const auto n = static_cast<std::size_t>(e.stored_size);
            const long long real = zstd_streamed_size(stored, n, std::size_t(64) << 20);
            if (real >= 0 && std::uint64_t(real) > detail::zstd_decoded_bound(stored, n))
                finding("zstd_decoded_bound is below the real decompressed size " + std::to_string(real));
        }
    }
    if (shard.classes().size() != shard.schema().class_count) finding("class table and schema disagree");
}

void read_record(const dataset& ds, std::size_t i, read_context& ctx) {
    const schema_info& schema = ds.schema();
    const sample s = ds.at(i);
    const std::size_t h = s.height(), w = s.width(), pixels = h * w;
    if (h == 0 || w == 0 || h > detail::max_side || w > detail::max_side) finding("sample with an impossible size");
    if (schema.fixed_height && (h != schema.fixed_height || w != schema.fixed_width)) finding("size differs from the schema");
    const auto image = s.image();
    if (image.size() != pixels * schema.channels) finding("image view of the wrong size");
    std::uint64_t acc = touch(image);
    const std::string_view key = s.key();
    for (char c : key) acc += static_cast<unsigned char>(c);
    const std::size_t k = schema.class_count;
    if (schema.task == task::classification) {
        if (s.class_id() < 0 || std::size_t(s.class_id()) >= k) finding("class id out of range");
        if (s.label().size() != 0) finding("classification sample with a label view");
    } else {
        if (s.class_id() != -1) finding("segmentation sample with a class id");
        if (schema.layout == label_layout::index && schema.label_value_bytes == 2) {
            try {
                (void)s.label();
                finding("label() on a uint16 index map did not throw");
            } catch (const shardpack::error&) {
            }
            const auto lab = s.label_index16();
            if (lab.size() != pixels) finding("label_index16 view of the wrong size");
            acc += touch(lab);
        } else {
            const auto lab = s.label();
            if (lab.size() != pixels * (schema.layout == label_layout::one_hot ? k : 1)) finding("label view of the wrong size");
            acc += touch(lab);
        }
    }
    const std::size_t one_hot_n = schema.task == task::classification ? k : pixels * k;
    if (one_hot_n <= max_buffer_elements) {
        const auto oh = s.one_hot();
        if (oh.size() != one_hot_n) finding("one_hot() of the wrong size");
        for (auto v : oh) acc += v;
    }

    // read() into the context's buffer, then read_into every kind of buffer.
    const sample r = ds.read(i, ctx);
    if (r.height() != h || r.width() != w || r.key() != key) finding("read() and at() disagree");
    const std::size_t image_n = pixels * schema.channels;
    if (image_n <= max_buffer_elements && one_hot_n <= max_buffer_elements) {
        std::vector<std::uint8_t> img_u8(image_n), lab_u8(one_hot_n);
        std::vector<float> img_f32(image_n), lab_f32(one_hot_n);
        std::vector<std::uint16_t> lab_index(pixels);
        std::int32_t cls = -2;
        sample_buffers out;
        out.image_u8 = img_u8.data();
        out.image_f32 = img_f32.data();
        out.image_capacity = image_n;
        out.norm = normalization::imagenet();
        out.label_u8 = lab_u8.data();
        out.label_f32 = lab_f32.data();
        out.label_capacity = one_hot_n;
        if (schema.task == task::segmentation) {
            out.label_index = lab_index.data();
            out.label_index_capacity = pixels;
        }
        out.class_id = &cls;
        ds.read_into(i, out, ctx);
        if (cls != s.class_id()) finding("read_into wrote another class id");
        if (std::memcmp(img_u8.data(), image.data(), image_n) != 0) finding("read_into's image differs from at()'s");
        for (std::size_t j = 0; j < one_hot_n; ++j)
            if (float(lab_u8[j]) != lab_f32[j]) finding("u8 and f32 one-hot labels differ");
        // Too small a buffer must be refused, not overrun.
        sample_buffers small;
        std::vector<std::uint8_t> tiny(image_n);
        small.image_u8 = tiny.data();
        small.image_capacity = image_n - 1;
        try {
            ds.read_into(i, small, ctx);
            finding("read_into accepted an image buffer one element short");
        } catch (const shardpack::error&) {
        }
    }
    sink = sink + acc;
}

void read_dataset(const dataset& ds) {
    read_context ctx;
    for (std::size_t i = 0; i < ds.size(); ++i) {
        try {
            read_record(ds, i, ctx);
        } catch (const shardpack::error&) {
            // a damaged record: refused, and the next one may still be fine
        }
    }
    // A batch has one size: the fixed size, or (records of varying size) its first record's,
    // from its header (record_size); then every slot is filled in turn.
    const schema_info& schema = ds.schema();
    const std::size_t idx[2] = {ds.size() - 1, 0};
    std::size_t height = schema.fixed_height, width = schema.fixed_width;
    if (ds.size() >= 2 && !height) {
        try {
            std::tie(height, width) = ds.record_size(idx[0], ctx);
        } catch (const shardpack::error&) {
        }
    }
    if (ds.size() >= 2 && height) {
        const std::size_t image_n = height * width * schema.channels;
        if (2 * image_n <= max_buffer_elements) {
            std::vector<std::uint8_t> img(2 * image_n);
            std::int32_t cls[2];
            sample_buffers out;
            out.image_u8 = img.data();
            out.image_capacity = img.size();
            out.class_id = cls;
            try {
                ds.read_batch(idx, 2, out, ctx);
            } catch (const shardpack::error&) {
            }
        }
    }
    try {
        (void)ds.at(ds.size());
        finding("at(size()) did not throw");
    } catch (const shardpack::error&) {
    }
    for (std::size_t world : {1, 3, 7})
        for (auto policy : {rank_share_policy::pad, rank_share_policy::drop, rank_share_policy::uneven}) {
            const auto p = ds.rank_share(world - 1, world, policy);
            for (std::size_t j = 0; j < p.size(); ++j)
                if (ds.size() && p[j] >= ds.size()) finding("rank share index out of range");
        }
}

std::string last_shard;  // the previous input's shard file, removed before the next is written

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned flags = data[0];
    std::vector<unsigned char> bytes(data + 1, data + size);
    if (flags & fuzz::fix_records) fuzz::fix_record_checksums(bytes);
    if (flags & fuzz::fix_header) fuzz::fix_header_checksum(bytes);

    static const std::string dir = [] {
        const std::string d = fuzz::scratch_dir("shard") + "/ds";
        fuzz::fs::create_directories(d);
        return d;
    }();
    const std::uint64_t file_hash = XXH3_64bits(bytes.data(), bytes.size());
    const std::string name = "shard-00000-" + detail::hex16(file_hash) + ".spk";
    const std::string path = dir + "/" + name;
    if (!last_shard.empty()) ::unlink(last_shard.c_str());
    last_shard = path;
    fuzz::put_file(path, bytes.data(), bytes.size());

    try {
        std::size_t records = 0;
        {
            const detail::shard_file shard(path, name);
            check_shard_invariants(shard);
            records = shard.record_count();
        }
        unsigned char h[8];
        detail::store_u64(h, file_hash);
        const std::string manifest =
            "{\"format\": \"shardpack\", \"format_version\": \"1.0\", \"records\": " + std::to_string(records) +
            ", \"content_hash\": \"" + detail::hex16(XXH3_64bits(h, 8)) + "\", \"shards\": [{\"file\": \"" + name +
            "\", \"records\": " + std::to_string(records) + ", \"first_record\": 0, \"bytes\": " +
            std::to_string(bytes.size()) + ", \"xxh3\": \"" + detail::hex16(file_hash) + "\"}]}";
        fuzz::put_file(dir + "/manifest.json", manifest);

        open_options options;
        options.verify_checksums = (flags & fuzz::no_verify) == 0;
        const dataset ds = dataset::open(dir, options);
        if (ds.size() != records || ds.shard_count() != 1) finding("dataset and shard disagree on the record count");
        read_dataset(ds);
    } catch (const shardpack::error&) {
        return 0;  // refused: what a damaged shard should get
    } catch (const std::exception& e) {
        finding(std::string("the reader threw ") + typeid(e).name() + ": " + e.what());
    }

    try {
        const verify_result v = verify_dataset(dir);
        sink = sink + v.records_checked + v.problems.size();
    } catch (const std::exception& e) {
        finding(std::string("verify_dataset threw ") + typeid(e).name() + ": " + e.what());
    }
    return 0;
}
