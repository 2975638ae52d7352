// bench_decode: the "bare decode floor". Decodes every image and mask a CSV lists, fully, to
// 8-bit pixels, as a training loop that reads the source files would have to; the figure to
// compare a shardpack reader against.
//
//   bench_decode --csv LIST [--root DIR] [--threads N (0: all cores)] [--passes P] [--png libpng|fast]
//                [--color rgb|gray|rgba] [--header|--no-header]
//                [--size WxH [--resize none|stretch|shorter|fit] [--crop center|topleft|none]
//                 [--filter area|bilinear|lanczos]]
//
// The CSV (RFC 4180, read with the packer's own parser) has the image path in its first column
// and the label in the second: a mask image when the cell ends in .png/.jpg/.jpeg (any case),
// else a class name or id (not decoded). Relative paths resolve against --root, by default the
// CSV's folder. The header row is detected as the packer does it in the simple case: the first
// row is a header when its image cell is not an existing file (--header/--no-header force it).
//
// Every distinct file is read into memory ONCE before any timing; the timed part is decoding
// alone (no file I/O, no page cache). Decoding:
//   - images to --color (default rgb), masks to rgb (what the packer maps colors from);
//   - PNG: libpng's row API (png_read_row; expand palette/low bit depths/tRNS, strip 16, strip
//     or add alpha, gray to rgb) through the packer's decode_png_libpng, every row, to IEND.
//     --png fast uses the packer's own decode_png (libdeflate fast path, libpng fallback);
//   - JPEG: libjpeg-turbo, jpeg_read_scanlines, full size (no DCT scaling, no early stop),
//     ISLOW IDCT and fancy upsampling (the packer's decode_jpeg with a default request).
// With --size (and the geometry options, as `shardpack build` takes them), every file is decoded
// as the packer decodes it for that build instead: its own decoders (the fast PNG path, as with
// --png fast), inflate stopped after the last row the geometry needs, and a classification JPEG
// (a row without a mask) that will be downscaled decoded at the packer's DCT scale; masks to rgb
// with the same row limit (a color mask, as the packer's mask mapper decodes it). That is the
// floor of a pack job: the decoding it cannot avoid, and nothing else.
// N threads (default: all cores) take samples from one atomic counter; each thread reuses its
// own output buffers. Each of P passes (default 3) decodes every sample once; the JSON gives
// the best and the median pass, in wall-clock seconds and in CPU seconds of the process
// (cpu_seconds_*: the decoding threads' time, file reading excluded).
//
// Output: one JSON line on stdout. decoded_bytes = width*height*channels of every decoded image
// and mask in one pass; mb_per_s = decoded_bytes / seconds_best / 1e6; input_bytes = the
// compressed file bytes decoded in one pass. Logs go to stderr. Exit 0, 1 on a data error
// (unreadable or undecodable file), 2 on bad usage.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "decode/image_decoder.hpp"
#include "decode/jpeg_decoder.hpp"
#include "decode/png_decoder.hpp"
#include "decode/sniff.hpp"
#include "image.hpp"
#include "input/csv_reader.hpp"
#include "pipeline/sample_transformer.hpp"
#include "transform/geometry.hpp"
#include "shardpack/detail/json.hpp"

namespace fs = std::filesystem;
using namespace shardpack;
namespace bench = shardpack::bench;

