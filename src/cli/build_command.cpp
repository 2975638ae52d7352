#include "cli/build_command.hpp"

#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <set>
#include <iostream>

#include "errors.hpp"
#include "input/folder_input.hpp"
#include "pipeline/option_names.hpp"
#include "pipeline/build_pipeline.hpp"
#include "input/csv_reader.hpp"
#include "pipeline/memory_budget.hpp"
#include "shardpack/detail/format.hpp"

namespace shardpack {

namespace {
// The options of how masks name classes (issue #11), shared with nothing else here.
void add_label_options(CLI::App& b, build_command_options& o) {
    b.add_option("--color-tolerance", o.color_tolerance,
                 "Map a mask color within N (largest channel difference) of exactly one dictionary color to that class")
        ->check(CLI::Range(0, 255))->capture_default_str();
    b.add_option("--mask-values", o.mask_values,
                 "color (mask colors through the dictionary) or index (pixel values are class ids: gray or palette "
                 "indices); auto: index when --classes gives ids (name,id)")
        ->check(CLI::IsMember(words_of(mask_values_words)))->capture_default_str();
    b.add_option("--ignore-values", o.ignore_values, "Index masks: values that become the ignore value, e.g. 255 or 0,255");
}
}  // namespace

std::vector<std::uint16_t> parse_ignore_values(const std::string& text) {
    std::vector<std::uint16_t> out;
    std::size_t start = 0;
    while (start <= text.size() && !text.empty()) {
        const std::size_t end = std::min(text.find(',', start), text.size());
        const std::string item = text.substr(start, end - start);
        std::size_t used = 0;
        unsigned long v = 0;
        try {
            v = std::stoul(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (item.empty() || used != item.size() || v > 65535 || !std::isdigit(static_cast<unsigned char>(item[0])))
            throw usage_error("--ignore-values '" + text + "': '" + item + "' is not a value in 0..65535");
        out.push_back(static_cast<std::uint16_t>(v));
        start = end + 1;
    }
    return out;
}

void add_mask_pairing_options(CLI::App& c, std::string& mask_suffix, std::string& image_suffix) {
    c.add_option("--mask-suffix", mask_suffix,
                 "With --masks: a mask's file name is the image's stem plus this, any extension (_L: img_0.png pairs with "
                 "img_0_L.png); then --masks may be the --images folder itself");
    c.add_option("--image-suffix", image_suffix,
                 "With --masks: taken off the end of an image's stem before pairing (_leftImg8bit with --mask-suffix "
                 "_gtFine_labelIds pairs Cityscapes' names)");
}

CLI::App* add_build_command(CLI::App& app, build_command_options& o) {
    CLI::App* b = app.add_subcommand("build", "Pack the images and labels a CSV lists into a dataset folder");
    b->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // a repeated option: the last wins
    // Read by expand_build_config() before parsing; declared here for --help and validation.
    b->add_option("--config", o.config, "Read options from a TOML/INI file (keys are long option names, e.g. size = \"512x512\"); the command line wins")
        ->check(CLI::ExistingFile);
    b->add_option("--csv", o.csv, "The input list: CSV of image path and label (mask path, class id or class name)");
    b->add_option("--images", o.images, "Instead of --csv: a folder with one subfolder per class, or with --masks the images");
    b->add_option("--masks", o.masks, "With --images: the masks, paired with the images by path and file name");
    add_mask_pairing_options(*b, o.mask_suffix, o.image_suffix);
    b->add_option("--out", o.out, "The dataset folder to write: missing, empty, or a shardpack dataset (replaced atomically); "
                  "anything else is refused without --force")->required();
    b->add_option("--root", o.root, "Resolve relative paths against this folder instead of the CSV's folder");
    b->add_flag("--header", o.header, "The CSV's first row is a header (default: detected)");
    b->add_flag("--no-header", o.no_header, "The CSV has no header row (default: detected)");
    b->add_option("--image-col", o.image_col, "Image column: a header name or a 0-based index")->capture_default_str();
    b->add_option("--label-col", o.label_col, "Label column: a header name or a 0-based index")->capture_default_str();
    b->add_option("--task", o.task, "seg (label = mask image), cls (label = class id or name), or auto")
        ->check(CLI::IsMember(words_of(task_words)))->capture_default_str();
    b->add_option("--classes", o.classes, "seg: class_dict.csv (name,r,g,b); cls: optional list of class names");
    b->add_option("--color", o.color, "Stored image channels: rgb, gray (BT.601 luma, as PIL's L), rgba, or bands "
                  "(every sample a pixel has, as stored: as many as the first row's image has, 1 to 255)")
        ->check(CLI::IsMember(words_of(color_words)))->capture_default_str();
    b->add_option("--depth", o.depth, "Bits a stored image sample: auto (16 when the first row's image has 16, as 16-bit "
                  "PNG and TIFF may: uint16 images, format 1.4; else 8), 8, or 16 (8-bit images are widened, v * 257). "
                  "16-bit images in an 8-bit build keep their high byte: the log and report.json count them")
        ->check(CLI::IsMember({"auto", "8", "16"}))->capture_default_str();
    b->add_option("--size", o.size, "Output size WxH, e.g. 512x512");
    b->add_option("--resize", o.resize, "none (crop or pad), stretch, shorter (cover, then crop) or fit (contain, then pad); default: none, or shorter with --size")
        ->check(CLI::IsMember(words_of(resize_words)));
    b->add_option("--crop", o.crop, "center, topleft or none: where the --size box is taken (or padding goes)")
        ->check(CLI::IsMember(words_of(crop_words)))->capture_default_str();
    b->add_option("--filter", o.filter, "Image resampling filter: area, bilinear or lanczos (antialiased); masks are always nearest")
        ->check(CLI::IsMember(words_of(filter_words)))->capture_default_str();
    b->add_option("--label-layout", o.label_layout, "Segmentation labels: onehot (HxWxC of 0/1) or index (HxW class ids)")
        ->check(CLI::IsMember(words_of(label_layout_words)))->capture_default_str();
    b->add_option("--unknown-label", o.unknown_label, "A mask color not in the dictionary: error, or ignore (mapped to the ignore value and counted)")
        ->check(CLI::IsMember(words_of(unknown_label_words)))->capture_default_str();
    add_label_options(*b, o);
    b->add_option("--field", o.fields,
                  "Keep a CSV column as a per-sample field (format 1.5): NAME:KIND[=COLUMN], KIND int, float, str, "
                  "int-list, float-list, tags (multi-label: names or ids separated by ; | or ,) or boxes ('x0 y0 x1 y1 "
                  "label' in source pixels, boxes separated by ;); COLUMN defaults to NAME; boxes may come from a COCO "
                  "JSON: NAME:boxes=coco:FILE. Repeat for more fields. With --samples -, each sample brings its values "
                  "(shardpack.write's fields=), as such cells")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    b->add_option("--field-names", o.field_names,
                  "NAME=FILE: the tags (or box classes) of field NAME, one per line, in id order; default: those found "
                  "in the data (ids 0..max, or names sorted); needed with --samples -")
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    b->add_option("--unknown-name", o.unknown_name,
                  "A tag or box class not in the field's --field-names list: error, or ignore (dropped and counted)")
        ->check(CLI::IsMember({"error", "ignore"}))->capture_default_str();
    b->add_option("--compression", o.compression,
                  "zstd (format 1.1: one frame per band of rows of image and label; raw where it is not smaller), "
                  "auto (zstd where it saves at least half of a record, else raw), zstd-record (format 1.0: one frame "
                  "per record, for 1.0 readers) or none")
        ->check(CLI::IsMember(words_of(compression_words)))->capture_default_str();
    b->add_option("--band-rows", o.band_rows,
                  "Rows per zstd band frame of image and label (zstd, auto); 0 = heights from the data: about 256 KiB "
                  "of image per band, and for segmentation a height per region (format 1.3: a label zstd shrinks 32x "
                  "as one frame, the image then in ~128 KiB bands)")
        ->check(CLI::Range(0, 65536))->capture_default_str();
    b->add_option("--level", o.level, "zstd level")->check(CLI::Range(-7, 22))->capture_default_str();
    b->add_option("--shard-size", o.shard_size, "Start a new shard beyond this size (e.g. 256MiB, 1GiB)")->capture_default_str();
    b->add_flag("--shuffle", o.shuffle, "Write records in a seeded random order instead of CSV order");
    b->add_option("--seed", o.seed, "Seed for --shuffle")->check(count_in_range(UINT64_MAX))->capture_default_str();
    b->add_option("--on-error", o.on_error, "A bad row: fail (stop, publish nothing) or skip (list it in rejected.csv)")
        ->check(CLI::IsMember(words_of(on_error_words)))->capture_default_str();
    b->add_option("--max-errors", o.max_errors, "With --on-error skip: stop (publish nothing) once this many rows are rejected; 0 = no limit")
        ->check(count_in_range(std::uint64_t(INT64_MAX)))->capture_default_str();
    b->add_option("--threads", o.threads, "Worker threads; 0 = all cores (at most 4 x the cores are used)")
        ->check(count_in_range(1u << 20))->capture_default_str();
    b->add_option("--memory-limit", o.memory_limit,
                  "Memory budget of the build (e.g. 2GiB): rows in flight, threads and the largest image are derived "
                  "from it; default: a quarter of the RAM or cgroup limit, here " + format_bytes(default_memory_limit()));
    b->add_option("--report", o.report, "Also write the JSON build report here (the dataset folder always gets report.json)");
    b->add_flag("--json", o.json, "Print the build report as JSON to stdout");
    b->add_option("--partition", o.partition, "K/N: pack only the K-th of N contiguous slices of the output order (0 <= K < N), "
                  "for `shardpack merge`; slurm: K and N from the job array (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT)");
    b->add_flag("--full", o.full, "Decode every row again instead of taking unchanged rows back from the previous build");
    // Not listed in --help: the Python writer's (src/python/shardpack/_writer.py), not for hand use.
    b->add_option("--samples", o.samples, "Read the samples from the sample stream on standard input (-)")->group("");
    b->add_flag("--progress", o.progress, "Show the progress line even when standard error is not a terminal")->group("");
    b->add_flag("--force", o.force, "Write into a folder that is not empty and not a shardpack dataset (beside its files: "
                "none is ever overwritten or removed), or replace a dataset of a newer format version");
    return b;
}

std::uint64_t parse_byte_size(const std::string& option, const std::string& text) {
    const auto bad = [&](const std::string& why) {
        return usage_error(option + " '" + text + "': " + why);
    };
    std::size_t used = 0;
    std::uint64_t n = 0;
    while (used < text.size() && text[used] >= '0' && text[used] <= '9') {
        if (__builtin_mul_overflow(n, std::uint64_t(10), &n) || __builtin_add_overflow(n, std::uint64_t(text[used] - '0'), &n))
            throw bad("too large");
        ++used;
    }
    if (used == 0) throw bad("expected a number of bytes with an optional unit (KiB, MiB, GiB, KB, MB, GB)");
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
    else throw bad("unknown unit (use KiB, MiB, GiB, KB, MB or GB)");
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(n, mul, &bytes)) throw bad("too large");
    return bytes;
}

CLI::Validator count_in_range(std::uint64_t max) {
    return CLI::Validator(
        [max](std::string& text) -> std::string {
            const std::string why = "expected a whole number from 0 to " + std::to_string(max) + ", got '" + text + "'";
            if (text.empty()) return why;
            std::uint64_t v = 0;
            for (char c : text) {
                if (c < '0' || c > '9') return why;
                if (__builtin_mul_overflow(v, std::uint64_t(10), &v) || __builtin_add_overflow(v, std::uint64_t(c - '0'), &v))
                    return why;
            }
            return v > max ? why : std::string();
        },
        "");
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
// Fixed-size records larger than the format allows are refused before any work: the image
// alone (the labels, known once the class table is read, are checked by run_build).
void check_record_fits(const build_options& b) {
    if (b.geometry.width == 0 || !(b.geometry.resize != resize_mode::none || b.geometry.crop != crop_mode::none)) return;
    const std::uint64_t image_bytes = std::uint64_t(b.geometry.width) * b.geometry.height * channel_count(b.color);
    if (image_bytes >= detail::max_record_bytes)
        throw usage_error("--size " + std::to_string(b.geometry.width) + "x" + std::to_string(b.geometry.height) +
                          ": each record's image would be " + std::to_string(image_bytes) +
                          " bytes, over the format's 4 GiB record limit");
}

// --report is written after the dataset is published: a path that cannot be written is found
// here, before the build starts, not after.
void check_report_path(const std::string& path, const std::string& out_dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::path p(path);
    const fs::path dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    if (p.filename().empty()) throw usage_error("--report " + path + ": names a folder, not a file");
    // In the dataset folder, which the build creates: checked by the build.
    if (dir.lexically_normal() == fs::path(out_dir).lexically_normal() && !fs::exists(dir, ec)) return;
    if (!fs::is_directory(dir, ec)) throw usage_error("--report " + path + ": the folder " + dir.string() + " does not exist");
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        throw usage_error("--report " + path + ": cannot write in " + dir.string() + ": " + std::strerror(errno));
    // What output_folder::write_atomically will refuse to replace, refused before the build.
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0) {
        if (S_ISLNK(st.st_mode)) throw usage_error("--report " + path + ": is a symbolic link, which shardpack never writes through");
        if (!S_ISREG(st.st_mode)) throw usage_error("--report " + path + ": exists and is not a regular file");
        if (st.st_uid != ::geteuid())
            throw usage_error("--report " + path + ": belongs to user " + std::to_string(st.st_uid) + ", not to this user; "
                              "shardpack replaces only its own files");
    }
}
}  // namespace

void refuse_url(const std::string& option, const std::string& path, const std::string& hint) {
    // RFC 3986's scheme: a letter, then letters, digits, '+', '-' or '.'; then "://".
    const auto end = path.find("://");
    if (end == std::string::npos || end == 0 || !std::isalpha(static_cast<unsigned char>(path[0]))) return;
    for (std::size_t i = 1; i < end; ++i) {
        const unsigned char c = static_cast<unsigned char>(path[i]);
        if (!std::isalnum(c) && c != '+' && c != '-' && c != '.') return;
    }
    throw usage_error(option + " " + path + ": is a URL, and this writes local files only; " + hint +
                      " (a local folder of that name: ./" + path + ")");
}

namespace {
// --samples - (the Python writer): the samples come from standard input, so the options about
// a list, its order and its parts do not apply.
void check_stream_options(const build_command_options& o, build_options& b) {
    if (o.samples != "-") throw usage_error("--samples '" + o.samples + "': only - (standard input) is read");
    const std::pair<bool, const char*> list_options[] = {
        {!o.csv.empty(), "--csv"}, {!o.images.empty(), "--images"}, {!o.masks.empty(), "--masks"}, {!o.root.empty(), "--root"},
        {o.header || o.no_header, "--header/--no-header"}, {o.image_col != "0" || o.label_col != "1", "--image-col/--label-col"},
        {o.shuffle, "--shuffle (shuffle the samples before they are written)"}, {!o.partition.empty(), "--partition"}};
    for (const auto& [given, name] : list_options)
        if (given) throw usage_error(std::string("--samples: ") + name + " does not apply to a sample stream");
    b.input.from_stream = true;
}
}  // namespace

build_options to_build_options(const build_command_options& o) {
    build_options b;
    refuse_url("--out", o.out, "build into a local folder, then upload it with `shardpack push DIR " + o.out + "`");
    refuse_url("--report", o.report, "give a local file");
    b.input.csv_path = o.csv;
    b.input.root = o.root;
    if (!o.samples.empty()) check_stream_options(o, b);
    if (!o.images.empty() && !o.csv.empty()) throw usage_error("give --csv LIST or --images DIR, not both");
    if (!o.masks.empty() && o.images.empty()) throw usage_error("--masks DIR needs --images DIR");
    if (o.images.empty() && o.csv.empty() && !b.input.from_stream)
        throw usage_error("no input: give --csv LIST (a CSV of image,label rows), or --images DIR (one subfolder per "
                          "class), or --images DIR --masks DIR (segmentation)");
    if (!o.images.empty() && !o.root.empty()) throw usage_error("--root applies to --csv; --images paths are relative to DIR");
    if (o.header && o.no_header) throw usage_error("--header and --no-header contradict each other");
    b.input.header = o.header ? header_mode::present : o.no_header ? header_mode::absent : header_mode::detect;
    b.input.image_col = o.image_col;
    b.input.label_col = o.label_col;
    b.input.task = value_of(task_words, o.task, "--task");
    b.input.classes_path = o.classes;
    for (const auto& f : o.fields) b.input.fields.push_back(parse_field_spec(f));
    for (const auto& n : o.field_names) apply_field_names(b.input.fields, n);
    b.input.unknown_name = o.unknown_name == "ignore" ? unknown_name_policy::ignore : unknown_name_policy::error;
    if (!o.fields.empty() && !o.images.empty())
        throw usage_error("--field reads columns of a --csv list; --images folders have none");
    if (o.images.empty() && !(o.mask_suffix.empty() && o.image_suffix.empty()))
        throw usage_error("--mask-suffix and --image-suffix apply to --images DIR --masks DIR");
    if (!o.images.empty()) {
        const folder_listing listing = list_image_folders({o.images, o.masks, o.mask_suffix, o.image_suffix}, b.input);
        log_folder_listing(listing);
        b.input.files_left_out = listing.left_out.size();
    }
    b.out_dir = o.out;
    b.color = value_of(color_words, o.color, "--color");
    b.depth = o.depth == "8" ? 8 : o.depth == "16" ? 16 : 0;

    if (!o.size.empty()) parse_wxh(o.size, b.geometry.width, b.geometry.height);
    const std::string resize = o.resize.empty() ? (o.size.empty() ? "none" : "shorter") : o.resize;
    b.geometry.resize = value_of(resize_words, resize, "--resize");
    if (b.geometry.resize != resize_mode::none && o.size.empty())
        throw usage_error("--resize " + resize + " needs --size WxH");
    b.geometry.crop = value_of(crop_words, o.crop, "--crop");
    b.geometry.filter = value_of(filter_words, o.filter, "--filter");
    b.label_layout = value_of(label_layout_words, o.label_layout, "--label-layout");
    b.mask.unknown_label = value_of(unknown_label_words, o.unknown_label, "--unknown-label");
    b.mask.color_tolerance = o.color_tolerance;
    b.mask.values = value_of(mask_values_words, o.mask_values, "--mask-values");
    b.mask.ignore_values = parse_ignore_values(o.ignore_values);
    b.codec = value_of(compression_words, o.compression, "--compression");
    b.band_rows = o.band_rows;
    if (o.band_rows && !uses_band_frames(b.codec)) throw usage_error("--band-rows needs --compression zstd or auto");
    b.level = o.level;
    b.shard_size = parse_byte_size("--shard-size", o.shard_size);
    if (b.shard_size < 4096) throw usage_error("--shard-size must be at least 4096 bytes");
    if (b.shard_size > (std::uint64_t(1) << 62)) throw usage_error("--shard-size '" + o.shard_size + "': too large");
    b.memory_limit = o.memory_limit.empty() ? default_memory_limit() : parse_byte_size("--memory-limit", o.memory_limit);
    if (b.memory_limit < min_memory_limit)
        throw usage_error("--memory-limit '" + o.memory_limit + "': at least " + format_bytes(min_memory_limit) + " is needed");
    check_record_fits(b);
    b.shuffle = o.shuffle;
    b.seed = o.seed;
    b.on_error = value_of(on_error_words, o.on_error, "--on-error");
    b.max_errors = o.max_errors;
    if (b.max_errors && b.on_error != error_policy::skip) throw usage_error("--max-errors needs --on-error skip");
    b.threads = o.threads;
    b.report_path = o.report;
    if (!b.report_path.empty()) check_report_path(b.report_path, o.out);
    b.full = o.full || b.input.from_stream;  // a stream has no files a rebuild could compare
    if (!o.partition.empty()) b.partition = parse_partition(o.partition);
    b.force = o.force;
    return b;
}

namespace {
// A config file holds a few dozen options.
constexpr std::uint64_t max_config_bytes = std::uint64_t(1) << 20;
}  // namespace

std::vector<std::string> expand_build_config(const std::vector<std::string>& args, const CLI::App* build_command) {
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
        // Read here, not by CLI11's ifstream: a FIFO or /dev/zero is refused, not waited on.
        std::istringstream text(read_text_file(path, max_config_bytes));
        items = CLI::ConfigTOML().from_config(text);
    } catch (const std::exception& e) {
        throw usage_error("--config " + path + ": " + e.what());
    }
    std::vector<std::string> out(args.begin(), args.end());
    for (const auto& item : items) {
        if (!(item.parents.empty() || (item.parents.size() == 1 && item.parents[0] == "build"))) continue;
        if (item.name == "config" || item.name == "++" || item.name == "--") continue;
        if (build_command && !build_command->get_option_no_throw("--" + item.name))
            throw usage_error("--config " + path + ": unknown key '" + item.name + "': not an option of shardpack build (the keys "
                              "are long option names without the dashes, e.g. shard-size = \"256MiB\"; see shardpack build --help)");
        if (given.count(item.name)) continue;
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
    b.progress = progress || o.progress;
    spdlog::debug("building {} from {}", b.out_dir, b.input.csv_path);
    const build_result r = run_build(b);
    if (r.interrupted_by) {
        spdlog::error("interrupted by signal {}: nothing was published; {} is unchanged", r.interrupted_by, b.out_dir);
        return 128 + r.interrupted_by;
    }
    const auto& t = r.totals;
    spdlog::info("{}: {} records ({} decoded, {} unchanged) in {} shard(s) ({} rewritten), {} bytes (ratio {:.2f}), "
                 "{} skipped{}, {:.2f} s, {:.1f} samples/s", b.out_dir, t.records, t.records - t.reused, t.reused,
                 r.report.at("shards_written").as_u64() + r.report.at("shards_reused").as_u64(), r.report.at("shards_written").as_u64(),
                 r.report.at("bytes_out").as_u64(),
                 r.report.at("compression_ratio").as_double(), t.rejected.size(),
                 b.input.files_left_out ? ", " + std::to_string(b.input.files_left_out) + " file(s) of the folders left out (see above)"
                                        : std::string(), r.seconds,
                 r.report.at("samples_per_second").as_double());
    for (const auto& row : t.rejected)
        spdlog::warn("skipped {}: {}", b.input.list_text.empty() && !b.input.from_stream ? "line " + std::to_string(row.csv_line)
                                                                 : row_origin(b.input, row.csv_line, row.image), row.reason);
    if (o.json) std::cout << r.report.dump();
    return 0;
}

}  // namespace shardpack
