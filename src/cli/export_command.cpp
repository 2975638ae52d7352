#include "cli/export_command.hpp"

#include <cstdint>
#include <iostream>

#include "cli/build_command.hpp"
#include "errors.hpp"
#include "inspect/contact_sheet.hpp"
#include "inspect/record_exporter.hpp"
#include "shardpack/detail/json.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {

CLI::App* add_export_command(CLI::App& app, export_command_options& o) {
    CLI::App* c = app.add_subcommand("export", "Write records as PNG files and print their keys and classes");
    c->add_option("dir", o.dir, "Dataset folder")->required();
    CLI::Option* index = c->add_option("--index", o.indices, "Record index; several allowed (--index 3 7 or --index 3,7)")
        ->delimiter(',')
        ->check(count_in_range(UINT64_MAX));
    CLI::Option* range = c->add_option("--range", o.range, "Records A:B (A inclusive, B exclusive)");
    CLI::Option* key = c->add_option("--key", o.key, "The record(s) whose key (the image path as the CSV wrote it) is KEY");
    CLI::Option* overlay = c->add_flag("--overlay", o.overlay, "Also write PREFIX.overlay.png: the label blended over the image");
    c->add_option("--out", o.prefix,
                  "Output prefix: PREFIX.image.png, PREFIX.label.png (PREFIX-I.* for several records); with --grid the "
                  "sheet's file, FILE.png; its folder is created")
        ->required();
    CLI::Option* grid = c->add_flag("--grid", o.grid,
                "Write one contact sheet (PNG): the records as tiles with their label overlay, captions (index and key, or "
                "class) and a legend of class colors; the records of --index/--range/--key, else --count of them");
    grid->excludes(overlay);
    c->add_option("--count", o.count, "--grid: how many records (default 16): the first ones, or drawn with --sample-seed")
        ->check(CLI::Range(std::size_t(1), std::size_t(10000)))
        ->needs(grid)
        ->excludes(index)
        ->excludes(range)
        ->excludes(key);
    c->add_option("--sample-seed", o.sample_seed, "--grid: draw the --count records at random with this seed (an integer)")
        ->needs(grid)
        ->excludes(index)
        ->excludes(range)
        ->excludes(key);
    c->add_option("--tile", o.tile, "--grid: a tile's longest side in pixels (default 256); larger records shrink (nearest pixel)")
        ->check(CLI::Range(std::size_t(8), std::size_t(4096)))
        ->needs(grid);
    c->add_option("--columns", o.columns, "--grid: tiles per row (default: about square)")
        ->check(CLI::Range(std::size_t(1), std::size_t(10000)))
        ->needs(grid);
    c->add_option("--alpha", o.alpha, "--grid: the overlay's opacity, 0..1 (default 0.5)")->check(CLI::Range(0.0, 1.0))
        ->needs(grid);
    c->add_option("--hide", o.hide, "--grid: classes (names or ids) left out of the overlay, e.g. --hide background")
        ->delimiter(',')
        ->needs(grid);
    c->add_option("--crop", o.crop,
                  "--grid: show what the loader delivers: HxW windows (crop=(H, W) in Python); with --crop-position, "
                  "--hflip, --vflip, --epoch, --seed as the loader takes them")
        ->needs(grid);
    c->add_option("--crop-position", o.crop_position, "--grid: center (default), random or foreground")
        ->check(CLI::IsMember({"center", "random", "foreground"}))
        ->needs(grid);
    c->add_option("--background", o.background,
                  "--grid --crop-position foreground: the classes (names or ids) that are not foreground (default: class 0)")
        ->delimiter(',')
        ->needs(grid);
    c->add_option("--hflip", o.hflip, "--grid: probability of a left-right flip (default 0)")->check(CLI::Range(0.0, 1.0))
        ->needs(grid);
    c->add_option("--vflip", o.vflip, "--grid: probability of a top-bottom flip (default 0)")->check(CLI::Range(0.0, 1.0))
        ->needs(grid);
    c->add_option("--epoch", o.epoch, "--grid: the loader's epoch (default 0)")
        ->needs(grid);
    c->add_option("--seed", o.seed, "--grid: the loader's seed (default 0)")
        ->needs(grid);
    return c;
}

