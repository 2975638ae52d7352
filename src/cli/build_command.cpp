#include "cli/build_command.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <iostream>

#include "errors.hpp"
#include "pipeline/build_pipeline.hpp"

namespace shardpack {

CLI::App* add_build_command(CLI::App& app, build_command_options& o) {
    CLI::App* b = app.add_subcommand("build", "Pack the images and labels a CSV lists into a dataset folder");
    b->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated option: the last wins
    // Read by expand_build_config() before parsing; declared here for --help and validation.
    b->add_option("--config", o.config, "Read options from a TOML/INI file (keys are long option names, e.g. size = \"512x512\"); the command line wins")
        ->check(CLI::ExistingFile);
    b->add_option("--csv", o.csv, "The input list: CSV of image path and label (mask path, class id or class name)")->required();
    b->add_option("--out", o.out, "The dataset folder to write (created; an existing dataset is replaced atomically)")->required();
    b->add_option("--root", o.root, "Resolve relative paths against this folder instead of the CSV's folder");
    b->add_flag("--header", o.header, "The CSV's first row is a header (default: detected)");
    b->add_flag("--no-header", o.no_header, "The CSV has no header row (default: detected)");
    b->add_option("--image-col", o.image_col, "Image column: a header name or a 0-based index")->capture_default_str();
    b->add_option("--label-col", o.label_col, "Label column: a header name or a 0-based index")->capture_default_str();
    b->add_option("--task", o.task, "seg (label = mask image), cls (label = class id or name), or auto")
        ->check(CLI::IsMember({"auto", "seg", "cls"}))->capture_default_str();
    b->add_option("--classes", o.classes, "seg: class_dict.csv (name,r,g,b); cls: optional list of class names");
    b->add_option("--color", o.color, "Stored image channels: rgb, gray (BT.601 luma, as PIL's L) or rgba")
        ->check(CLI::IsMember({"rgb", "gray", "rgba"}))->capture_default_str();
    b->add_option("--size", o.size, "Output size WxH, e.g. 512x512");
    b->add_option("--resize", o.resize, "none (crop or pad), stretch, shorter (cover, then crop) or fit (contain, then pad); default: none, or shorter with --size")
        ->check(CLI::IsMember({"none", "stretch", "shorter", "fit"}));
    b->add_option("--crop", o.crop, "center, topleft or none: where the --size box is taken (or padding goes)")
        ->check(CLI::IsMember({"center", "topleft", "none"}))->capture_default_str();
    b->add_option("--filter", o.filter, "Image resampling filter: area, bilinear or lanczos (antialiased); masks are always nearest")
        ->check(CLI::IsMember({"area", "bilinear", "lanczos"}))->capture_default_str();
    b->add_option("--label-layout", o.label_layout, "Segmentation labels: onehot (HxWxC of 0/1) or index (HxW class ids)")
        ->check(CLI::IsMember({"onehot", "index"}))->capture_default_str();
    b->add_option("--unknown-label", o.unknown_label, "A mask colour not in the dictionary: error, or ignore (mapped to the ignore value and counted)")
        ->check(CLI::IsMember({"error", "ignore"}))->capture_default_str();
    b->add_option("--compression", o.compression,
                  "zstd (format 1.1: one frame per band of rows of image and label; raw where it is not smaller), "
                  "auto (zstd where it saves at least half of a record, else raw), zstd-record (format 1.0: one frame "
                  "per record, for 1.0 readers) or none")
        ->check(CLI::IsMember({"zstd", "auto", "zstd-record", "none"}))->capture_default_str();
    b->add_option("--band-rows", o.band_rows, "Rows per zstd band frame (zstd, auto); 0 = about 256 KiB of image per band")
        ->check(CLI::Range(0, 65536))->capture_default_str();
    b->add_option("--level", o.level, "zstd level")->check(CLI::Range(-7, 22))->capture_default_str();
    b->add_option("--shard-size", o.shard_size, "Start a new shard beyond this size (e.g. 256MiB, 1GiB)")->capture_default_str();
    b->add_flag("--shuffle", o.shuffle, "Write records in a seeded random order instead of CSV order");
    b->add_option("--seed", o.seed, "Seed for --shuffle")->capture_default_str();
    b->add_option("--on-error", o.on_error, "A bad row: fail (stop, publish nothing) or skip (list it in rejected.csv)")
        ->check(CLI::IsMember({"fail", "skip"}))->capture_default_str();
    b->add_option("--max-errors", o.max_errors, "With --on-error skip: stop (publish nothing) once this many rows are rejected; 0 = no limit")
        ->capture_default_str();
    b->add_option("--threads", o.threads, "Worker threads; 0 = all cores")->capture_default_str();
    b->add_option("--report", o.report, "Also write the JSON build report here (the dataset folder always gets report.json)");
    b->add_flag("--json", o.json, "Print the build report as JSON to stdout");
    b->add_flag("--full", o.full, "Decode every row again instead of taking unchanged rows back from the previous build");
    return b;
}

std::uint64_t parse_byte_size(const std::string& text) {
    std::size_t used = 0;
    unsigned long long n = 0;
    try {
        n = std::stoull(text, &used);
    } catch (const std::exception&) {
        throw usage_error("bad size '" + text + "': expected a number with an optional unit (KiB, MiB, GiB, KB, MB, GB)");
    }
    std::string unit = text.substr(used);
    for (auto& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    std::uint64_t mul = 1;
    if (unit.empty() || unit == "b") mul = 1;
    else if (unit == "k" || unit == "kib") mul = 1ull << 10;
    else if (unit == "m" || unit == "mib") mul = 1ull << 20;
    else if (unit == "g" || unit == "gib") mul = 1ull << 30;
    else if (unit == "kb") mul = 1000;
    else if (unit == "mb") mul = 1000 * 1000;
    else if (unit == "gb") mul = 1000 * 1000 * 1000;
    else throw usage_error("bad size unit in '" + text + "'");
    return n * mul;
}

namespace {
void parse_wxh(const std::string& text, std::uint32_t& w, std::uint32_t& h) {
    const auto x = text.find_first_of("xX");
    try {
        if (x == std::string::npos) throw std::invalid_argument("no x");
        std::size_t a = 0, b = 0;
        const unsigned long wv = std::stoul(text.substr(0, x), &a);
        const unsigned long hv = std::stoul(text.substr(x + 1), &b);
        if (a != x || b != text.size() - x - 1 || wv == 0 || hv == 0 || wv > 65536 || hv > 65536)
            throw std::invalid_argument("range");
        w = static_cast<std::uint32_t>(wv);
        h = static_cast<std::uint32_t>(hv);
    } catch (const std::exception&) {
        throw usage_error("--size '" + text + "': expected WxH with 1..65536 each, e.g. 512x512");
    }
}
}  // namespace

build_options to_build_options(const build_command_options& o) {
    build_options b;
    b.input.csv_path = o.csv;
    b.input.root = o.root;
    if (o.header && o.no_header) throw usage_error("--header and --no-header contradict each other");
    b.input.header = o.header ? header_mode::present : o.no_header ? header_mode::absent : header_mode::detect;
    b.input.image_col = o.image_col;
    b.input.label_col = o.label_col;
    b.input.task = o.task == "seg" ? task_kind::segmentation : o.task == "cls" ? task_kind::classification : task_kind::automatic;
    b.input.classes_path = o.classes;
    b.out_dir = o.out;
    b.color = o.color == "gray" ? pixel_layout::gray : o.color == "rgba" ? pixel_layout::rgba : pixel_layout::rgb;

    if (!o.size.empty()) parse_wxh(o.size, b.geometry.width, b.geometry.height);
    const std::string resize = o.resize.empty() ? (o.size.empty() ? "none" : "shorter") : o.resize;
    b.geometry.resize = resize == "stretch" ? resize_mode::stretch : resize == "shorter" ? resize_mode::shorter
                      : resize == "fit" ? resize_mode::fit : resize_mode::none;
    if (b.geometry.resize != resize_mode::none && o.size.empty())
        throw usage_error("--resize " + resize + " needs --size WxH");
    b.geometry.crop = o.crop == "topleft" ? crop_mode::topleft : o.crop == "none" ? crop_mode::none : crop_mode::center;
    b.geometry.filter = o.filter == "bilinear" ? resample_filter::bilinear : o.filter == "lanczos" ? resample_filter::lanczos
                      : resample_filter::area;
    b.label_layout = o.label_layout == "index" ? label_layout_option::index : label_layout_option::one_hot;
    b.unknown_label = o.unknown_label == "ignore" ? unknown_colour_policy::ignore : unknown_colour_policy::error;
    b.codec = o.compression == "none" ? record_codec::none : o.compression == "auto" ? record_codec::automatic
            : o.compression == "zstd-record" ? record_codec::zstd_record : record_codec::zstd;
    b.band_rows = o.band_rows;
    if (o.band_rows && !uses_band_frames(b.codec)) throw usage_error("--band-rows needs --compression zstd or auto");
    b.level = o.level;
    b.shard_size = parse_byte_size(o.shard_size);
    if (b.shard_size < 4096) throw usage_error("--shard-size must be at least 4096 bytes");
    b.shuffle = o.shuffle;
    b.seed = o.seed;
    b.on_error = o.on_error == "skip" ? error_policy::skip : error_policy::fail;
    b.max_errors = o.max_errors;
    if (b.max_errors && b.on_error != error_policy::skip) throw usage_error("--max-errors needs --on-error skip");
    b.threads = o.threads;
    b.report_path = o.report;
    b.full = o.full;
    return b;
}

std::vector<std::string> expand_build_config(const std::vector<std::string>& args) {
    const auto build_at = std::find(args.begin(), args.end(), "build");
    if (build_at == args.end()) return args;
    std::string path;
    std::set<std::string> given;
    for (auto it = build_at + 1; it != args.end(); ++it) {
        if (*it == "--config" && it + 1 != args.end()) path = *(it + 1);
        else if (it->rfind("--config=", 0) == 0) path = it->substr(9);
        else if (it->rfind("--", 0) == 0) given.insert(it->substr(2, it->find('=') == std::string::npos ? std::string::npos : it->find('=') - 2));
    }
    if (path.empty()) return args;
    std::vector<CLI::ConfigItem> items;
    try {
        items = CLI::ConfigTOML().from_file(path);
    } catch (const std::exception& e) {
        throw usage_error("--config " + path + ": " + e.what());
    }
    std::vector<std::string> out(args.begin(), args.end());
    for (const auto& item : items) {
        if (!(item.parents.empty() || (item.parents.size() == 1 && item.parents[0] == "build"))) continue;
        if (item.name == "config" || item.name == "++" || item.name == "--" || given.count(item.name)) continue;
        if (item.inputs.size() == 1 && (item.inputs[0] == "true" || item.inputs[0] == "false")) {
            if (item.inputs[0] == "true") out.push_back("--" + item.name);  // a flag
            continue;
        }
        for (const auto& v : item.inputs) {
            out.push_back("--" + item.name);
            out.push_back(v);
        }
    }
    return out;
}

int run_build_command(const build_command_options& o, bool progress) {
    build_options b = to_build_options(o);
    b.progress = progress;
    spdlog::debug("building {} from {}", b.out_dir, b.input.csv_path);
    const build_result r = run_build(b);
    if (r.interrupted_by) {
        spdlog::error("interrupted by signal {}: nothing was published; {} is unchanged", r.interrupted_by, b.out_dir);
        return 128 + r.interrupted_by;
    }
    const auto& t = r.totals;
    spdlog::info("{}: {} records ({} decoded, {} unchanged) in {} shard(s) ({} rewritten), {} bytes (ratio {:.2f}), "
                 "{} skipped, {:.2f} s, {:.1f} samples/s", b.out_dir, t.records, t.records - t.reused, t.reused,
                 r.manifest.at("shards").as_array().size(), r.report.at("shards_written").as_u64(), manifest_bytes(r.manifest),
                 r.report.at("compression_ratio").as_double(), t.rejected.size(), r.seconds,
                 r.report.at("samples_per_second").as_double());
    for (const auto& row : t.rejected) spdlog::warn("skipped line {}: {}", row.csv_line, row.reason);
    if (t.unknown_pixels) spdlog::warn("{} mask pixels had colours not in the dictionary and were ignored", t.unknown_pixels);
    if (o.json) std::cout << r.report.dump();
    return 0;
}

}  // namespace shardpack
