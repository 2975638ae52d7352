// bench_crop: training-loop reads with crops and flips at read time, as a trainer makes them.
//
//   bench_crop DATASET [--crop HxW | --crop none] [--threads N] [--seconds S] [--seed S]
//              [--label index|onehot|none] [--position random|foreground] [--background IDS]
//
// Reads the dataset in a seeded random permutation through dataset::read_into into caller-owned
// float32 buffers (images normalised with normalization::imagenet(), NHWC) and, per --label,
// int64 class-index maps (label_index_i64, default), one-hot float32 maps, or none. With --crop
// HxW (default 512x512) each read takes a random HxW window with random horizontal and vertical
// flips (probability 0.5 each) from the record: augmentation{random, flips random}, epoch = the
// pass number; with --crop none it reads whole records (a dataset of stored crops).
// --position foreground: crops centred on a labelled pixel (crop_position::foreground), the
// classes of --background (comma-separated ids, default 0) not counting as labelled.
// Segmentation with --crop: after the timing, one untimed pass of --fg-epochs epochs (default 4)
// reports how much foreground the delivered crops hold: the share of crops with under 1% of
// their pixels labelled (not background, not ignored), the median share, and the fallbacks
// (foreground crops of records with no foreground).
// Measures 1 thread, then N threads (default: all cores; each a contiguous share of the
// permutation, one read_context each), each for about --seconds (default 3), in rounds of one
// traversal of the permutation.
//
// Output: one JSON line on stdout: samples_per_s_1t, samples_per_s_nt, samples_per_cpu_s_1t
// (samples per CPU-second of the process during the 1-thread measurement), threads, records,
// crop, label, position, the delivered bytes per sample, and the foreground figures. Exit 0; 1 on a read error; 2 on bad usage.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "shardpack/reader.hpp"

