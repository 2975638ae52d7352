// Helpers shared by the tests, in one place (a newcomer looks here before writing one again):
// temporary folders and files; running the CLI and the sample-data tool (at once, as a child
// to signal, or bounded in time and memory); LD_PRELOAD of the fault shims; synthetic datasets
// written through the real writer, so that tests exercise the same bytes the CLI produces;
// the spec's hex dumps.
#pragma once
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>
#include <utility>
#include <cerrno>
#include <cstdlib>
#include <cstring>
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
#include "decode/image_decoder.hpp"
#include "image.hpp"

namespace shardpack::test {

// Removes `path` and all it holds; never throws. (Unlinking in inode order, as coreutils' rm
// does, was tried for test_shard_table's 400,000 files and was no faster here: 54-59 s against
// 36-63 s side by side on a loaded disk. That test's ctest limit is what covers a slow disk.)
inline void remove_tree(const std::filesystem::path& path) {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

// A fresh folder under the system temp dir, removed when the object dies (or by remove()).
class temp_dir {
public:
    explicit temp_dir(const std::string& tag = "t") {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::temp_directory_path() /
                ("shardpack-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
        remove_tree(path_);
        std::filesystem::create_directories(path_);
    }
    temp_dir(const temp_dir&) = delete;  // one owner removes it
    temp_dir& operator=(const temp_dir&) = delete;
    ~temp_dir() {
        if (!removed_) remove_tree(path_);
    }
    // Removes the folder now and returns the seconds it took (for tests that report it).
    double remove() {
        const auto t0 = std::chrono::steady_clock::now();
        remove_tree(path_);
        removed_ = true;
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    std::string str() const { return path_.string(); }
    std::string operator/(const std::string& name) const { return (path_ / name).string(); }

    // Writes `bytes` to `rel` (creating folders) and returns the full path.
    std::string write(const std::string& rel, const std::string& bytes) const {
        const std::filesystem::path p = path_ / rel;
        std::filesystem::create_directories(p.parent_path());
        std::ofstream out(p, std::ios::binary | std::ios::trunc);
        out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        return p.string();
    }
    // A file that is not an image, for tests of lists and folders that never decode it.
    std::string touch(const std::string& rel) const { return write(rel, "not really an image"); }

private:
    std::filesystem::path path_;
    bool removed_ = false;
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

#ifdef SHARDPACK_CLI
// The shardpack CLI built with the tests, run to completion (see run_command).
inline cli_result cli(const std::vector<std::string>& args) { return run_command(SHARDPACK_CLI, args); }
#endif

#ifdef SHARDPACK_SAMPLE_TOOL
// tools/make_sample_data --out DIR EXTRA...: images, masks, list.csv and class_dict.csv.
inline void make_samples(const std::string& dir, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--out", dir};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_command(SHARDPACK_SAMPLE_TOOL, args);
    INFO(r.err);
    REQUIRE(r.code == 0);
}

// A temporary folder with make_sample_data's segmentation set in DIR/src (`count` images of
// width x height, their masks, list.csv and class_dict.csv) and the build command line over it,
// with the options all of a test file's builds share: the fixture of the merge, rebuild and
// ownership tests.
struct sample_fixture {
    temp_dir dir;
    std::string src;
    std::vector<std::string> shared_options;
    sample_fixture(const std::string& tag, int count, int width, int height, std::vector<std::string> options)
        : dir(tag), src(dir / "src"), shared_options(std::move(options)) {
        make_samples(src, {"--count", std::to_string(count), "--width", std::to_string(width), "--height", std::to_string(height)});
    }
    // build --csv SRC/list.csv --classes SRC/class_dict.csv --out OUT, the shared options, `extra`.
    std::vector<std::string> build_args(const std::string& out, const std::vector<std::string>& extra = {}) const {
        std::vector<std::string> a = {"build", "--csv", src + "/list.csv", "--classes", src + "/class_dict.csv", "--out", out};
        a.insert(a.end(), shared_options.begin(), shared_options.end());
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
};
#endif

// Sanitized builds (scripts/test.sh's ASan run) take more memory and time for the same work:
// shadow memory, the free quarantine, the leak check at exit. Limits in tests scale by this.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr long sanitizer_factor = 4;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr long sanitizer_factor = 4;
#else
inline constexpr long sanitizer_factor = 1;
#endif
#else
inline constexpr long sanitizer_factor = 1;
#endif

// The ASan runtime this process was linked against when it is a shared library (GCC's
// -fsanitize=address; clang links it statically), else "". The CLI child is built the same way,
// and ASan insists on coming first in the initial library list: an LD_PRELOAD must name it
// before any other library ("ASan runtime does not come first in initial library list").
inline std::string shared_asan_runtime() {
    std::string found;
    ::dl_iterate_phdr(
        [](dl_phdr_info* info, std::size_t, void* data) {
            const std::string name = info->dlpi_name ? info->dlpi_name : "";
            if (name.find("/libasan.so") != std::string::npos) {
                *static_cast<std::string*>(data) = name;
                return 1;
            }
            return 0;
        },
        &found);
    return found;
}

// "LD_PRELOAD=..." for an environment that loads `shim` (a tests/fault_inject library) into a
// child, after the shared ASan runtime when there is one.
inline std::string preload(const std::string& shim) {
    const std::string asan = shared_asan_runtime();
    return "LD_PRELOAD=" + (asan.empty() ? "" : asan + ":") + shim;
}

#ifdef SHARDPACK_CLI
// A CLI child started by spawn_cli: its pid and the files holding its output, removed with
// the object.
struct cli_child {
    pid_t pid = -1;
    std::string out, err;
    cli_child() = default;
    cli_child(cli_child&& other) noexcept
        : pid(other.pid), out(std::exchange(other.out, {})), err(std::exchange(other.err, {})) {}
    ~cli_child() {
        std::error_code ec;
        if (!out.empty()) std::filesystem::remove(out, ec);
        if (!err.empty()) std::filesystem::remove(err, ec);
    }
};

// Starts the CLI with `args` (to signal or run beside another); `env` entries ("NAME=value")
// are added to its environment. The Slurm array variables are removed, so that a test run
// inside a Slurm job does not make every build a part (build --partition slurm reads them).
inline cli_child spawn_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    static std::atomic<int> counter{0};
    cli_child c;
    const std::string base = std::filesystem::temp_directory_path().string() + "/shardpack-cli-" +
                             std::to_string(::getpid()) + "-" + std::to_string(counter++);
    c.out = base + ".out";
    c.err = base + ".err";
    std::fflush(stdout);  // or the child would write the parent's buffered output again
    std::fflush(stderr);
    c.pid = ::fork();
    REQUIRE(c.pid >= 0);
    if (c.pid == 0) {
        std::freopen(c.out.c_str(), "w", stdout);
        std::freopen(c.err.c_str(), "w", stderr);
        for (const char* v : {"SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_MAX",
                              "SLURM_ARRAY_TASK_STEP"})
            ::unsetenv(v);
        for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
        std::vector<char*> argv{const_cast<char*>(SHARDPACK_CLI)};
        for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        ::execv(SHARDPACK_CLI, argv.data());
        std::_Exit(127);
    }
    return c;
}

// Waits; returns the exit code, or 128 + the signal that killed it.
inline int wait_for(const cli_child& c) {
    int status = 0;
    ::waitpid(c.pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// The CLI run to completion with extra environment entries (run_command passes none).
inline cli_result run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    const cli_child c = spawn_cli(args, env);
    cli_result r;
    r.code = wait_for(c);
    r.out = read_file(c.out);
    r.err = read_file(c.err);
    return r;
}
#endif

// A run under a wall-clock limit, with its peak RSS.
struct bounded_result {
    int code = -1;
    bool timed_out = false;
    double seconds = 0;
    long max_rss_kib = 0;
    std::string out, err;
    double after_signal_s = -1;  // with signal_after_s: how long the child took to exit after it
};

struct bounded_options {
    double limit_s = 20;          // then SIGKILL: a hang shows as timed_out, it does not stall the suite
    double signal_after_s = -1;   // >= 0: SIGTERM after that many seconds
    bool keep_stdout = true;      // false: stdout to /dev/null
    std::function<int()> body;    // with program empty: run this in the forked child, its result the exit code
};

// Runs `program args` (or `o.body` in a forked child) with stdin from /dev/null, killing it
// after o.limit_s; peak RSS from wait4.
inline bounded_result run_bounded(const std::string& program, const std::vector<std::string>& args,
                                  const bounded_options& o = {}) {
    static std::atomic<int> counter{0};
    const std::string base = std::filesystem::temp_directory_path().string() + "/shardpack-bounded-" +
                             std::to_string(::getpid()) + "-" + std::to_string(counter++);
    using clock = std::chrono::steady_clock;
    std::fflush(stdout);
    std::fflush(stderr);
    const auto start = clock::now();
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        const int in = ::open("/dev/null", O_RDONLY);
        const int out = o.keep_stdout ? ::open((base + ".out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644)
                                      : ::open("/dev/null", O_WRONLY);
        const int err = ::open((base + ".err").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        ::dup2(in, 0);
        ::dup2(out, 1);
        ::dup2(err, 2);
        if (!program.empty()) {
            std::vector<char*> argv;
            argv.push_back(const_cast<char*>(program.c_str()));
            for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
            argv.push_back(nullptr);
            ::execv(program.c_str(), argv.data());
            ::_exit(127);
        }
        ::_exit(o.body ? o.body() : 127);
    }
    bounded_result r;
    int status = 0;
    rusage usage{};
    bool signalled = false;
    clock::time_point signal_at;
    for (;;) {
        if (::wait4(pid, &status, WNOHANG, &usage) == pid) break;
        const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
        if (o.signal_after_s >= 0 && !signalled && elapsed >= o.signal_after_s) {
            ::kill(pid, SIGTERM);
            signalled = true;
            signal_at = clock::now();
        }
        if (elapsed > o.limit_s) {
            ::kill(pid, SIGKILL);
            ::wait4(pid, &status, 0, &usage);
            r.timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const auto end = clock::now();
    r.seconds = std::chrono::duration<double>(end - start).count();
    if (signalled) r.after_signal_s = std::chrono::duration<double>(end - signal_at).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.max_rss_kib = usage.ru_maxrss;
    if (o.keep_stdout) r.out = read_file(base + ".out");
    r.err = read_file(base + ".err");
    std::error_code ec;
    std::filesystem::remove(base + ".out", ec);
    std::filesystem::remove(base + ".err", ec);
    return r;
}

// An RGB pixel as one number, 0xRRGGBB (for comparing and counting colors).
inline std::uint32_t pack_rgb(const std::uint8_t* p) { return std::uint32_t(p[0]) << 16 | std::uint32_t(p[1]) << 8 | p[2]; }

// A file decoded as the CLI would (sniffed, PNG or JPEG) into `layout`.
inline image_u8 decode_file(const std::string& path, pixel_layout layout = pixel_layout::rgb) {
    const std::string bytes = read_file(path);
    decode_request req;
    req.layout = layout;
    return decode_image(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), req);
}

// The bytes of a hex dump as the spec and tests/golden print them: each line an offset, then
// hex bytes; empty lines and lines starting with '#' are comments.
inline std::string parse_hex_dump(const std::string& text) {
    std::string out;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty() || line[0] == '#') continue;
        std::istringstream words(line);
        std::string word;
        words >> word;  // the offset
        while (words >> word) out += static_cast<char>(std::stoi(word, nullptr, 16));
    }
    return out;
}

// A hex dump in the format parse_hex_dump reads (tests/golden/*.hex): an offset, 16 bytes a line.
inline std::string hex_dump(const std::string& bytes) {
    std::string out;
    char buf[16];
    for (std::size_t i = 0; i < bytes.size(); i += 16) {
        std::snprintf(buf, sizeof buf, "%08zx ", i);
        out += buf;
        for (std::size_t j = i; j < std::min(bytes.size(), i + 16); ++j) {
            std::snprintf(buf, sizeof buf, " %02x", static_cast<unsigned char>(bytes[j]));
            out += buf;
        }
        out += '\n';
    }
    return out;
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
    std::vector<std::string> class_names;  // empty: class0, class1, ...
    bool varied_sizes = false;             // odd records 4 pixels wider and 2 higher: no fixed size
    std::uint32_t ignore_every = 0;        // segmentation: every n-th pixel ignored (0: none)
    bool fixed_size = true;  // false: the schema fixes no size, as a build without --size writes
    std::vector<std::uint32_t> heights;  // when not empty: record i's height (else `height`)
};

inline detail::schema_record synthetic_schema(const synthetic_options& o) {
    detail::schema_record s;
    s.task = o.segmentation ? detail::task_code::segmentation : detail::task_code::classification;
    s.channels = static_cast<std::uint8_t>(o.channels);
    s.channel_order = o.channels == 1 ? detail::order_code::gray : o.channels == 3 ? detail::order_code::rgb : detail::order_code::rgba;
    s.label_layout = o.segmentation ? o.layout : detail::layout_code::class_id;
    s.label_dtype_bytes = !o.segmentation ? 0 : (o.layout == detail::layout_code::index && o.classes > 255) ? 2 : 1;
    s.fixed_height = o.varied_sizes || !o.fixed_size ? 0 : o.height;
    s.fixed_width = o.varied_sizes || !o.fixed_size ? 0 : o.width;
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
        wo.classes.push_back({o.class_names.empty() ? "class" + std::to_string(c) : o.class_names.at(c), o.segmentation, std::uint8_t(c), std::uint8_t(c * 2), std::uint8_t(c * 3)});
    wo.codec = record_compressor(o.codec, 3, wo.schema, o.band_rows, o.label_band_rows).stored_codec();
    wo.input_digest = "0000000000000000";
    wo.extra_sections = o.extra;
    wo.shard_table_above = o.shard_table_above;
    dataset_writer writer(wo);
    record_compressor compressor(o.codec, 3, wo.schema, o.band_rows, o.label_band_rows);
    std::vector<synthetic_sample> samples;
    std::vector<unsigned char> decoded;
    stored_record stored;
    for (std::uint32_t i = 0; i < o.records; ++i) {
        const std::uint32_t wider = o.varied_sizes && i % 2 ? 4 : 0, higher = o.varied_sizes && i % 2 ? 2 : 0;
        const std::uint32_t h = i < o.heights.size() ? o.heights[i] : o.height;
        samples.push_back(make_sample(i, o.width + wider, h + higher, o.channels, o.classes, o.segmentation));
        for (std::size_t p = 0; o.ignore_every && p < samples.back().ids.size(); p += o.ignore_every)
            samples.back().ids[p] = static_cast<std::uint16_t>(wo.schema.ignore_value);
        const auto& s = samples.back();
        const auto layout = encode_record(wo.schema, s.key, s.image, s.ids.empty() ? nullptr : s.ids.data(), s.class_id, decoded);
        compressor.compress(decoded, layout, stored);
        writer.add(stored);
    }
    writer.publish();
    return samples;
}

// An image of w x h pixels of `channels` channels, each byte from mt19937(seed).
inline image_u8 random_image(std::uint32_t w, std::uint32_t h, std::uint32_t channels, std::uint32_t seed) {
    image_u8 img;
    img.width = w;
    img.height = h;
    img.channels = channels;
    img.pixels.resize(std::size_t(w) * h * channels);
    std::mt19937 rng(seed);
    for (auto& p : img.pixels) p = std::uint8_t(rng());
    return img;
}

// The writer options of the golden test vectors (spec section 16): RGB segmentation records of
// height x width with uint8 index labels, classes "bg" and "fg", 255 ignored, into `dir`.
inline dataset_writer_options golden_segmentation_options(const std::string& dir, std::uint32_t height, std::uint32_t width) {
    dataset_writer_options wo;
    wo.out_dir = dir;
    wo.schema.task = detail::task_code::segmentation;
    wo.schema.channels = 3;
    wo.schema.channel_order = detail::order_code::rgb;
    wo.schema.label_layout = detail::layout_code::index;
    wo.schema.label_dtype_bytes = 1;
    wo.schema.fixed_height = height;
    wo.schema.fixed_width = width;
    wo.schema.class_count = 2;
    wo.schema.ignore_value = 255;
    wo.classes = {{"bg", true, 0, 0, 0}, {"fg", true, 255, 0, 0}};
    wo.codec = shard_codec::raw;
    return wo;
}

// The golden tiny dataset (spec section 16, tests/golden/tiny_shard.hex): one raw 2x2 RGB
// segmentation record "a.png" with an index mask, written into `dir`. With shard_table_above 0
// its manifest lists the shard in a binary shard table (tests/golden/shard_table.hex).
inline void write_golden_tiny_dataset(const std::string& dir,
                                      std::size_t shard_table_above = dataset_writer_options{}.shard_table_above) {
    dataset_writer_options wo = golden_segmentation_options(dir, 2, 2);
    wo.shard_table_above = shard_table_above;
    dataset_writer writer(wo);
    image_u8 img{2, 2, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}};
    const std::uint16_t ids[4] = {0, 1, 255, 1};
    std::vector<unsigned char> decoded;
    encode_record(wo.schema, "a.png", img, ids, -1, decoded);
    record_compressor raw(record_codec::none, 0);
    stored_record stored;
    raw.compress(decoded, stored);
    writer.add(stored);
    writer.publish();
}

// The single shard file of a dataset folder.
inline std::string only_shard(const std::string& dir) {
    std::string found;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        if (e.path().extension() == ".spk") found = e.path().string();
    return found;
}

}  // namespace shardpack::test
