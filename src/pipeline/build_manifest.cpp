#include "pipeline/build_manifest.hpp"

#include "dataset/dataset_writer.hpp"
#include "format/record_compressor.hpp"
#include "pipeline/option_names.hpp"
#include "shardpack/detail/hex.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {
using detail::json;

std::vector<detail::class_record> to_class_records(const std::vector<class_entry>& classes) {
    std::vector<detail::class_record> out;
    for (const auto& c : classes) out.push_back({c.name, c.has_color, c.r, c.g, c.b});
    return out;
}

json effective_options_json(const build_options& o, task_kind task) {
    json b = json::object();
    b.set("task", word_of(task_words, task));
    b.set("color", word_of(color_words, o.color));
    if (o.depth) b.set("depth", std::uint64_t(o.depth));  // absent: auto (the dtype is the schema's image.dtype)
    if (o.geometry.width) b.set("size", std::to_string(o.geometry.width) + "x" + std::to_string(o.geometry.height));
    else b.set("size", nullptr);
    b.set("resize", word_of(resize_words, o.geometry.resize));
    b.set("crop", word_of(crop_words, o.geometry.crop));
    b.set("filter", word_of(filter_words, o.geometry.filter));
    if (task == task_kind::segmentation) {
        b.set("label_layout", word_of(label_layout_words, o.label_layout));
        b.set("unknown_label", word_of(unknown_label_words, o.mask.unknown_label));
    }
    b.set("compression", word_of(compression_words, o.codec));
    b.set("level", o.level);
    if (uses_band_frames(o.codec)) {
        if (o.band_rows) b.set("band_rows", std::uint64_t(o.band_rows));
        else b.set("band_rows", "auto");
    }
    b.set("shard_size", o.shard_size);
    b.set("shuffle", o.shuffle);
    b.set("seed", o.seed);
    b.set("on_error", word_of(on_error_words, o.on_error));
    b.set("image_col", o.input.image_col);
    b.set("label_col", o.input.label_col);
    if (!o.input.fields.empty()) {
        json::array_t fields;
        for (const auto& f : o.input.fields) {
            json e = json::object();
            e.set("name", f.name);
            e.set("kind", detail::field_kind_name(f.kind));
            // A sample stream's values come with each sample, and its --field-names files are the
            // writer's temporary ones (the names themselves are in the fields section): neither
            // is recorded, so that the same samples give the same manifest.
            if (!f.coco_path.empty()) e.set("coco", f.coco_path);
            else if (!o.input.from_stream) e.set("column", f.column.empty() ? f.name : f.column);
            if (!f.names_path.empty() && !o.input.from_stream) e.set("names", f.names_path);
            fields.push_back(std::move(e));
        }
        b.set("fields", std::move(fields));
        b.set("unknown_name", o.input.unknown_name == unknown_name_policy::ignore ? "ignore" : "error");
    }
    return b;
}

json manifest_build_json(const build_options& o, const input_list& input, mask_value_kind mask_values) {
    json build = effective_options_json(o, input.task);
    if (input.task == task_kind::segmentation) {
        const bool index_masks = mask_values == mask_value_kind::index;
        build.set("mask_values", word_of(mask_values_words, mask_values));
        if (!index_masks) build.set("color_tolerance", o.mask.color_tolerance);
        if (index_masks) {
            // The number arrays are filled as json::array_t and wrapped once: json::push of a
            // temporary number makes GCC 12 warn (-Wmaybe-uninitialized, a false positive in
            // std::variant's move of the string alternative). The JSON is the same.
            json::array_t ignored;
            for (auto v : o.mask.ignore_values) ignored.emplace_back(unsigned(v));
            build.set("ignore_values", std::move(ignored));
            json::array_t values;
            for (std::size_t c = 0; c < input.classes.size(); ++c)
                values.emplace_back(input.classes[c].value >= 0 ? unsigned(input.classes[c].value) : unsigned(c));
            build.set("class_values", std::move(values));
        }
    }
    return build;
}

std::string record_options_digest(const build_options& o, const detail::schema_record& schema,
                                  const std::vector<detail::class_record>& classes, const json& libraries,
                                  const char* mask_values, const std::vector<class_entry>& table) {
    json d = json::object();
    d.set("color", word_of(color_words, o.color));
    d.set("size", std::to_string(o.geometry.width) + "x" + std::to_string(o.geometry.height));
    d.set("resize", word_of(resize_words, o.geometry.resize));
    d.set("crop", word_of(crop_words, o.geometry.crop));
    d.set("filter", word_of(filter_words, o.geometry.filter));
    d.set("unknown_label", word_of(unknown_label_words, o.mask.unknown_label));
    d.set("mask_values", mask_values);
    d.set("color_tolerance", o.mask.color_tolerance);
    json::array_t ignored;  // not json::push: see manifest_build_json
    for (auto v : o.mask.ignore_values) ignored.emplace_back(unsigned(v));
    d.set("ignore_values", std::move(ignored));
    d.set("compression", word_of(compression_words, o.codec));
    d.set("level", o.level);
    d.set("band_rows", std::uint64_t(o.band_rows));
    d.set("tool", SHARDPACK_VERSION);
    d.set("libraries", libraries);
    std::string bytes = d.dump(-1);
    unsigned char s[detail::schema_payload_size];
    detail::encode_schema(schema, s);
    bytes.append(reinterpret_cast<const char*>(s), sizeof s);
    const auto c = detail::encode_classes(classes);
    bytes.append(reinterpret_cast<const char*>(c.data()), c.size());
    for (const auto& e : table) bytes += std::to_string(e.value) + ",";  // index masks' values
    if (!schema.fields.empty()) {  // the fields' declarations shape every record (nothing added without them)
        const auto f = detail::encode_fields_section(schema.fields);
        bytes.append(reinterpret_cast<const char*>(f.data()), f.size());
    }
    return detail::hex16(XXH3_64bits(bytes.data(), bytes.size()));
}

std::string partition_options_digest(const json& build, const std::string& record_options_digest) {
    const std::string bytes = build.dump(-1) + "\n" + record_options_digest;
    return detail::hex16(XXH3_64bits(bytes.data(), bytes.size()));
}

json partition_json(const partition_spec& part, const row_slice& slice, std::uint64_t rows, const json& build,
                    const std::string& record_options_digest) {
    json p = json::object();
    p.set("index", part.index);
    p.set("count", part.count);
    p.set("rows", rows);
    p.set("first_row", slice.first);
    p.set("part_rows", slice.size);
    p.set("options_digest", partition_options_digest(build, record_options_digest));
    p.set("records_digest", record_options_digest);
    return p;
}

}  // namespace shardpack
