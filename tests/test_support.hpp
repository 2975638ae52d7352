// Helpers shared by the tests: temporary folders and small datasets written through the real
// writer, so that tests exercise the same bytes the CLI produces.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "dataset/dataset_writer.hpp"
#include "format/record_compressor.hpp"
#include "format/record_encoder.hpp"
#include "image.hpp"

namespace shardpack::test {

// A fresh folder under the system temp dir, removed when the object dies.
class temp_dir {
public:
    explicit temp_dir(const std::string& tag = "t") {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::temp_directory_path() /
                ("shardpack-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    std::string str() const { return path_.string(); }
    std::string operator/(const std::string& name) const { return (path_ / name).string(); }

private:
    std::filesystem::path path_;
};

inline std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

// The result of running a program: its exit code (128 + signal when killed) and its output.
struct cli_result {
    int code = -1;
    std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// Runs `program` with `args` (no shell expansion of them), stdin from /dev/null, under a
// 120 s time limit so that a hang fails the test instead of stalling the suite (exit 124).
inline cli_result run_command(const std::string& program, const std::vector<std::string>& args) {
    static std::atomic<int> counter{0};
    const std::string base = std::filesystem::temp_directory_path().string() + "/shardpack-run-" +
                             std::to_string(::getpid()) + "-" + std::to_string(counter++);
    std::string cmd = "timeout 120 " + shell_quote(program);
    for (const auto& a : args) cmd += " " + shell_quote(a);
    cmd += " >" + base + ".out 2>" + base + ".err </dev/null";
    const int status = std::system(cmd.c_str());
    cli_result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = read_file(base + ".out");
    r.err = read_file(base + ".err");
    std::error_code ec;
    std::filesystem::remove(base + ".out", ec);
    std::filesystem::remove(base + ".err", ec);
    return r;
}

inline void write_file(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A deterministic sample: an image of `w`x`h` pixels and a label id map over `classes`.
struct synthetic_sample {
    std::string key;
    image_u8 image;
    std::vector<std::uint16_t> ids;
    std::int32_t class_id = -1;
};

inline synthetic_sample make_sample(std::uint32_t index, std::uint32_t w, std::uint32_t h, std::uint32_t channels,
                                    std::uint32_t classes, bool segmentation) {
    synthetic_sample s;
    s.key = "images/img_" + std::to_string(index) + ".png";
    s.image.width = w;
    s.image.height = h;
    s.image.channels = channels;
    s.image.pixels.resize(std::size_t(w) * h * channels);
    std::mt19937 rng(index * 7919u + 1);
    for (std::size_t i = 0; i < s.image.pixels.size(); ++i)
        s.image.pixels[i] = static_cast<std::uint8_t>((i / channels % w) * 3 + index + (rng() % 4));
    if (segmentation) {
        s.ids.resize(std::size_t(w) * h);
        for (std::uint32_t y = 0; y < h; ++y)
            for (std::uint32_t x = 0; x < w; ++x) s.ids[y * w + x] = static_cast<std::uint16_t>((x / 3 + y / 5 + index) % classes);
    } else {
        s.class_id = static_cast<std::int32_t>(index % classes);
    }
    return s;
}

struct synthetic_options {
    std::uint32_t records = 10;
    std::uint32_t width = 16, height = 12, channels = 3, classes = 4;
    bool segmentation = true;
    detail::layout_code layout = detail::layout_code::one_hot;
    record_codec codec = record_codec::zstd;
    std::uint32_t band_rows = 0;  // codec 2 band height; 0: the writer's default
    std::uint32_t label_band_rows = 0;  // codec 3 label band height; 0: chosen from the data
    std::uint64_t shard_size = std::uint64_t(1) << 30;
    std::vector<extra_section> extra;
    std::size_t shard_table_above = dataset_writer_options{}.shard_table_above;  // 0: always a binary shard table
};

inline detail::schema_record synthetic_schema(const synthetic_options& o) {
    detail::schema_record s;
    s.task = o.segmentation ? detail::task_code::segmentation : detail::task_code::classification;
    s.channels = static_cast<std::uint8_t>(o.channels);
    s.channel_order = o.channels == 1 ? detail::order_code::gray : o.channels == 3 ? detail::order_code::rgb : detail::order_code::rgba;
    s.label_layout = o.segmentation ? o.layout : detail::layout_code::class_id;
    s.label_dtype_bytes = !o.segmentation ? 0 : (o.layout == detail::layout_code::index && o.classes > 255) ? 2 : 1;
    s.fixed_height = o.height;
    s.fixed_width = o.width;
    s.class_count = o.classes;
    s.ignore_value = o.classes > 255 ? 65535 : 255;
    return s;
}

// Writes a dataset of synthetic samples into `dir` and returns the samples written.
inline std::vector<synthetic_sample> write_synthetic(const std::string& dir, const synthetic_options& o) {
    dataset_writer_options wo;
    wo.out_dir = dir;
    wo.shard_size = o.shard_size;
    wo.schema = synthetic_schema(o);
    for (std::uint32_t c = 0; c < o.classes; ++c)
        wo.classes.push_back({"class" + std::to_string(c), o.segmentation, std::uint8_t(c), std::uint8_t(c * 2), std::uint8_t(c * 3)});
    wo.uses_zstd = uses_record_frames(o.codec);
    wo.uses_bands = uses_band_frames(o.codec);
    wo.uses_region_bands = record_compressor(o.codec, 3, wo.schema, o.band_rows, o.label_band_rows).per_region();
    wo.input_digest = "0000000000000000";
    wo.extra_sections = o.extra;
    wo.shard_table_above = o.shard_table_above;
    dataset_writer writer(wo);
    record_compressor compressor(o.codec, 3, wo.schema, o.band_rows, o.label_band_rows);
    std::vector<synthetic_sample> samples;
    std::vector<unsigned char> decoded;
    stored_record stored;
    for (std::uint32_t i = 0; i < o.records; ++i) {
        samples.push_back(make_sample(i, o.width, o.height, o.channels, o.classes, o.segmentation));
        const auto& s = samples.back();
        encode_record(wo.schema, s.key, s.image, s.ids.empty() ? nullptr : s.ids.data(), s.class_id, decoded);
        compressor.compress(decoded, stored);
        writer.add(stored);
    }
    writer.publish();
    return samples;
}

// The single shard file of a dataset folder.
inline std::string only_shard(const std::string& dir) {
    std::string found;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".spk") found = e.path().string();
    return found;
}

}  // namespace shardpack::test
