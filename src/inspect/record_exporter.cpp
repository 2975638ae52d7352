#include "inspect/record_exporter.hpp"

#include <filesystem>

#include "decode/png_encoder.hpp"
#include "errors.hpp"
#include "io/output_file.hpp"
#include "io/output_folder.hpp"
#include "image.hpp"
#include "inspect/bitmap_font.hpp"
#include "inspect/contact_sheet.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
using detail::json;

void write_png_file(const std::string& path, const image_u8& img) {
    const std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) output_folder::open(parent.string(), true, true);
    std::vector<std::uint8_t> png;
    try {
        png = encode_png(img);
    } catch (const std::exception& e) {
        throw io_error("cannot write " + path + ": " + e.what());
    }
    write_file_atomically(path, std::string(png.begin(), png.end()));
}

void write_png_file(const std::string& path, const rgb_canvas& canvas) {
    image_u8 img;
    img.width = std::uint32_t(canvas.width);
    img.height = std::uint32_t(canvas.height);
    img.channels = 3;
    img.pixels = canvas.pixels;
    write_png_file(path, img);
}

std::vector<std::size_t> select_records(const std::string& dir, const std::vector<std::size_t>& indices,
                                        const std::string& range, const std::string& key) {
    const dataset ds = dataset::open(dir);
    std::vector<std::size_t> out;
    for (auto i : indices) {
        if (i >= ds.size())
            throw input_error("--index " + std::to_string(i) + " is out of range: the dataset has " + std::to_string(ds.size()) + " records (0.." +
                              std::to_string(ds.size() ? ds.size() - 1 : 0) + ")");
        out.push_back(i);
    }
    if (!range.empty()) {
        const auto colon = range.find(':');
        std::size_t a = 0, b = 0, used_a = 0, used_b = 0;
        try {
            if (colon == std::string::npos) throw std::invalid_argument("no colon");
            a = std::stoull(range.substr(0, colon), &used_a);
            b = std::stoull(range.substr(colon + 1), &used_b);
        } catch (const std::exception&) {
            used_a = 0;
        }
        if (colon == std::string::npos || used_a != colon || used_b != range.size() - colon - 1 || a >= b)
            throw usage_error("--range " + range + ": expected A:B with A < B (B exclusive)");
        if (b > ds.size())
            throw input_error("--range " + range + ": expected A:B with 0 <= A < B <= " + std::to_string(ds.size()) +
                              " (B exclusive)");
        for (std::size_t i = a; i < b; ++i) out.push_back(i);
    }
    if (!key.empty()) {
        std::size_t found = 0;
        for (std::size_t i = 0; i < ds.size(); ++i) {
            const sample s = ds.at(i);
            if (s.key() == key) {
                out.push_back(i);
                ++found;
            }
        }
        if (!found) throw input_error(dir + ": no record has the key '" + key + "'");
    }
    return out;
}

json export_record(const std::string& dir, std::size_t index, const std::string& prefix, bool overlay) {
    // PREFIX's folder is made by write_png_file, before the first file.
    const dataset ds = dataset::open(dir);
    const sample s = ds.at(index);
    image_u8 img;
    img.height = static_cast<std::uint32_t>(s.height());
    img.width = static_cast<std::uint32_t>(s.width());
    img.channels = static_cast<std::uint32_t>(ds.schema().channels);
    if (img.channels > 4)
        throw input_error(dir + ": record " + std::to_string(index) + " has " + std::to_string(img.channels) +
                          " bands; export writes PNG, which holds 1 to 4");
    if (ds.schema().image_value_bytes == 2) {  // a 16-bit PNG, every bit kept
        img.sample_bytes = 2;
        img.pixels.resize(std::size_t(img.width) * img.height * img.channels * 2);
        read_context image_ctx;
        sample_buffers image_out;
        image_out.image_u16 = img.samples16();
        image_out.image_capacity = img.pixels.size() / 2;
        ds.read_into(index, image_out, image_ctx);
    } else {
        const auto view = s.image();
        img.pixels.assign(view.begin(), view.end());
    }
    json out = json::object();
    out.set("index", index);
    out.set("key", std::string(s.key()));
    const std::string image_path = prefix + ".image.png";
    write_png_file(image_path, img);
    out.set("image", image_path);

    const auto& schema = ds.schema();
    if (schema.task == task::classification) {
        out.set("class_id", s.class_id());
        out.set("class", ds.classes().at(std::size_t(s.class_id())).name);
        return out;
    }
    const std::size_t pixels = std::size_t(img.width) * img.height;
    std::vector<std::uint16_t> ids(pixels);
    read_context ctx;
    sample_buffers buffers;
    buffers.label_index = ids.data();
    buffers.label_index_capacity = ids.size();
    ds.read_into(index, buffers, ctx);
    image_u8 label;
    label.width = img.width;
    label.height = img.height;
    label.channels = 3;
    label.pixels.assign(pixels * 3, 0);
    std::vector<std::uint64_t> counts(schema.class_count, 0);
    for (std::size_t p = 0; p < pixels; ++p) {
        std::uint8_t* px = label.pixels.data() + p * 3;
        if (ids[p] >= schema.class_count) {  // ignored: a magenta and black checkerboard
            const std::size_t x = p % img.width, y = p / img.width;
            if (((x / 4) + (y / 4)) % 2 == 0) {
                px[0] = 255;
                px[2] = 255;
            }
            continue;
        }
        const rgb c = class_color(ds, ids[p]);  // the dictionary's, or the palette's
        px[0] = c.r;
        px[1] = c.g;
        px[2] = c.b;
        ++counts[ids[p]];
    }
    if (overlay) {
        image_u8 blend;
        blend.width = img.width;
        blend.height = img.height;
        blend.channels = 3;
        blend.pixels.resize(pixels * 3);
        for (std::size_t p = 0; p < pixels; ++p)
            for (int k = 0; k < 3; ++k) {
                const std::size_t at = img.channels < 3 ? p * img.channels : p * img.channels + std::size_t(k);
                const std::uint8_t v = img.sample_bytes == 2 ? std::uint8_t(img.samples16()[at] >> 8) : img.pixels[at];
                blend.pixels[p * 3 + std::size_t(k)] = std::uint8_t((unsigned(v) + label.pixels[p * 3 + std::size_t(k)] + 1) / 2);
            }
        const std::string overlay_path = prefix + ".overlay.png";
        write_png_file(overlay_path, blend);
        out.set("overlay", overlay_path);
    }
    const std::string label_path = prefix + ".label.png";
    write_png_file(label_path, label);
    out.set("label", label_path);
    out.set("class_id", -1);
    json present = json::array();
    for (std::size_t c = 0; c < counts.size(); ++c)
        if (counts[c]) present.push(ds.classes()[c].name);
    out.set("classes_present", present);
    out.set("ignored_pixels", std::uint64_t(std::count(ids.begin(), ids.end(), std::uint16_t(schema.ignore_value))));
    return out;
}

}  // namespace shardpack
