#include "transform/index_mask.hpp"

#include <algorithm>
#include <stdexcept>

namespace shardpack {

value_lookup::value_lookup(const std::vector<std::uint16_t>& class_values, const std::vector<std::uint16_t>& ignore_values)
    : table_(65536, unknown), classes_(class_values.size()) {
    if (class_values.size() > 65535) throw input_error("at most 65535 classes are supported");
    for (std::size_t id = 0; id < class_values.size(); ++id) {
        std::int32_t& slot = table_[class_values[id]];
        if (slot != unknown)
            throw usage_error("mask value " + std::to_string(class_values[id]) + " is given to class " + std::to_string(slot) +
                              " and to class " + std::to_string(id));
        slot = static_cast<std::int32_t>(id);
    }
    for (const std::uint16_t v : ignore_values) {
        std::int32_t& slot = table_[v];
        if (slot >= 0)
            throw usage_error("--ignore-values " + std::to_string(v) + ": that value is class " + std::to_string(slot) +
                              " of the class table; a value is a class or ignored, not both");
        slot = ignored;
    }
}

void map_index_mask(const value_plane& mask, const geometry_plan& plan, const value_lookup& lookup,
                    unknown_color_policy policy, std::uint16_t ignore_value, label_plane& out,
                    std::uint64_t* unknown_count, mask_mapping_stats* stats) {
    const axis_plan &ax = plan.x, &ay = plan.y;
    check_plan_consistent(plan, "map_index_mask");
    if (mask.values.size() < std::size_t(mask.width) * mask.height)
        throw std::invalid_argument("map_index_mask: the mask's buffer does not match its size");
    check_source_fits("mask", mask.width, mask.height, ax.src_len, nearest_rows_needed(plan));
    if (stats) {
        stats->by_tolerance.assign(lookup.size(), 0);
        stats->unknown.clear();
        stats->unknown_index.clear();
    }
    out.width = ax.out_len;
    out.height = ay.out_len;
    out.ids.assign(std::size_t(out.width) * out.height, ignore_value);
    std::uint64_t unknown = 0;
    if (ax.content_len && ay.content_len) {
        thread_local std::vector<std::uint32_t> xs;
        xs.resize(ax.content_len);
        for (std::uint32_t i = 0; i < ax.content_len; ++i) xs[i] = nearest_source(ax, ax.crop_offset + i);
        for (std::uint32_t t = 0; t < ay.content_len; ++t) {
            const std::uint32_t sy = nearest_source(ay, ay.crop_offset + t);
            const std::uint16_t* row = mask.row(sy);
            std::uint16_t* dst = out.ids.data() + std::size_t(ay.pad_before + t) * out.width + ax.pad_before;
            for (std::uint32_t i = 0; i < ax.content_len; ++i) {
                const std::uint16_t v = row[xs[i]];
                const int id = lookup.find(v);
                if (id >= 0) {
                    dst[i] = static_cast<std::uint16_t>(id);
                    continue;
                }
                dst[i] = ignore_value;
                if (id == value_lookup::ignored) continue;
                if (policy == unknown_color_policy::error)
                    throw unknown_value_error("unknown mask value " + std::to_string(v) + " at pixel (" + std::to_string(xs[i]) +
                                                  "," + std::to_string(sy) + ") \xE2\x80\x94 not in the class table",
                                              v, xs[i], sy);
                ++unknown;
                if (stats) {
                    const auto [it, fresh] = stats->unknown_index.emplace(v, stats->unknown.size());
                    if (fresh) stats->unknown.push_back({v, 0, xs[i], sy});
                    ++stats->unknown[it->second].pixels;
                }
            }
        }
    }
    if (unknown_count) *unknown_count = unknown;
}

}  // namespace shardpack