namespace {

// Class names or ids, resolved against the dataset's classes.
std::vector<std::uint32_t> class_ids(const dataset& ds, const std::vector<std::string>& names, const char* option) {
    std::vector<std::uint32_t> out;
    for (const std::string& name : names) {
        std::size_t found = ds.classes().size();
        for (std::size_t c = 0; c < ds.classes().size(); ++c)
            if (ds.classes()[c].name == name) found = c;
        if (found == ds.classes().size() && !name.empty() && name.find_first_not_of("0123456789") == std::string::npos &&
            name.size() < 7 && std::stoul(name) < ds.classes().size())
            found = std::stoul(name);
        if (found == ds.classes().size()) {
            std::string known;
            for (const auto& c : ds.classes()) known += (known.empty() ? "" : ", ") + c.name;
            throw usage_error(std::string(option) + " " + name + ": no such class (the classes: " + known + ")");
        }
        out.push_back(std::uint32_t(found));
    }
    return out;
}

std::uint64_t parse_u64(const std::string& text, const char* option) {
    std::size_t used = 0;
    std::uint64_t v = 0;
    try {
        v = std::stoull(text, &used);
    } catch (const std::exception&) {
        used = 0;
    }
    if (text.empty() || used != text.size() || text[0] == '-') throw usage_error(std::string(option) + " " + text + ": expected an integer");
    return v;
}

int run_grid(const export_command_options& o) {
    const dataset ds = dataset::open(o.dir);
    contact_sheet_options sheet;
    if (!o.indices.empty() || !o.range.empty() || !o.key.empty())
        sheet.records = select_records(o.dir, o.indices, o.range, o.key);
    else
        sheet.records = sheet_records(ds.size(), o.count, !o.sample_seed.empty(),
                                      o.sample_seed.empty() ? 0 : parse_u64(o.sample_seed, "--sample-seed"));
    if (sheet.records.empty()) throw input_error(o.dir + ": no records to show");
    sheet.tile = o.tile;
    sheet.columns = o.columns;
    sheet.alpha = o.alpha;
    sheet.hidden = class_ids(ds, o.hide, "--hide");
    sheet.title = o.dir;
    augmentation aug;
    const bool augmented = !o.crop.empty() || o.hflip > 0 || o.vflip > 0;
    if (!augmented && (o.crop_position != "center" || !o.background.empty()))
        throw usage_error("--crop-position and --background need --crop HxW");
    if (!o.crop.empty()) {
        const auto x = o.crop.find('x');
        if (x == std::string::npos) throw usage_error("--crop " + o.crop + ": expected HxW, e.g. 512x512");
        aug.height = parse_u64(o.crop.substr(0, x), "--crop");
        aug.width = parse_u64(o.crop.substr(x + 1), "--crop");
        if (!aug.height || !aug.width || aug.height > 65536 || aug.width > 65536)
            throw usage_error("--crop " + o.crop + ": sides must be 1..65536");
    }
    aug.position = o.crop_position == "random" ? crop_position::random
                 : o.crop_position == "foreground" ? crop_position::foreground : crop_position::center;
    if (aug.position == crop_position::foreground && ds.schema().task != task::segmentation)
        throw usage_error("--crop-position foreground needs a segmentation dataset");
    if (!o.background.empty()) aug.background = class_ids(ds, o.background, "--background");
    aug.hflip = o.hflip > 0 ? flip_mode::random : flip_mode::none;
    aug.vflip = o.vflip > 0 ? flip_mode::random : flip_mode::none;
    aug.hflip_probability = float(o.hflip);
    aug.vflip_probability = float(o.vflip);
    aug.epoch = o.epoch;
    aug.seed = o.seed;
    if (augmented) sheet.augment = &aug;
    const contact_sheet out = render_contact_sheet(ds, sheet);

    write_png_file(o.prefix, out.canvas);
    detail::json report = detail::json::object();
    report.set("grid", o.prefix);
    report.set("width", std::uint64_t(out.canvas.width));
    report.set("height", std::uint64_t(out.canvas.height));
    detail::json tiles = detail::json::array();
    std::size_t fallbacks = 0;
    for (const sheet_tile& t : out.tiles) {
        detail::json e = detail::json::object();
        e.set("index", std::uint64_t(t.index));
        e.set("x", std::uint64_t(t.x));
        e.set("y", std::uint64_t(t.y));
        e.set("width", std::uint64_t(t.width));
        e.set("height", std::uint64_t(t.height));
        if (sheet.augment) {
            detail::json w = detail::json::array();
            for (std::uint64_t v : {std::uint64_t(t.box.y), std::uint64_t(t.box.x), std::uint64_t(t.box.hflip),
                                    std::uint64_t(t.box.vflip)})
                w.push(v);
            e.set("window", w);
            fallbacks += t.box.fallback;
        }
        tiles.push(e);
    }
    report.set("tiles", tiles);
    if (aug.position == crop_position::foreground && sheet.augment) report.set("foreground_fallbacks", std::uint64_t(fallbacks));
    std::cout << report.dump();
    return 0;
}

}  // namespace

int run_export_command(const export_command_options& o) {
    if (o.grid) return run_grid(o);
    if (o.indices.empty() && o.range.empty() && o.key.empty())
        throw usage_error("export: choose records with --index I, --range A:B or --key KEY");
    refuse_url("--out", o.prefix, "give a local path prefix");
    const auto chosen = select_records(o.dir, o.indices, o.range, o.key);
    if (chosen.size() == 1) {
        std::cout << export_record(o.dir, chosen[0], o.prefix, o.overlay).dump();
    } else {
        detail::json all = detail::json::array();
        for (auto i : chosen) all.push(export_record(o.dir, i, o.prefix + "-" + std::to_string(i), o.overlay));
        std::cout << all.dump();
    }
    return 0;
}

}  // namespace shardpack
