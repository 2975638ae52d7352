// Helpers shared by the libFuzzer targets and the seed generator (tests/fuzz/make_seeds.cpp):
// a per-process scratch folder on tmpfs, whole-file writes, the fixture datasets, and the
// checksum fix-up that lets mutated shards get past the header/index checksum.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "dataset/dataset_writer.hpp"
#include "format/record_compressor.hpp"
#include "format/record_encoder.hpp"
#include "shardpack/detail/endian.hpp"
#include "shardpack/detail/format.hpp"
#include "shardpack/detail/hex.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "test_support.hpp"

namespace shardpack::fuzz {

namespace fs = std::filesystem;

// Aborts (a finding for libFuzzer) with a message: for broken invariants and for exceptions
// that must not escape.
[[noreturn]] inline void finding(const std::string& what) {
    std::fprintf(stderr, "FUZZ FINDING: %s\n", what.c_str());
    std::fflush(stderr);
    std::abort();
}

// A folder for this process's files: on /dev/shm when there is one (no disk I/O per input),
// else under $TMPDIR. Removed at normal exit; scripts/fuzz.sh removes what a crash leaves.
inline const std::string& scratch_dir(const char* tag) {
    static const std::string dir = [&] {
        std::string base = "/dev/shm";
        if (::access(base.c_str(), W_OK) != 0) {
            const char* t = std::getenv("TMPDIR");
            base = t && *t ? t : "/tmp";
        }
        std::string d = base + "/shardpack-fuzz-" + tag + "-" + std::to_string(::getpid());
        std::error_code ec;
        fs::remove_all(d, ec);
        fs::create_directories(d);
        static std::string to_remove;
        to_remove = d;
        std::atexit([] {
            std::error_code ignored;
            fs::remove_all(to_remove, ignored);
        });
        return d;
    }();
    return dir;
}

// Replaces the file's bytes (plain POSIX: no iostream state to go wrong).
inline void put_file(const std::string& path, const void* data, std::size_t size) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) finding("cannot write " + path);
    const auto* p = static_cast<const unsigned char*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, p, size);
        if (n <= 0) finding("cannot write " + path);
        p += n;
        size -= std::size_t(n);
    }
    ::close(fd);
}

inline void put_file(const std::string& path, const std::string& bytes) { put_file(path, bytes.data(), bytes.size()); }

// Shard checksum fix-ups, so that mutations reach the checks behind the checksums. Each works
// from the bytes alone, with its own bounds checks, and does nothing where the layout is broken.
// Records: the XXH3-64 of each index entry's stored bytes, written into the entry.
inline void fix_record_checksums(std::vector<unsigned char>& f) {
    using namespace detail;
    const std::uint64_t size = f.size();
    if (size < fixed_header_size + trailer_size) return;
    unsigned char* t = f.data() + size - trailer_size;
    const std::uint64_t index_offset = load_u64(t), count = load_u64(t + 8);
    if (index_offset > size - trailer_size || count > (size - trailer_size - index_offset) / index_entry_size) return;
    for (std::uint64_t i = 0; i < count; ++i) {
        unsigned char* e = f.data() + index_offset + i * index_entry_size;
        const std::uint64_t offset = load_u64(e), stored = load_u64(e + 8);
        if (offset > size || stored > size - offset) continue;
        store_u64(e + 24, XXH3_64bits(f.data() + offset, static_cast<std::size_t>(stored)));
    }
}

// The trailer's checksum over the header (header_length bytes) and the index.
inline void fix_header_checksum(std::vector<unsigned char>& f) {
    using namespace detail;
    const std::uint64_t size = f.size();
    if (size < fixed_header_size + trailer_size) return;
    unsigned char* t = f.data() + size - trailer_size;
    const std::uint64_t index_offset = load_u64(t), count = load_u64(t + 8);
    const std::uint64_t header_length = load_u32(f.data() + 12);
    if (header_length > size || index_offset > size - trailer_size ||
        count > (size - trailer_size - index_offset) / index_entry_size)
        return;
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    XXH3_64bits_update(&state, f.data(), static_cast<std::size_t>(header_length));
    XXH3_64bits_update(&state, f.data() + index_offset, static_cast<std::size_t>(count * index_entry_size));
    store_u64(t + 16, XXH3_64bits_digest(&state));
}