namespace {

const char* const usage_text =
    "usage: bench_decode --csv LIST [--root DIR] [--threads N] [--passes P] [--png libpng|fast]\n"
    "                    [--color rgb|gray|rgba] [--header|--no-header]\n"
    "                    [--size WxH [--resize none|stretch|shorter|fit] [--crop center|topleft|none]\n"
    "                     [--filter area|bilinear|lanczos]]\n";

[[noreturn]] void usage(const std::string& why) {
    if (!why.empty()) std::fprintf(stderr, "bench_decode: %s\n", why.c_str());
    std::fputs(usage_text, stderr);
    std::exit(2);
}

struct options {
    std::string csv, root;
    unsigned threads = 0;
    unsigned passes = 3;
    bool png_fast = false, png_explicit = false;
    pixel_layout color = pixel_layout::rgb;
    int header = -1;  // -1 detect, 0 absent, 1 present
    // --size: decode as the packer does for this geometry (as_build); the rest as build takes it.
    bool as_build = false;
    geometry_options geometry;
    std::string resize, crop, filter;
};

options parse_args(int argc, char** argv) {
    options o;
    for (bench::arg_walker args(argc, argv, usage); args.next();) {
        const std::string& a = args.arg();
        auto value = [&] { return args.value(); };
        // Counts up to a million, as a thread count or a number of passes.
        auto parse_count = [&](const std::string& what, const std::string& v, unsigned min) {
            return unsigned(args.parse_uint(what, v, min, 1'000'000));
        };
        if (a == "--csv") o.csv = value();
        else if (a == "--root") o.root = value();
        else if (a == "--threads") o.threads = parse_count(a, value(), 0);
        else if (a == "--passes") o.passes = parse_count(a, value(), 1);
        else if (a == "--png") {
            const std::string v = value();
            o.png_explicit = true;
            if (v == "libpng") o.png_fast = false;
            else if (v == "fast") o.png_fast = true;
            else usage("--png is libpng or fast, not \"" + v + "\"");
        } else if (a == "--color") {
            const std::string v = value();
            if (v == "rgb") o.color = pixel_layout::rgb;
            else if (v == "gray") o.color = pixel_layout::gray;
            else if (v == "rgba") o.color = pixel_layout::rgba;
            else usage("--color is rgb, gray or rgba, not \"" + v + "\"");
        } else if (a == "--size") {
            const std::string v = value();
            const std::size_t x = v.find('x');
            unsigned w = 0, h = 0;
            if (x != std::string::npos) {
                w = parse_count("--size", v.substr(0, x), 1);
                h = parse_count("--size", v.substr(x + 1), 1);
            }
            if (x == std::string::npos || w > 65536 || h > 65536) usage("--size is WxH with 1..65536 each, not \"" + v + "\"");
            o.geometry.width = w;
            o.geometry.height = h;
            o.as_build = true;
        } else if (a == "--resize") {
            o.resize = value();
            if (o.resize == "none") o.geometry.resize = resize_mode::none;
            else if (o.resize == "stretch") o.geometry.resize = resize_mode::stretch;
            else if (o.resize == "shorter") o.geometry.resize = resize_mode::shorter;
            else if (o.resize == "fit") o.geometry.resize = resize_mode::fit;
            else usage("--resize is none, stretch, shorter or fit, not \"" + o.resize + "\"");
        } else if (a == "--crop") {
            o.crop = value();
            if (o.crop == "center") o.geometry.crop = crop_mode::center;
            else if (o.crop == "topleft") o.geometry.crop = crop_mode::topleft;
            else if (o.crop == "none") o.geometry.crop = crop_mode::none;
            else usage("--crop is center, topleft or none, not \"" + o.crop + "\"");
        } else if (a == "--filter") {
            o.filter = value();
            if (o.filter == "area") o.geometry.filter = resample_filter::area;
            else if (o.filter == "bilinear") o.geometry.filter = resample_filter::bilinear;
            else if (o.filter == "lanczos") o.geometry.filter = resample_filter::lanczos;
            else usage("--filter is area, bilinear or lanczos, not \"" + o.filter + "\"");
        } else if (a == "--header") o.header = 1;
        else if (a == "--no-header") o.header = 0;
        else if (a == "-h" || a == "--help") {
            std::fputs(usage_text, stderr);
            std::exit(2);
        } else usage("unknown argument \"" + a + "\"");
    }
    if (o.csv.empty()) usage("--csv is required");
    if (!o.as_build && (!o.resize.empty() || !o.crop.empty() || !o.filter.empty()))
        usage("--resize, --crop and --filter describe a build's geometry: they need --size");
    // As `shardpack build`: with --size, the resize mode defaults to shorter.
    if (o.as_build && o.resize.empty()) o.geometry.resize = resize_mode::shorter;
    if (o.as_build && !o.png_fast && o.png_explicit) usage("--size decodes with the packer's decoders: --png libpng does not apply");
    if (o.threads == 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
    return o;
}

bool is_mask_cell(std::string cell) {
    std::transform(cell.begin(), cell.end(), cell.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    auto ends = [&](const char* suffix) {
        const std::size_t n = std::strlen(suffix);
        return cell.size() >= n && cell.compare(cell.size() - n, n, suffix) == 0;
    };
    return ends(".png") || ends(".jpg") || ends(".jpeg");
}

struct job {
    std::size_t image = 0;         // index into files
    std::ptrdiff_t mask = -1;      // index into files, or -1
    decode_request image_req, mask_req;
};

std::vector<std::uint8_t> read_file(const std::string& path) {
    const std::string bytes = shardpack::read_input_file(path, std::uint64_t(1) << 31);
    return std::vector<std::uint8_t>(bytes.begin(), bytes.end());
}

}  // namespace

int main(int argc, char** argv) {
    const options o = parse_args(argc, argv);
    try {
        const fs::path csv_path(o.csv);
        const fs::path root = o.root.empty() ? csv_path.parent_path() : fs::path(o.root);
        const std::string text = read_text_file(o.csv);
        const std::vector<csv_row> rows = parse_csv(text, o.csv);
        auto resolve = [&](const std::string& cell) {
            const fs::path p(cell);
            return (p.is_absolute() ? p : root / p).string();
        };
        std::size_t first = 0;
        if (!rows.empty()) {
            const bool header = o.header == 1 || (o.header == -1 && !fs::is_regular_file(resolve(rows[0].cells[0])));
            first = header ? 1 : 0;
        }

        // Distinct files, each read once, before any timing.
        std::vector<std::string> paths;
        std::vector<std::vector<std::uint8_t>> files;
        std::map<std::string, std::size_t> seen;
        auto add_file = [&](const std::string& path) {
            auto it = seen.find(path);
            if (it != seen.end()) return it->second;
            const std::size_t id = files.size();
            files.push_back(read_file(path));
            paths.push_back(path);
            seen.emplace(path, id);
            return id;
        };
        std::vector<job> jobs;
        std::uint64_t input_bytes = 0;
        std::size_t masks = 0;
        for (std::size_t r = first; r < rows.size(); ++r) {
            const auto& cells = rows[r].cells;
            if (cells[0].empty()) throw std::runtime_error(o.csv + ":" + std::to_string(rows[r].line) + ": empty image cell");
            job j;
            j.image = add_file(resolve(cells[0]));
            input_bytes += files[j.image].size();
            if (cells.size() > 1 && is_mask_cell(cells[1])) {
                j.mask = static_cast<std::ptrdiff_t>(add_file(resolve(cells[1])));
                input_bytes += files[std::size_t(j.mask)].size();
                ++masks;
            }
            j.image_req.layout = o.color;
            j.mask_req.layout = pixel_layout::rgb;
            if (o.as_build) {
                // The packer's requests (sample_transformer::transform, mask_mapper::map).
                const auto& bytes = files[j.image];
                std::uint32_t w = 0, h = 0;
                try {
                    read_image_size(bytes.data(), bytes.size(), w, h);
                } catch (const std::exception& e) {
                    throw std::runtime_error(paths[j.image] + ": " + e.what());
                }
                const geometry_plan mask_plan = plan_geometry(w, h, o.geometry);
                geometry_plan image_plan = mask_plan;
                if (j.mask < 0 && o.geometry.resize != resize_mode::none &&
                    sniff_format(bytes.data(), bytes.size()) == file_format::jpeg)
                    image_plan = plan_jpeg_dct_scaling(w, h, mask_plan, o.geometry, j.image_req);
                j.image_req.max_rows = image_plan.y.src_rows_needed();
                j.mask_req.max_rows = mask_plan.y.src_rows_needed();
            }
            jobs.push_back(j);
        }
        if (jobs.empty()) throw std::runtime_error(o.csv + ": lists no samples");
        std::fprintf(stderr, "bench_decode: %zu samples (%zu with masks), %zu files, %.1f MB read into memory\n",
                     jobs.size(), masks, files.size(), double(input_bytes) / 1e6);

        const bool packer_decoders = o.png_fast || o.as_build;
        auto decode = [&](std::size_t file, const decode_request& req, image_u8& out) {
            const auto& bytes = files[file];
            try {
                if (packer_decoders || sniff_format(bytes.data(), bytes.size()) != file_format::png)
                    decode_image(bytes.data(), bytes.size(), req, out);  // JPEG: full size, every row
                else
                    decode_png_libpng(bytes.data(), bytes.size(), req, out);
            } catch (const std::exception& e) {
                throw std::runtime_error(paths[file] + ": " + e.what());
            }
            return std::uint64_t(out.width) * out.height * out.channels;
        };

        auto process_cpu = [] {
            timespec ts{};
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
            return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
        };
        std::vector<double> times, cpu_times;
        std::uint64_t decoded_bytes = 0;
        for (unsigned pass = 0; pass < o.passes; ++pass) {
            std::atomic<std::size_t> next{0};
            std::atomic<std::uint64_t> bytes{0};
            std::atomic<bool> failed{false};
            std::vector<std::string> errors(o.threads);
            auto worker = [&](unsigned t) {
                image_u8 img, mask;
                std::uint64_t local = 0;
                try {
                    for (;;) {
                        const std::size_t k = next.fetch_add(1, std::memory_order_relaxed);
                        if (k >= jobs.size() || failed.load(std::memory_order_relaxed)) break;
                        local += decode(jobs[k].image, jobs[k].image_req, img);
                        if (jobs[k].mask >= 0) local += decode(std::size_t(jobs[k].mask), jobs[k].mask_req, mask);
                    }
                } catch (const std::exception& e) {
                    errors[t] = e.what();
                    failed = true;
                }
                bytes += local;
            };
            const double cpu_start = process_cpu();
            const auto start = bench::clock_type::now();
            std::vector<std::thread> pool;
            for (unsigned t = 1; t < o.threads; ++t) pool.emplace_back(worker, t);
            worker(0);
            for (auto& th : pool) th.join();
            const double s = bench::seconds_since(start);
            cpu_times.push_back(process_cpu() - cpu_start);
            for (const auto& e : errors)
                if (!e.empty()) throw std::runtime_error(e);
            decoded_bytes = bytes;
            times.push_back(s);
            std::fprintf(stderr, "bench_decode: pass %u: %.3f s, %.1f samples/s\n", pass + 1, s, double(jobs.size()) / s);
        }
        const double best = *std::min_element(times.begin(), times.end());
        const double med = bench::median(times);
        const double cpu_best = *std::min_element(cpu_times.begin(), cpu_times.end());
        const double cpu_med = bench::median(cpu_times);
        std::string geometry = "null";
        if (o.as_build)
            geometry = "\"" + std::to_string(o.geometry.width) + "x" + std::to_string(o.geometry.height) + " resize " +
                       (o.resize.empty() ? "shorter" : o.resize) + " crop " + (o.crop.empty() ? "center" : o.crop) + " filter " +
                       (o.filter.empty() ? "area" : o.filter) + "\"";
        std::printf("{\"tool\":\"bench_decode\",\"csv\":%s,\"samples\":%zu,\"masks\":%zu,\"files\":%zu,"
                    "\"input_bytes\":%llu,\"threads\":%u,\"passes\":%u,\"png_decoder\":\"%s\",\"as_build\":%s,\"timed\":\"decode only, "
                    "files pre-read into RAM\",\"seconds_median\":%.6f,\"seconds_best\":%.6f,"
                    "\"cpu_seconds_median\":%.6f,\"cpu_seconds_best\":%.6f,\"samples_per_s\":%.2f,"
                    "\"samples_per_s_median\":%.2f,\"decoded_bytes\":%llu,\"mb_per_s\":%.2f,\"mb_per_s_median\":%.2f}\n",
                    shardpack::detail::json(o.csv).dump(-1).c_str(), jobs.size(), masks, files.size(), static_cast<unsigned long long>(input_bytes),
                    o.threads, o.passes, packer_decoders ? "fast" : "libpng", geometry.c_str(), med, best, cpu_med, cpu_best, double(jobs.size()) / best,
                    double(jobs.size()) / med, static_cast<unsigned long long>(decoded_bytes),
                    double(decoded_bytes) / best / 1e6, double(decoded_bytes) / med / 1e6);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_decode: %s\n", e.what());
        return 1;
    }
}
