#include "transform/mask_mapper.hpp"

#include "decode/image_decoder.hpp"
#include "decode/png_value_decoder.hpp"

namespace shardpack {

std::string color_text(std::uint32_t rgb) {
    return "(" + std::to_string((rgb >> 16) & 0xFF) + "," + std::to_string((rgb >> 8) & 0xFF) + "," +
           std::to_string(rgb & 0xFF) + ")";
}

mask_value_kind resolve_mask_values(const mask_options& o, const std::vector<class_entry>& classes,
                                    const std::string& path) {
    mask_value_kind kind = o.values;
    if (kind == mask_value_kind::automatic)
        kind = classes_have_values(classes) ? mask_value_kind::index : mask_value_kind::color;
    if (kind == mask_value_kind::color && !classes_have_colors(classes))
        throw usage_error("--mask-values color: " + path + " gives class ids, not colors (r,g,b columns); "
                          "use --mask-values index for masks whose values are class ids");
    if (kind == mask_value_kind::color && !o.ignore_values.empty())
        throw usage_error("--ignore-values applies to index masks (--mask-values index); color masks map a color "
                          "not in the dictionary by --unknown-label");
    if (kind == mask_value_kind::index && o.color_tolerance)
        throw usage_error("--color-tolerance applies to color masks; index masks map values exactly");
    if (kind == mask_value_kind::color) check_color_tolerance(classes, o.color_tolerance, path);
    return kind;
}

mask_mapper::mask_mapper(const std::vector<class_entry>& classes, mask_value_kind kind, const mask_options& o, std::string hint)
    : classes_(classes), kind_(kind), policy_(o.unknown_label), hint_(std::move(hint)) {
    if (kind_ == mask_value_kind::index) {
        std::vector<std::uint16_t> values;
        const bool given = classes_have_values(classes);
        for (std::size_t id = 0; id < classes.size(); ++id)
            values.push_back(static_cast<std::uint16_t>(given ? classes[id].value : std::int32_t(id)));
        values_.emplace(values, o.ignore_values);
    } else {
        std::vector<label_color> colors;
        for (const auto& c : classes) colors.push_back({c.r, c.g, c.b});
        colors_.emplace(colors, o.color_tolerance);
    }
}

std::string mask_mapper::explain_color(std::uint32_t rgb) const {
    if (!colors_ || classes_.empty()) return "";
    const auto n = colors_->nearest(rgb);
    const class_entry& c = classes_[std::size_t(n.id)];
    std::string text = "nearest class '" + c.name + "' " + color_text(std::uint32_t(c.r) << 16 | std::uint32_t(c.g) << 8 | c.b) +
                       " at distance " + std::to_string(n.distance);
    // Would that tolerance be allowed with this dictionary? Only if no two classes lie within 2d.
    bool allowed = true;
    for (std::size_t a = 0; a < classes_.size() && allowed; ++a)
        for (std::size_t b = a + 1; b < classes_.size() && allowed; ++b) {
            const auto& x = classes_[a];
            const auto& y = classes_[b];
            allowed = color_distance(std::uint32_t(x.r) << 16 | std::uint32_t(x.g) << 8 | x.b,
                                      std::uint32_t(y.r) << 16 | std::uint32_t(y.g) << 8 | y.b) > 2 * n.distance;
        }
    if (n.distance <= 8 && allowed)
        text += ": --color-tolerance " + std::to_string(n.distance) + " would map it to '" + c.name + "'";
    text += "; --unknown-label ignore maps it to the ignore value; to see every color of every mask: " + hint_;
    return text;
}

std::string mask_mapper::explain_value(std::uint16_t value) const {
    std::string text = "add it to the class table, or list it in --ignore-values";
    if (value == 255) text += " (255 marks boundaries in VOC-style masks: --ignore-values 255)";
    text += "; to see every value of every mask: " + hint_;
    return text;
}

void decode_mask(const std::uint8_t* data, std::size_t size, file_format format, mask_value_kind kind, std::uint32_t max_rows,
                 mask_scratch& scratch, const std::atomic<int>* interrupt) {
    if (kind == mask_value_kind::index) {
        decode_mask_values(data, size, format, max_rows, scratch.values, interrupt, &scratch.session.png);
        return;
    }
    decode_request request;
    request.layout = pixel_layout::rgb;
    request.max_rows = max_rows;
    request.interrupt = interrupt;
    decode_image(data, size, format, request, scratch.colors, nullptr, &scratch.session);
}

void mask_mapper::map(const std::uint8_t* data, std::size_t size, file_format format, const geometry_plan& plan,
                      std::uint16_t ignore_value,
                      label_plane& out, std::uint64_t& unknown, mask_mapping_stats& stats, mask_scratch& scratch,
                      const std::atomic<int>* interrupt) const {
    decode_mask(data, size, format, kind_, plan.y.src_rows_needed(), scratch, interrupt);
    map_decoded(plan, ignore_value, out, unknown, stats, scratch);
}

void mask_mapper::map_decoded(const geometry_plan& plan, std::uint16_t ignore_value, label_plane& out, std::uint64_t& unknown,
                              mask_mapping_stats& stats, const mask_scratch& scratch) const {
    if (values_) {
        try {
            map_index_mask(scratch.values, plan, *values_, policy_, ignore_value, out, &unknown, &stats);
        } catch (const unknown_value_error& e) {
            throw input_error(std::string(e.what()) + "; " + explain_value(e.value));
        }
        return;
    }
    try {
        map_mask(scratch.colors, plan, *colors_, policy_, ignore_value, out, nullptr, &unknown, &stats);
    } catch (const unknown_color_error& e) {
        throw input_error(std::string(e.what()) + "; " + explain_color(e.rgb));
    }
}

}  // namespace shardpack
