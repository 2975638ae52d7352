#include "inspect/record_exporter.hpp"

#include "decode/png_encoder.hpp"
#include "errors.hpp"
#include "format/output_file.hpp"
#include "image.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
using detail::json;

namespace {
void write_png(const std::string& path, const image_u8& img) {
    const std::vector<std::uint8_t> png = encode_png(img);
    write_file_atomically(path, std::string(png.begin(), png.end()));
}
}  // namespace

json export_record(const std::string& dir, std::size_t index, const std::string& prefix) {
    const dataset ds = dataset::open(dir);
    const sample s = ds.at(index);
    const auto view = s.image();
    image_u8 img;
    img.height = static_cast<std::uint32_t>(view.shape()[0]);
    img.width = static_cast<std::uint32_t>(view.shape()[1]);
    img.channels = static_cast<std::uint32_t>(view.shape()[2]);
    img.pixels.assign(view.begin(), view.end());
    json out = json::object();
    out.set("index", index);
    out.set("key", std::string(s.key()));
    const std::string image_path = prefix + ".image.png";
    write_png(image_path, img);
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
    bool any_ignored = false;
    for (auto id : ids) any_ignored |= id >= schema.class_count;
    image_u8 label;
    label.width = img.width;
    label.height = img.height;
    label.channels = any_ignored ? 4 : 3;
    label.pixels.assign(pixels * label.channels, 0);
    std::vector<std::uint64_t> counts(schema.class_count, 0);
    for (std::size_t p = 0; p < pixels; ++p) {
        std::uint8_t* px = label.pixels.data() + p * label.channels;
        if (ids[p] >= schema.class_count) continue;  // transparent black
        const auto& c = ds.classes()[ids[p]];
        px[0] = c.r;
        px[1] = c.g;
        px[2] = c.b;
        if (any_ignored) px[3] = 255;
        ++counts[ids[p]];
    }
    const std::string label_path = prefix + ".label.png";
    write_png(label_path, label);
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