// The first byte of a fuzz_shard input: which fix-ups to apply and how to open.
enum shard_input_flags : unsigned char {
    fix_records = 1,     // recompute every record checksum in the index
    fix_header = 2,      // then recompute the header/index checksum in the trailer
    no_verify = 4,       // open with verify_checksums = false
};

// A writer-made dataset with records of different sizes (schema without a fixed size), which
// test_support's synthetic datasets do not cover.
inline void write_variable_size(const std::string& dir, detail::layout_code layout, record_codec codec) {
    test::synthetic_options o;
    o.layout = layout;
    o.classes = 3;
    o.codec = codec;
    dataset_writer_options wo;
    wo.out_dir = dir;
    wo.schema = test::synthetic_schema(o);
    wo.schema.fixed_height = wo.schema.fixed_width = 0;
    for (std::uint32_t c = 0; c < o.classes; ++c)
        wo.classes.push_back({"c" + std::to_string(c), true, std::uint8_t(c), std::uint8_t(c * 2), std::uint8_t(c * 3)});
    wo.codec = shard_codec_for(codec, wo.schema, 0);
    wo.input_digest = "0000000000000000";
    dataset_writer writer(wo);
    record_compressor compressor(codec, 3, wo.schema);
    std::vector<unsigned char> decoded;
    stored_record stored;
    const std::uint32_t sizes[][2] = {{5, 3}, {1, 1}, {9, 2}};
    for (std::uint32_t i = 0; i < 3; ++i) {
        const auto s = test::make_sample(i, sizes[i][0], sizes[i][1], 3, o.classes, true);
        const auto layout = encode_record(wo.schema, s.key, s.image, s.ids.data(), s.class_id, decoded);
        compressor.compress(decoded, layout, stored);
        writer.add(stored);
    }
    writer.publish();
}

// The fixture datasets (deterministic: the same shard names and bytes on every run), each in
// its own folder under `root`. fuzz_manifest reads fuzzed manifests against their shards.
inline std::vector<std::string> write_fixture_datasets(const std::string& root) {
    using test::synthetic_options;
    std::vector<std::string> dirs;
    auto next = [&](const std::string& name) {
        const std::string d = root + "/" + name;
        fs::create_directories(d);
        dirs.push_back(d);
        return d;
    };
    {  // segmentation, one-hot, zstd, several shards
        synthetic_options o;
        o.records = 8;
        o.width = 16;
        o.height = 12;
        o.shard_size = 4096;  // the writer's minimum: a few records per shard
        test::write_synthetic(next("seg-onehot"), o);
    }
    {  // segmentation, uint16 index maps, RGBA, raw records, an unknown optional section
        synthetic_options o;
        o.records = 2;
        o.width = 5;
        o.height = 4;
        o.channels = 4;
        o.classes = 300;
        o.layout = detail::layout_code::index;
        o.codec = record_codec::none;
        o.extra.push_back({77, 0, {1, 2, 3, 4, 5}});
        test::write_synthetic(next("seg-index16"), o);
    }
    {  // classification, gray
        synthetic_options o;
        o.records = 3;
        o.width = 4;
        o.height = 4;
        o.channels = 1;
        o.classes = 3;
        o.segmentation = false;
        test::write_synthetic(next("cls-gray"), o);
    }
    write_variable_size(next("seg-varsize"), detail::layout_code::index, record_codec::zstd);
    write_variable_size(next("seg-varsize-record-frames"), detail::layout_code::index, record_codec::zstd_record);
    return dirs;
}

// The golden shard of tests/golden/tiny_shard.hex as bytes (a hexdump -C style listing).
inline std::vector<unsigned char> golden_shard(const std::string& hex_path) {
    std::vector<unsigned char> out;
    std::istringstream in(test::read_file(hex_path));
    std::string line;
    while (std::getline(in, line)) {
        std::istringstream words(line);
        std::string w;
        words >> w;  // the offset
        while (words >> w) {
            if (w.size() != 2 || !std::isxdigit(static_cast<unsigned char>(w[0])) ||
                !std::isxdigit(static_cast<unsigned char>(w[1])))
                break;  // an ASCII column, if any
            out.push_back(static_cast<unsigned char>(std::stoul(w, nullptr, 16)));
        }
    }
    return out;
}

}  // namespace shardpack::fuzz