namespace {

[[noreturn]] void usage(const std::string& why) {
    std::fprintf(stderr, "bench_crop: %s\nusage: bench_crop DATASET [--crop HxW|none] [--threads N] [--seconds S] [--seed S] "
                         "[--label index|onehot|none] [--position random|foreground] [--background IDS] [--fg-epochs N]\n", why.c_str());
    std::exit(2);
}

struct worker {
    shardpack::read_context ctx;
    std::vector<float> image, label_f32;
    std::vector<std::int64_t> label_i64;
    shardpack::sample_buffers out;
    double sink = 0;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || argv[1][0] == '-') usage("a dataset folder is needed");
    const std::string folder = argv[1];
    std::size_t crop_h = 512, crop_w = 512;
    unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    double seconds = 3;
    std::uint64_t seed = 1;
    std::string label = "index", position = "random";
    std::vector<std::uint32_t> background{0};
    unsigned fg_epochs = 4;
    for (shardpack::bench::arg_walker args(argc, argv, usage, 2); args.next();) {
        const std::string& a = args.arg();
        const std::string v = args.value();
        try {
            if (a == "--crop") {
                if (v == "none") crop_h = crop_w = 0;
                else {
                    const auto x = v.find('x');
                    if (x == std::string::npos) usage("--crop is HxW or none");
                    crop_h = std::stoul(v.substr(0, x));
                    crop_w = std::stoul(v.substr(x + 1));
                    if (!crop_h || !crop_w) usage("--crop sides must be positive");
                }
            } else if (a == "--threads") {
                threads = unsigned(std::stoul(v));
                if (!threads) usage("--threads must be at least 1");
            } else if (a == "--seconds") {
                seconds = std::stod(v);
            } else if (a == "--seed") {
                seed = std::stoull(v);
            } else if (a == "--position") {
                if (v != "random" && v != "foreground") usage("--position is random or foreground");
                position = v;
            } else if (a == "--background") {
                background.clear();
                for (std::size_t at = 0; at <= v.size();) {
                    const std::size_t comma = std::min(v.find(',', at), v.size());
                    background.push_back(std::uint32_t(std::stoul(v.substr(at, comma - at))));
                    at = comma + 1;
                }
            } else if (a == "--fg-epochs") {
                fg_epochs = unsigned(std::stoul(v));
            } else if (a == "--label") {
                if (v != "index" && v != "onehot" && v != "none") usage("--label is index, onehot or none");
                label = v;
            } else {
                usage("unknown option " + a);
            }
        } catch (const std::logic_error&) {
            usage("bad value for " + a + ": " + v);
        }
    }
    try {
        const auto ds = shardpack::dataset::open(folder);
        const auto& info = ds.schema();
        const bool seg = info.task == shardpack::task::segmentation;
        if (label == "index" && !seg) label = "none";
        const std::size_t n = ds.size();
        if (!n) throw shardpack::error(folder + ": no records");
        std::size_t h = crop_h, w = crop_w;
        if (!h) {
            if (!info.fixed_height) throw shardpack::error("--crop none needs a dataset with a fixed size");
            h = info.fixed_height;
            w = info.fixed_width;
        }
        const std::size_t px = h * w;
        shardpack::augmentation aug;
        aug.height = crop_h;
        aug.width = crop_w;
        aug.position = position == "foreground" ? shardpack::crop_position::foreground : shardpack::crop_position::random;
        aug.background = background;
        aug.hflip = aug.vflip = shardpack::flip_mode::random;
        aug.seed = seed;
        std::vector<std::unique_ptr<worker>> workers;
        for (unsigned t = 0; t < threads; ++t) {
            auto wk = std::make_unique<worker>();
            wk->image.resize(px * info.channels);
            wk->out.image_f32 = wk->image.data();
            wk->out.image_capacity = wk->image.size();
            wk->out.norm = shardpack::normalization::imagenet();
            if (label == "index") {
                wk->label_i64.resize(px);
                wk->out.label_index_i64 = wk->label_i64.data();
                wk->out.label_index_capacity = px;
            } else if (label == "onehot") {
                wk->label_f32.resize(seg ? px * info.class_count : info.class_count);
                wk->out.label_f32 = wk->label_f32.data();
                wk->out.label_capacity = wk->label_f32.size();
            }
            workers.push_back(std::move(wk));
        }
        std::vector<std::size_t> perm(n);
        std::iota(perm.begin(), perm.end(), std::size_t(0));
        std::mt19937_64 rng(seed);
        std::shuffle(perm.begin(), perm.end(), rng);

        // Rounds of one traversal each, on `nt` threads, until `seconds` have passed.
        std::atomic<std::uint64_t> epoch_counter{0};
        auto process_cpu = [] {
            timespec ts{};
            clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
            return double(ts.tv_sec) + double(ts.tv_nsec) / 1e9;
        };
        double cpu_s = 0;               // of the last measure()
        std::size_t last_samples = 0;   // of the last measure()
        auto measure = [&](unsigned nt) {
            const double cpu_start = process_cpu();
            std::vector<shardpack::augmentation> augs(nt, aug);
            std::size_t samples = 0;
            const auto start = std::chrono::steady_clock::now();
            double elapsed = 0;
            do {
                const std::uint64_t epoch = epoch_counter++;
                std::vector<std::thread> pool;
                for (unsigned t = 0; t < nt; ++t)
                    pool.emplace_back([&, t] {
                        worker& wk = *workers[t];
                        augs[t].epoch = epoch;
                        wk.out.augment = crop_h ? &augs[t] : nullptr;
                        const std::size_t begin = n * t / nt, end = n * (t + 1) / nt;
                        for (std::size_t j = begin; j < end; ++j) {
                            ds.read_into(perm[j], wk.out, wk.ctx);
                            wk.sink += wk.image[0];
                        }
                    });
                for (auto& th : pool) th.join();
                samples += n;
                elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            } while (elapsed < seconds);
            cpu_s = process_cpu() - cpu_start;
            last_samples = samples;
            return samples / elapsed;
        };
        measure(1);  // warm-up: faults the shards in, sizes the buffers
        const double one = measure(1);
        const double one_cpu = double(last_samples) / std::max(cpu_s, 1e-9);
        const double many = measure(threads);
        double sink = 0;
        for (const auto& wk : workers) sink += wk->sink;
        // The foreground the crops hold (untimed): labelled pixels of no --background class.
        std::vector<double> shares;
        std::size_t fallbacks = 0;
        if (seg && crop_h && fg_epochs) {
            worker& wk = *workers[0];
            std::vector<std::uint16_t> ids(px);
            shardpack::sample_buffers b;
            b.label_index = ids.data();
            b.label_index_capacity = px;
            b.augment = &aug;
            shardpack::crop_box box;
            b.applied = &box;
            for (unsigned e = 0; e < fg_epochs; ++e) {
                aug.epoch = e;
                for (std::size_t i = 0; i < n; ++i) {
                    ds.read_into(i, b, wk.ctx);
                    std::size_t fg = 0;
                    for (std::uint16_t v : ids)
                        fg += v != info.ignore_value && std::find(background.begin(), background.end(), v) == background.end();
                    shares.push_back(double(fg) / double(px));
                    fallbacks += box.fallback;
                }
            }
            std::sort(shares.begin(), shares.end());
        }
        const double under_1pct = shares.empty() ? 0.0
            : double(std::lower_bound(shares.begin(), shares.end(), 0.01) - shares.begin()) / double(shares.size());
        const double median = shares.empty() ? 0.0 : shares[shares.size() / 2];
        const std::size_t delivered = px * info.channels * 4 + (label == "index" ? px * 8 : label == "onehot" ? px * info.class_count * 4 : 0);
        std::printf("{\"tool\":\"bench_crop\",\"dataset\":\"%s\",\"records\":%zu,\"crop\":\"%s\",\"label\":\"%s\","
                    "\"threads\":%u,\"samples_per_s_1t\":%.2f,\"samples_per_s_nt\":%.2f,\"samples_per_cpu_s_1t\":%.2f,\"delivered_bytes_per_sample\":%zu,"
                    "\"position\":\"%s\",\"fg_crops\":%zu,\"fg_under_1pct\":%.4f,\"fg_median_share\":%.4f,\"fg_fallbacks\":%zu,\"sink\":%d}\n",
                    folder.c_str(), n, crop_h ? (std::to_string(crop_h) + "x" + std::to_string(crop_w)).c_str() : "none",
                    label.c_str(), threads, one, many, one_cpu, delivered, position.c_str(), shares.size(), under_1pct, median,
                    fallbacks, sink != 0 ? 1 : 0);
        return 0;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_crop: %s\n", e.what());
        return 1;
    }
}
