#include "cli/colors_command.hpp"

#include <spdlog/spdlog.h>

#include <iostream>

#include "cli/build_command.hpp"
#include "errors.hpp"
#include "input/folder_input.hpp"
#include "io/output_file.hpp"
#include "inspect/color_census.hpp"

namespace shardpack {

CLI::App* add_colors_command(CLI::App& app, colors_command_options& o) {
    CLI::App* c = app.add_subcommand(
        "colors", "List every color (or index value) the masks of a list hold, with pixel and file counts, an example and "
                  "the nearest dictionary class");
    c->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    c->add_option("--csv", o.csv, "The input list (as for build): image path and mask path");
    c->add_option("--images", o.images, "Instead of --csv: the images folder (with --masks)");
    c->add_option("--masks", o.masks, "With --images: the masks, paired with the images by path and file name");
    add_mask_pairing_options(*c, o.mask_suffix, o.image_suffix);
    c->add_option("--classes", o.classes, "A class dictionary (name,r,g,b, or name,id for index masks) to match against");
    c->add_option("--root", o.root, "Resolve relative paths against this folder instead of the CSV's folder");
    c->add_option("--image-col", o.image_col, "Image column: a header name or a 0-based index")->capture_default_str();
    c->add_option("--label-col", o.label_col, "Mask column: a header name or a 0-based index")->capture_default_str();
    c->add_option("--color-tolerance", o.tolerance, "Count a color within N of one dictionary color as that class")
        ->check(CLI::Range(0, 255))->capture_default_str();
    c->add_option("--mask-values", o.mask_values, "color, index (pixel values are class ids) or auto")
        ->check(CLI::IsMember({"auto", "color", "index"}))->capture_default_str();
    c->add_option("--ignore-values", o.ignore_values, "Index masks: values the build would ignore, e.g. 255");
    c->add_option("--threads", o.threads, "Worker threads; 0 = all cores")->capture_default_str();
    c->add_flag("--json", o.json, "Print JSON to stdout");
    c->add_option("--write-dict", o.write_dict,
                  "Write a class_dict.csv that would build: dictionary names kept, other colors named class_R_G_B");
    return c;
}

int run_colors_command(const colors_command_options& o) {
    color_census_options co;
    co.input.csv_path = o.csv;
    co.input.root = o.root;
    co.input.image_col = o.image_col;
    co.input.label_col = o.label_col;
    co.input.classes_path = o.classes;
    if (o.images.empty() == o.csv.empty()) throw usage_error("give --csv LIST, or --images DIR --masks DIR");
    if (o.images.empty() && !(o.mask_suffix.empty() && o.image_suffix.empty()))
        throw usage_error("--mask-suffix and --image-suffix apply to --images DIR --masks DIR");
    if (!o.images.empty()) {
        if (o.masks.empty()) throw usage_error("--images DIR needs --masks DIR here: colors reads masks");
        log_folder_listing(list_image_folders({o.images, o.masks, o.mask_suffix, o.image_suffix}, co.input));
    }
    co.mask.values = o.mask_values == "index" ? mask_value_kind::index
                   : o.mask_values == "color" ? mask_value_kind::color : mask_value_kind::automatic;
    co.mask.color_tolerance = o.tolerance;
    co.mask.ignore_values = parse_ignore_values(o.ignore_values);
    co.threads = o.threads;
    const color_census census = scan_mask_colors(co);
    if (o.json) std::cout << census_to_json(census).dump();
    else std::cout << format_census(census);
    spdlog::info("scanned {} masks ({} pixels) in {:.2f} s: {:.1f} masks/s", census.masks, census.pixels, census.seconds,
                 census.seconds > 0 ? double(census.masks) / census.seconds : 0.0);
    if (!o.write_dict.empty()) {
        unsigned tolerance = 0;
        const std::string text = census_class_dict(census, tolerance);
        write_file_atomically(o.write_dict, text);
        std::string command = "shardpack build " + (o.csv.empty() ? co.input.list_source : "--csv " + o.csv) +
                              " --classes " + o.write_dict;
        if (!o.root.empty()) command += " --root " + o.root;
        if (census.index_masks) command += " --mask-values index";
        if (tolerance) command += " --color-tolerance " + std::to_string(tolerance);
        if (!o.ignore_values.empty()) command += " --ignore-values " + o.ignore_values;
        spdlog::info("wrote {} ({} classes); build with: {} --out DIR", o.write_dict,
                     std::count(text.begin(), text.end(), '\n') - 1, command);
    }
    if (!census.unreadable.empty()) {
        spdlog::error("{} mask(s) could not be read (listed above)", census.unreadable.size());
        return 1;
    }
    return 0;
}

}  // namespace shardpack
