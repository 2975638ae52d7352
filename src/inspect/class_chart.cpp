#include "inspect/class_chart.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "inspect/contact_sheet.hpp"

namespace shardpack {

class_counts count_classes(const dataset& ds) {
    const schema_info& info = ds.schema();
    class_counts out;
    out.segmentation = info.task == task::segmentation;
    out.pixels.assign(info.class_count, 0);
    out.records.assign(info.class_count, 0);
    out.total_records = ds.size();
    read_context ctx;
    std::vector<std::uint16_t> ids;
    std::vector<std::uint64_t> here(info.class_count + 1);
    for (std::size_t i = 0; i < ds.size(); ++i) {
        sample_buffers b;
        if (!out.segmentation) {
            std::int32_t c = -1;
            b.class_id = &c;
            ds.read_into(i, b, ctx);
            if (c >= 0 && std::size_t(c) < info.class_count) ++out.records[std::size_t(c)];
            continue;
        }
        const sample s = ds.read(i, ctx);
        ids.resize(s.height() * s.width());
        b.label_index = ids.data();
        b.label_index_capacity = ids.size();
        ds.read_into(i, b, ctx);
        std::fill(here.begin(), here.end(), 0);
        for (std::uint16_t v : ids) ++here[std::min<std::size_t>(v, info.class_count)];
        for (std::size_t c = 0; c < info.class_count; ++c) {
            out.pixels[c] += here[c];
            out.labelled_pixels += here[c];
            out.records[c] += here[c] != 0;
        }
    }
    return out;
}

class_chart render_class_chart(const dataset& ds, const class_counts& counts, const std::string& title) {
    constexpr rgb background{250, 250, 250}, ink{20, 20, 20}, grid{215, 215, 215};
    constexpr std::size_t margin = 12, row_h = 16, bar_h = 11, full = 300, gap = 24;
    const std::size_t classes = counts.records.size();
    std::size_t name_chars = 10;
    for (std::size_t c = 0; c < classes; ++c)
        name_chars = std::max(name_chars, std::to_string(c).size() + 1 + ds.classes()[c].name.size());
    name_chars = std::min<std::size_t>(name_chars, 32);
    const std::size_t name_w = text_width(std::string(name_chars, 'x')) + 8;
    const std::size_t label_w = text_width("100.00%") + 8;  // the percentage after each bar
    const std::size_t panels = counts.segmentation ? 2 : 1;
    const std::size_t panel_w = full + label_w + gap;
    const std::size_t width = 2 * margin + name_w + panels * panel_w;
    const std::size_t top = margin + 3 * glyph_cell_height + 6;
    class_chart chart;
    chart.full_length = full;
    chart.canvas = rgb_canvas(width, top + classes * row_h + margin, background);
    rgb_canvas& cv = chart.canvas;
    draw_text(cv, margin, margin, title, ink, 1, width - 2 * margin);
    for (std::size_t p = 0; p < panels; ++p) {
        const bool records = counts.segmentation ? p == 1 : true;
        const std::size_t x0 = margin + name_w + p * panel_w;
        char head[128];
        if (records)
            std::snprintf(head, sizeof head, counts.segmentation ? "records holding the class (of %llu)" : "records (of %llu)",
                          static_cast<unsigned long long>(counts.total_records));
        else
            std::snprintf(head, sizeof head, "labelled pixels (of %llu)", static_cast<unsigned long long>(counts.labelled_pixels));
        draw_text(cv, x0, margin + 2 * glyph_cell_height, head, ink, 1, panel_w);
        for (std::size_t q = 0; q <= 4; ++q)  // 0, 25, 50, 75, 100%
            cv.fill_rect(x0 + q * full / 4, top - 3, 1, classes * row_h + 3, grid);
        for (std::size_t c = 0; c < classes; ++c) {
            const std::uint64_t n = records ? counts.records[c] : counts.pixels[c];
            const std::uint64_t total = records ? counts.total_records : counts.labelled_pixels;
            chart_bar b;
            b.class_id = c;
            b.records = records;
            b.fraction = total ? double(n) / double(total) : 0.0;
            b.x = x0;
            b.y = top + c * row_h + (row_h - bar_h) / 2;
            b.length = std::size_t(std::lround(b.fraction * double(full)));
            b.height = bar_h;
            b.color = class_color(ds, c);
            cv.fill_rect(b.x, b.y, b.length, b.height, b.color);
            if (b.length) cv.frame_rect(b.x, b.y, b.length, b.height, ink);
            char pct[32];
            std::snprintf(pct, sizeof pct, "%.2f%%", 100.0 * b.fraction);
            draw_text(cv, b.x + b.length + 4, top + c * row_h + (row_h - 7) / 2, pct, ink);
            chart.bars.push_back(b);
        }
    }
    for (std::size_t c = 0; c < classes; ++c)
        draw_text(cv, margin, top + c * row_h + (row_h - 7) / 2, std::to_string(c) + " " + ds.classes()[c].name, ink, 1,
                  name_w - 8);
    return chart;
}

}  // namespace shardpack
