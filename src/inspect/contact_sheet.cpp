#include "inspect/contact_sheet.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>

namespace shardpack {

namespace {

// Distinct colors for classes without a dictionary color (magenta is left to ignored pixels).
const rgb palette[] = {{230, 25, 75},   {60, 180, 75},   {255, 225, 25}, {0, 130, 200},  {245, 130, 48},
                       {145, 30, 180},  {70, 240, 240},  {210, 245, 60}, {250, 190, 212}, {0, 128, 128},
                       {220, 190, 255}, {170, 110, 40},  {128, 0, 0},    {170, 255, 195}, {128, 128, 0},
                       {255, 215, 180}, {0, 0, 128},     {128, 128, 128}};
constexpr rgb sheet_background{32, 32, 32}, text_color{235, 235, 235}, dim_text{150, 150, 150};
constexpr std::size_t margin = 8, gap = 8;

std::string describe(const augmentation* a) {
    if (!a) return "as stored";
    std::string s = "as the loader delivers them:";
    if (a->height) {
        const char* where = a->position == crop_position::center ? "center"
                          : a->position == crop_position::random ? "random"
                          : a->position == crop_position::foreground ? "foreground" : "given";
        s += " crop " + std::to_string(a->height) + "x" + std::to_string(a->width) + " " + where + ",";
    }
    char flips[96];
    std::snprintf(flips, sizeof flips, " hflip %.2g, vflip %.2g,",
                  a->hflip == flip_mode::random ? double(a->hflip_probability) : 0.0,
                  a->vflip == flip_mode::random ? double(a->vflip_probability) : 0.0);
    return s + flips + " epoch " + std::to_string(a->epoch) + ", seed " + std::to_string(a->seed);
}

}  // namespace

rgb class_color(const dataset& ds, std::size_t id) {
    const class_info& c = ds.classes().at(id);
    if (c.has_color) return {c.r, c.g, c.b};
    return palette[id % (sizeof palette / sizeof palette[0])];
}

std::vector<std::size_t> sheet_records(std::size_t size, std::size_t count, bool random, std::uint64_t seed) {
    std::vector<std::size_t> all(size);
    std::iota(all.begin(), all.end(), std::size_t(0));
    count = std::min(count, size);
    if (random)  // a partial Fisher-Yates shuffle with the reader's splitmix64 stream
        for (std::size_t k = 0; k < count; ++k)
            std::swap(all[k], all[k + detail::splitmix64(seed ^ detail::splitmix64(k)) % (size - k)]);
    all.resize(count);
    return all;
}

namespace {

void check_sheet_options(const dataset& ds, const contact_sheet_options& o) {
    const schema_info& info = ds.schema();
    if (o.tile < 8 || o.tile > 4096) throw error("contact sheet: tile must be 8..4096 pixels, not " + std::to_string(o.tile));
    if (!(o.alpha >= 0.0 && o.alpha <= 1.0)) throw error("contact sheet: alpha must be in [0, 1]");
    if (o.records.empty()) throw error("contact sheet: no records to show");
    for (std::uint32_t c : o.hidden)
        if (c >= info.class_count)
            throw error("contact sheet: hidden class " + std::to_string(c) + " is out of range (" +
                        std::to_string(info.class_count) + " classes)");
    for (std::size_t i : o.records)
        if (i >= ds.size())
            throw error("contact sheet: record " + std::to_string(i) + " is out of range (" + std::to_string(ds.size()) +
                        " records)");
}

// What every tile and the legend share: the text scale and, per class, its color and whether
// it is drawn (index class_count: ignored pixels).
struct sheet_style {
    std::size_t fs = 1;    // text scale
    std::size_t line = 0;  // a text line's height
    std::vector<rgb> colors;
    std::vector<unsigned char> shown;
    unsigned alpha = 0;  // of the overlay, in 256ths
};

sheet_style style_of(const dataset& ds, const contact_sheet_options& o) {
    const schema_info& info = ds.schema();
    sheet_style st;
    st.fs = o.tile >= 384 ? 2 : 1;
    st.line = glyph_cell_height * st.fs;
    st.colors.assign(info.class_count + 1, ignore_color);
    st.shown.assign(info.class_count + 1, 1);
    for (std::size_t c = 0; c < info.class_count; ++c) st.colors[c] = class_color(ds, c);
    for (std::uint32_t c : o.hidden) st.shown[c] = 0;
    st.alpha = unsigned(std::lround(o.alpha * 256.0));
    return st;
}

// A tile as drawn, before the layout places it.
struct drawn {
    sheet_tile t;
    std::vector<std::uint8_t> rgb;  // height x width x 3
    std::string caption, second;
};

// The buffers a tile is read into, reused from tile to tile.
struct tile_buffers {
    read_context ctx;
    std::vector<std::uint8_t> image;
    std::vector<std::uint16_t> ids;
};

// Shrinks the record read into `b` to the tile's size (the nearest source pixel) and overlays
// its labels.
void shrink_tile(const schema_info& info, const sheet_style& st, const tile_buffers& b, drawn& d) {
    sheet_tile& t = d.t;
    const bool seg = info.task == task::segmentation;
    const std::size_t channels = info.channels;
    const std::size_t sh = t.source_height, sw = t.source_width;
    const std::vector<std::uint8_t>& image = b.image;
    const std::vector<std::uint16_t>& ids = b.ids;
    const std::vector<unsigned char>& shown = st.shown;
    const unsigned a = st.alpha;
    d.rgb.resize(t.height * t.width * 3);
    for (std::size_t ty = 0; ty < t.height; ++ty) {
        const std::size_t sy = (2 * ty + 1) * sh / (2 * t.height);
        for (std::size_t tx = 0; tx < t.width; ++tx) {
            const std::size_t sx = (2 * tx + 1) * sw / (2 * t.width), p = sy * sw + sx;
            const std::uint8_t* src = image.data() + p * channels;
            unsigned v[3] = {src[0], src[channels >= 3 ? 1 : 0], src[channels >= 3 ? 2 : 0]};
            if (seg) {
                std::size_t c = std::min<std::size_t>(ids[p], info.class_count);
                if (!shown[c]) {
                    // A class not drawn here: the first drawn class of the pixel's footprint,
                    // so that thin labels survive the shrinking.
                    for (std::size_t fy = ty * sh / t.height; fy < (ty + 1) * sh / t.height && !shown[c]; ++fy)
                        for (std::size_t fx = tx * sw / t.width; fx < (tx + 1) * sw / t.width; ++fx) {
                            const std::size_t f = std::min<std::size_t>(ids[fy * sw + fx], info.class_count);
                            if (shown[f] && f < info.class_count) {
                                c = f;
                                break;
                            }
                        }
                }
                if (shown[c]) {
                    const rgb col = st.colors[c];
                    v[0] = (v[0] * (256 - a) + col.r * a + 128) >> 8;
                    v[1] = (v[1] * (256 - a) + col.g * a + 128) >> 8;
                    v[2] = (v[2] * (256 - a) + col.b * a + 128) >> 8;
                }
            }
            std::uint8_t* dst = d.rgb.data() + (ty * t.width + tx) * 3;
            dst[0] = std::uint8_t(v[0]);
            dst[1] = std::uint8_t(v[1]);
            dst[2] = std::uint8_t(v[2]);
        }
    }
}

// Record `index` as its tile: read (augmented as the loader would), shrunk, captioned.
drawn draw_tile(const dataset& ds, const contact_sheet_options& o, const sheet_style& st, std::size_t index,
                tile_buffers& b) {
    const schema_info& info = ds.schema();
    const bool seg = info.task == task::segmentation;
    drawn d;
    sheet_tile& t = d.t;
    t.index = index;
    std::string key;
    {
        const sample s = ds.read(t.index, b.ctx);
        key = std::string(s.key());
        t.source_height = s.height();
        t.source_width = s.width();
    }
    if (o.augment && o.augment->height) t.source_height = o.augment->height, t.source_width = o.augment->width;
    const std::size_t sh = t.source_height, sw = t.source_width;
    b.image.resize(sh * sw * info.channels);
    sample_buffers out;
    out.image_u8 = b.image.data();
    out.image_capacity = b.image.size();
    std::int32_t class_id = -1;
    if (seg) {
        b.ids.resize(sh * sw);
        out.label_index = b.ids.data();
        out.label_index_capacity = b.ids.size();
    } else {
        out.class_id = &class_id;
    }
    out.augment = o.augment;
    out.applied = o.augment ? &t.box : nullptr;
    ds.read_into(t.index, out, b.ctx);

    const std::size_t longest = std::max(sh, sw);
    t.height = longest <= o.tile ? sh : std::max<std::size_t>(1, sh * o.tile / longest);
    t.width = longest <= o.tile ? sw : std::max<std::size_t>(1, sw * o.tile / longest);
    shrink_tile(info, st, b, d);
    const std::string head = "#" + std::to_string(t.index) + " ";
    if (seg) {
        d.caption = head + key;
    } else {
        d.caption = head + (class_id >= 0 && std::size_t(class_id) < ds.classes().size()
                                ? ds.classes()[std::size_t(class_id)].name : std::to_string(class_id));
        d.second = key;
    }
    if (o.augment) {
        std::string w = "y " + std::to_string(t.box.y) + " x " + std::to_string(t.box.x);
        if (t.box.hflip) w += " hflip";
        if (t.box.vflip) w += " vflip";
        if (t.box.fallback) w += " no fg";
        d.second += (d.second.empty() ? "" : "  ") + w;
    }
    return d;
}

// The legend: one entry per class, then ignored pixels; laid out in rows to the sheet's
// width, its y relative to the legend's top. Returns the legend's height.
std::size_t lay_out_legend(const dataset& ds, const sheet_style& st, std::size_t width,
                           std::vector<sheet_legend_entry>& legend, std::vector<std::string>& legend_text) {
    const schema_info& info = ds.schema();
    const std::size_t line = st.line, fs = st.fs;
    std::size_t x = margin, y = 0;
    const auto add = [&](std::int64_t id, rgb color, bool hidden, std::string text) {
        const std::size_t w = line + 4 + text_width(text, fs) + 2 * gap;
        if (x != margin && x + w > width - margin) {
            x = margin;
            y += line + 4;
        }
        legend.push_back({id, x, y, line - 2 * fs, color, hidden});
        legend_text.push_back(std::move(text));
        x += w;
    };
    for (std::size_t c = 0; c < info.class_count; ++c) {
        const bool hidden = !st.shown[c];
        add(std::int64_t(c), st.colors[c], hidden, std::to_string(c) + " " + ds.classes()[c].name + (hidden ? " (not overlaid)" : ""));
    }
    add(-1, ignore_color, false, "ignored (" + std::to_string(info.ignore_value) + ")");
    return y + line + 4 + gap;
}

void draw_legend(rgb_canvas& canvas, const sheet_style& st, std::size_t legend_y, std::vector<sheet_legend_entry>& legend,
                 const std::vector<std::string>& legend_text) {
    for (std::size_t e = 0; e < legend.size(); ++e) {
        sheet_legend_entry& l = legend[e];
        l.y += legend_y;
        canvas.fill_rect(l.x, l.y, l.size, l.size, l.color);
        canvas.frame_rect(l.x - 1, l.y - 1, l.size + 2, l.size + 2, dim_text);
        draw_text(canvas, l.x + st.line + 4, l.y, legend_text[e], l.hidden ? dim_text : text_color, st.fs);
    }
}

}  // namespace

contact_sheet render_contact_sheet(const dataset& ds, const contact_sheet_options& o) {
    check_sheet_options(ds, o);
    const bool seg = ds.schema().task == task::segmentation;
    const std::size_t n = o.records.size();
    const std::size_t columns = o.columns ? std::min(o.columns, n) : std::size_t(std::ceil(std::sqrt(double(n))));
    const std::size_t rows = (n + columns - 1) / columns;
    const sheet_style st = style_of(ds, o);
    const std::size_t fs = st.fs, line = st.line;

    // The tiles first (their sizes set the cells), then the layout.
    std::vector<drawn> tiles(n);
    tile_buffers buffers;
    for (std::size_t k = 0; k < n; ++k) tiles[k] = draw_tile(ds, o, st, o.records[k], buffers);

    std::size_t cell_h = 0, cell_w = 20 * glyph_cell_width * fs;  // room for a caption
    for (const drawn& d : tiles) {
        cell_h = std::max(cell_h, d.t.height);
        cell_w = std::max(cell_w, d.t.width);
    }
    const bool second_line = o.augment || !seg;
    const std::size_t caption_h = (second_line ? 2 : 1) * line + 4;
    const std::size_t header_h = (o.title.empty() ? 1 : 2) * line + gap;
    const std::size_t grid_w = columns * (cell_w + gap) - gap, grid_h = rows * (cell_h + caption_h + gap);

    const std::size_t width = std::max<std::size_t>(grid_w, 60 * glyph_cell_width * fs) + 2 * margin;
    std::vector<sheet_legend_entry> legend;
    std::vector<std::string> legend_text;
    const std::size_t legend_h = seg ? lay_out_legend(ds, st, width, legend, legend_text) : 0;

    contact_sheet sheet;
    sheet.canvas = rgb_canvas(width, margin + header_h + grid_h + legend_h + margin, sheet_background);
    rgb_canvas& canvas = sheet.canvas;
    std::size_t y0 = margin;
    if (!o.title.empty()) {
        draw_text(canvas, margin, y0, o.title, text_color, fs, width - 2 * margin);
        y0 += line;
    }
    const std::string what = std::to_string(n) + " of " + std::to_string(ds.size()) + " records " + describe(o.augment);
    draw_text(canvas, margin, y0, fit_text(what, width - 2 * margin, fs, what.size()), dim_text, fs, width - 2 * margin);
    const std::size_t grid_y = margin + header_h;
    for (std::size_t k = 0; k < n; ++k) {
        drawn& d = tiles[k];
        sheet_tile& t = d.t;
        t.x = margin + (k % columns) * (cell_w + gap);
        t.y = grid_y + (k / columns) * (cell_h + caption_h + gap);
        for (std::size_t ty = 0; ty < t.height; ++ty)
            std::memcpy(canvas.at(t.x, t.y + ty), d.rgb.data() + ty * t.width * 3, t.width * 3);
        // "#index key": the index and the key's end (its file name) when the key is long.
        draw_text(canvas, t.x, t.y + cell_h + 2, fit_text(d.caption, cell_w, fs, d.caption.find(' ') + 1), text_color, fs, cell_w);
        if (!d.second.empty()) draw_text(canvas, t.x, t.y + cell_h + 2 + line, d.second, dim_text, fs, cell_w);
        sheet.tiles.push_back(t);
    }

    draw_legend(canvas, st, grid_y + grid_h, legend, legend_text);
    sheet.legend = std::move(legend);
    return sheet;
}

}  // namespace shardpack
