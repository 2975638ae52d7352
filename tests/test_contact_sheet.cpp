// Contact sheets (`export --grid`, src/inspect/contact_sheet.hpp) and class charts (`inspect
// --chart`): every tile pixel is its record's (or the loader's delivered window's) pixel blended
// with its class color by the documented rule, the legend's swatches are the class colors, the
// CLI's PNG holds exactly the rendered pixels, and the chart's bars are the report's frequencies.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "inspect/bitmap_font.hpp"
#include "inspect/class_chart.hpp"
#include "inspect/contact_sheet.hpp"
#include "shardpack/reader.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;

namespace {

// The documented blend of one channel: (v (256 - a) + c a + 128) >> 8.
std::uint8_t blend(unsigned v, unsigned c, unsigned a) { return std::uint8_t((v * (256 - a) + c * a + 128) >> 8); }

// Checks a tile against source pixels (image HWC and ids HW of sh x sw), nearest-pixel shrunk.
void check_tile(const contact_sheet& sheet, const sheet_tile& t, const std::uint8_t* image, const std::uint16_t* ids,
                std::size_t channels, const dataset& ds, double alpha, const std::vector<std::uint32_t>& hidden) {
    const unsigned a = unsigned(std::lround(alpha * 256));
    const std::size_t sh = t.source_height, sw = t.source_width;
    for (std::size_t ty = 0; ty < t.height; ++ty)
        for (std::size_t tx = 0; tx < t.width; ++tx) {
            const std::size_t sy = (2 * ty + 1) * sh / (2 * t.height), sx = (2 * tx + 1) * sw / (2 * t.width);
            const std::uint8_t* src = image + (sy * sw + sx) * channels;
            std::uint8_t want[3] = {src[0], src[1], src[2]};
            if (ids) {
                const auto is_hidden = [&](std::uint16_t c) { return std::find(hidden.begin(), hidden.end(), c) != hidden.end(); };
                std::uint16_t id = ids[sy * sw + sx];
                if (is_hidden(id)) {  // the footprint's first class neither hidden nor ignored, if any
                    bool found = false;
                    for (std::size_t fy = ty * sh / t.height; fy < (ty + 1) * sh / t.height && !found; ++fy)
                        for (std::size_t fx = tx * sw / t.width; fx < (tx + 1) * sw / t.width && !found; ++fx) {
                            const std::uint16_t f = ids[fy * sw + fx];
                            if (f < ds.schema().class_count && !is_hidden(f)) {
                                id = f;
                                found = true;
                            }
                        }
                }
                const bool ignored = id >= ds.schema().class_count;
                if (ignored || !is_hidden(id)) {
                    const rgb c = ignored ? ignore_color : class_color(ds, id);
                    want[0] = blend(want[0], c.r, a);
                    want[1] = blend(want[1], c.g, a);
                    want[2] = blend(want[2], c.b, a);
                }
            }
            const std::uint8_t* got = sheet.canvas.pixels.data() + ((t.y + ty) * sheet.canvas.width + t.x + tx) * 3;
            INFO("record " << t.index << " tile pixel (" << ty << ", " << tx << ")");
            REQUIRE(pack_rgb(got) == pack_rgb(want));
        }
}

}  // namespace

TEST_CASE("contact sheet tiles are the stored records with their label overlay, hidden classes not overlaid",
          "[sheet]") {
    temp_dir dir("sheet");
    synthetic_options o;
    o.layout = detail::layout_code::index;
    o.records = 7;
    write_synthetic(dir.str(), o);
    const auto ds = dataset::open(dir.str());
    for (double alpha : {0.0, 0.3, 1.0}) {
        contact_sheet_options so;
        so.records = {6, 0, 3, 1, 2};
        so.alpha = alpha;
        so.hidden = {2};
        so.title = "synthetic";
        const contact_sheet sheet = render_contact_sheet(ds, so);
        REQUIRE(sheet.tiles.size() == 5);
        CHECK(sheet.tiles[0].index == 6);
        for (const sheet_tile& t : sheet.tiles) {
            const sample s = ds.at(t.index);
            CHECK(t.width == 16);  // never enlarged
            CHECK(t.height == 12);
            const auto lab = s.label();
            std::vector<std::uint16_t> ids(lab.begin(), lab.end());
            check_tile(sheet, t, s.image().data(), ids.data(), 3, ds, alpha, {2});
            if (alpha == 0.0) check_tile(sheet, t, s.image().data(), nullptr, 3, ds, 0, {});  // the image itself
        }
    }
    // With the labels: ids from the stored index map.
    contact_sheet_options so;
    so.records = {0, 1, 2, 3, 4, 5, 6};
    so.hidden = {2};
    so.columns = 3;
    const contact_sheet sheet = render_contact_sheet(ds, so);
    CHECK(sheet.tiles[3].y > sheet.tiles[2].y);  // three to a row
    CHECK(sheet.tiles[3].x == sheet.tiles[0].x);
    for (const sheet_tile& t : sheet.tiles) {
        const sample s = ds.at(t.index);
        const auto lab = s.label();
        std::vector<std::uint16_t> ids(lab.begin(), lab.end());
        check_tile(sheet, t, s.image().data(), ids.data(), 3, ds, 0.5, {2});
    }
}

TEST_CASE("contact sheet tiles shrink by the nearest pixel to the tile size, keeping thin labels", "[sheet]") {
    temp_dir dir("sheetshrink");
    synthetic_options o;
    o.layout = detail::layout_code::one_hot;
    o.width = 64;
    o.height = 48;
    o.records = 3;
    write_synthetic(dir.str(), o);
    const auto ds = dataset::open(dir.str());
    contact_sheet_options so;
    so.records = sheet_records(ds.size(), 16, false, 0);
    REQUIRE(so.records.size() == 3);
    so.tile = 20;
    so.hidden = {0};  // hidden where nearest: the footprint's first other class shows
    const contact_sheet sheet = render_contact_sheet(ds, so);
    for (const sheet_tile& t : sheet.tiles) {
        CHECK(t.width == 20);
        CHECK(t.height == 15);
        std::vector<std::uint16_t> ids(64 * 48);
        sample_buffers b;
        b.label_index = ids.data();
        b.label_index_capacity = ids.size();
        read_context ctx;
        ds.read_into(t.index, b, ctx);
        const sample s = ds.at(t.index);
        check_tile(sheet, t, s.image().data(), ids.data(), 3, ds, 0.5, {0});
    }
}

TEST_CASE("sheet_records: the first records, or a seeded sample without repetition", "[sheet]") {
    CHECK(sheet_records(5, 3, false, 0) == std::vector<std::size_t>{0, 1, 2});
    CHECK(sheet_records(2, 16, false, 0).size() == 2);
    const auto a = sheet_records(1000, 20, true, 7), b = sheet_records(1000, 20, true, 7), c = sheet_records(1000, 20, true, 8);
    CHECK(a == b);
    CHECK(a != c);
    CHECK(std::set<std::size_t>(a.begin(), a.end()).size() == 20);
    const auto all = sheet_records(10, 10, true, 3);
    CHECK(std::set<std::size_t>(all.begin(), all.end()).size() == 10);
}

TEST_CASE("contact sheet as the loader delivers: tiles equal read_batch's windows and flips", "[sheet][augment]") {
    for (auto position : {crop_position::random, crop_position::center, crop_position::foreground}) {
        temp_dir dir("sheetaug");
        synthetic_options o;
        o.layout = detail::layout_code::index;
        o.width = 40;
        o.height = 30;
        o.records = 6;
        write_synthetic(dir.str(), o);
        const auto ds = dataset::open(dir.str());
        augmentation a;
        a.height = 10;
        a.width = 14;
        a.position = position;
        a.hflip = a.vflip = flip_mode::random;
        a.epoch = 3;
        a.seed = 9;
        contact_sheet_options so;
        so.records = {5, 2, 0, 4};
        so.augment = &a;
        const contact_sheet sheet = render_contact_sheet(ds, so);
        // The loader's batch: read_batch with the same augmentation.
        const std::size_t n = so.records.size(), px = 10 * 14;
        std::vector<std::uint8_t> images(n * px * 3);
        std::vector<std::uint16_t> ids(n * px);
        std::vector<crop_box> boxes(n);
        sample_buffers b;
        b.image_u8 = images.data();
        b.image_capacity = images.size();
        b.label_index = ids.data();
        b.label_index_capacity = ids.size();
        b.augment = &a;
        b.applied = boxes.data();
        read_context ctx;
        ds.read_batch(so.records.data(), n, b, ctx);
        for (std::size_t j = 0; j < n; ++j) {
            const sheet_tile& t = sheet.tiles[j];
            CHECK(t.box.y == boxes[j].y);
            CHECK(t.box.x == boxes[j].x);
            CHECK(t.box.hflip == boxes[j].hflip);
            CHECK(t.box.vflip == boxes[j].vflip);
            CHECK(t.source_height == 10);
            CHECK(t.source_width == 14);
            check_tile(sheet, t, images.data() + j * px * 3, ids.data() + j * px, 3, ds, 0.5, {});
        }
    }
}

TEST_CASE("contact sheet legend: a swatch per class in its color, hidden classes marked, ignored pixels last",
          "[sheet]") {
    temp_dir dir("sheetlegend");
    synthetic_options o;
    o.layout = detail::layout_code::index;
    o.classes = 5;
    write_synthetic(dir.str(), o);
    const auto ds = dataset::open(dir.str());
    contact_sheet_options so;
    so.records = {0, 1};
    so.hidden = {0, 3};
    const contact_sheet sheet = render_contact_sheet(ds, so);
    REQUIRE(sheet.legend.size() == 6);
    for (std::size_t e = 0; e < sheet.legend.size(); ++e) {
        const sheet_legend_entry& l = sheet.legend[e];
        const bool ignore = e == 5;
        CHECK(l.class_id == (ignore ? -1 : std::int64_t(e)));
        const rgb want = ignore ? ignore_color : rgb{std::uint8_t(e), std::uint8_t(e * 2), std::uint8_t(e * 3)};  // the dictionary's
        CHECK(l.hidden == (e == 0 || e == 3));
        CHECK(l.y > sheet.tiles.back().y + sheet.tiles.back().height);
        for (std::size_t y = l.y; y < l.y + l.size; ++y)
            for (std::size_t x = l.x; x < l.x + l.size; ++x) {
                const std::uint8_t* p = sheet.canvas.pixels.data() + (y * sheet.canvas.width + x) * 3;
                REQUIRE(pack_rgb(p) == (std::uint32_t(want.r) << 16 | std::uint32_t(want.g) << 8 | want.b));
            }
    }
    // Classes without a dictionary color: distinct palette colors.
    temp_dir cls("sheetcls");
    synthetic_options c;
    c.segmentation = false;
    c.classes = 6;
    write_synthetic(cls.str(), c);
    const auto cds = dataset::open(cls.str());
    std::set<std::uint32_t> colors;
    for (std::size_t k = 0; k < 6; ++k) {
        const rgb col = class_color(cds, k);
        colors.insert(std::uint32_t(col.r) << 16 | std::uint32_t(col.g) << 8 | col.b);
    }
    CHECK(colors.size() == 6);
    contact_sheet_options cs;
    cs.records = {0, 1, 2};
    const contact_sheet csheet = render_contact_sheet(cds, cs);
    CHECK(csheet.legend.empty());
    for (const sheet_tile& t : csheet.tiles) {
        const sample s = cds.at(t.index);
        check_tile(csheet, t, s.image().data(), nullptr, 3, cds, 0, {});
    }
}

TEST_CASE("contact sheet options out of range are refused, naming them", "[sheet]") {
    temp_dir dir("sheetbad");
    write_synthetic(dir.str(), synthetic_options{});
    const auto ds = dataset::open(dir.str());
    contact_sheet_options so;
    CHECK_THROWS_WITH(render_contact_sheet(ds, so), Catch::Contains("no records"));
    so.records = {0, 10};
    CHECK_THROWS_WITH(render_contact_sheet(ds, so), Catch::Contains("record 10 is out of range"));
    so.records = {0};
    so.hidden = {4};
    CHECK_THROWS_WITH(render_contact_sheet(ds, so), Catch::Contains("hidden class 4"));
    so.hidden = {};
    so.alpha = 1.5;
    CHECK_THROWS_WITH(render_contact_sheet(ds, so), Catch::Contains("alpha"));
}

TEST_CASE("export --grid writes the rendered sheet as a PNG, stored and as delivered", "[sheet][cli]") {
    sample_fixture f("sheetcli", 6, 96, 64, {});
    const std::string ds_dir = f.dir / "ds";
    REQUIRE(cli(f.build_args(ds_dir)).code == 0);
    const auto ds = dataset::open(ds_dir);
    {
        const std::string png = f.dir / "out/sheet.png";
        const auto r = cli({"export", ds_dir, "--grid", "--count", "4", "--sample-seed", "3", "--tile", "48", "--columns",
                            "2", "--alpha", "0.75", "--hide", "sky,4", "--out", png});
        INFO(r.err);
        REQUIRE(r.code == 0);
        contact_sheet_options so;
        so.records = sheet_records(ds.size(), 4, true, 3);
        so.tile = 48;
        so.columns = 2;
        so.alpha = 0.75;
        so.hidden = {0, 4};
        so.title = ds_dir;
        const contact_sheet want = render_contact_sheet(ds, so);
        const image_u8 got = decode_file(png);
        REQUIRE(got.width == want.canvas.width);
        REQUIRE(got.height == want.canvas.height);
        CHECK(got.pixels == want.canvas.pixels);
        const auto report = detail::json::parse(r.out);
        CHECK(report.at("tiles").as_array().size() == 4);
        CHECK(report.at("tiles").as_array()[0].at("index").as_u64() == so.records[0]);
    }
    {
        const std::string png = f.dir / "trained.png";
        const auto r = cli({"export", ds_dir, "--grid", "--range", "1:5", "--crop", "32x40", "--crop-position",
                            "foreground", "--background", "road", "--hflip", "0.5", "--epoch", "2", "--seed", "11",
                            "--out", png});
        INFO(r.err);
        REQUIRE(r.code == 0);
        augmentation a;
        a.height = 32;
        a.width = 40;
        a.position = crop_position::foreground;
        a.background = {2};
        a.hflip = flip_mode::random;
        a.hflip_probability = 0.5f;
        a.epoch = 2;
        a.seed = 11;
        contact_sheet_options so;
        so.records = {1, 2, 3, 4};
        so.augment = &a;
        so.title = ds_dir;
        const contact_sheet want = render_contact_sheet(ds, so);
        CHECK(decode_file(png).pixels == want.canvas.pixels);
        const auto report = detail::json::parse(r.out);
        CHECK(report.at("foreground_fallbacks").as_u64() == 0);
        CHECK(report.at("tiles").as_array()[2].at("window").as_array()[0].as_u64() == want.tiles[2].box.y);
    }
    // Bad usage: exit 2, naming the option.
    for (const std::vector<std::string>& bad :
         {std::vector<std::string>{"--tile", "64", "--index", "0"},
          std::vector<std::string>{"--grid", "--hide", "nosuchclass"},
          std::vector<std::string>{"--grid", "--crop-position", "random"},
          std::vector<std::string>{"--grid", "--crop", "12"},
          std::vector<std::string>{"--grid", "--count", "3", "--index", "1"},
          std::vector<std::string>{"--grid", "--overlay"},
          std::vector<std::string>{"--grid", "--sample-seed", "x"}}) {
        std::vector<std::string> args = {"export", ds_dir, "--out", f.dir / "bad.png"};
        args.insert(args.end(), bad.begin(), bad.end());
        const auto r = cli(args);
        INFO(bad[0] << " " << bad[1] << ": " << r.err);
        CHECK(r.code == 2);
    }
}

TEST_CASE("inspect --chart: bars of the class frequencies the build report counted", "[chart][cli]") {
    sample_fixture f("chart", 8, 80, 60, {});
    const std::string ds_dir = f.dir / "ds";
    REQUIRE(cli(f.build_args(ds_dir)).code == 0);
    const std::string png = f.dir / "charts/classes.png";
    const auto r = cli({"inspect", ds_dir, "--chart", png, "--json"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    const auto info = detail::json::parse(r.out);
    const auto& freq = info.at("class_frequencies").as_array();  // the build's report
    const auto ds = dataset::open(ds_dir);
    const class_counts counts = count_classes(ds);
    const class_chart chart = render_class_chart(ds, counts, ds_dir + ": class frequencies");
    CHECK(decode_file(png).pixels == chart.canvas.pixels);
    const auto& listed = info.at("chart").at("classes").as_array();
    REQUIRE(listed.size() == freq.size());
    REQUIRE(chart.bars.size() == 2 * freq.size());
    for (std::size_t c = 0; c < freq.size(); ++c) {
        INFO("class " << c);
        CHECK(listed[c].at("pixels").as_u64() == freq[c].at("pixels").as_u64());
        const chart_bar& bar = chart.bars[c];  // the pixels panel first
        CHECK_FALSE(bar.records);
        CHECK(bar.fraction == Approx(freq[c].at("fraction").as_double()).margin(1e-12));
        CHECK(bar.length == std::size_t(std::lround(freq[c].at("fraction").as_double() * double(chart.full_length))));
        if (bar.length > 2) {  // inside its outline, the bar is the class color
            const std::uint8_t* p = chart.canvas.pixels.data() + ((bar.y + bar.height / 2) * chart.canvas.width + bar.x + 1) * 3;
            const rgb want = class_color(ds, c);
            CHECK(pack_rgb(p) == (std::uint32_t(want.r) << 16 | std::uint32_t(want.g) << 8 | want.b));
        }
        const chart_bar& rec = chart.bars[freq.size() + c];
        CHECK(rec.records);
        CHECK(rec.fraction == Approx(double(listed[c].at("records").as_u64()) / double(ds.size())));
    }
    // Records holding each class, counted independently.
    for (std::size_t c = 0; c < counts.records.size(); ++c) {
        std::size_t holding = 0;
        for (std::size_t i = 0; i < ds.size(); ++i) {
            std::vector<std::uint16_t> ids(80 * 60);
            sample_buffers b;
            b.label_index = ids.data();
            b.label_index_capacity = ids.size();
            read_context ctx;
            ds.read_into(i, b, ctx);
            holding += std::find(ids.begin(), ids.end(), std::uint16_t(c)) != ids.end();
        }
        CHECK(counts.records[c] == holding);
    }
}

TEST_CASE("sheet text: g, j, p, q and y have descenders, and long captions keep the index and the key's end", "[sheet][font]") {
    // Before, g was drawn as 9 and p as P within the 7 rows (a caption read "ima9es/im9_0000.pn").
    const auto ink_rows = [](const std::string& text) {
        rgb_canvas c(glyph_cell_width, glyph_cell_height, rgb{0, 0, 0});
        draw_text(c, 0, 0, text, rgb{255, 255, 255});
        std::string rows;
        for (std::size_t y = 0; y < c.height; ++y) {
            bool any = false;
            for (std::size_t x = 0; x < c.width; ++x) any = any || c.at(x, y)[0] != 0;
            rows += any ? '#' : '.';
        }
        return rows;
    };
    for (const char* d : {"g", "j", "p", "q", "y"}) CHECK(ink_rows(d).substr(7) == "##");
    for (const char* d : {"9", "P", "a", "o"}) CHECK(ink_rows(d).substr(7) == "..");
    CHECK(ink_rows("g") != ink_rows("9"));
    CHECK(fit_text("#12 images/a/img_0000.png", 12 * glyph_cell_width, 1, 4) == "#12 ..00.png");
    CHECK(fit_text("short", 12 * glyph_cell_width, 1, 0) == "short");
    CHECK(fit_text("8 of 12 records as the loader delivers", 10 * glyph_cell_width, 1, 100) == "8 of 12 ..");
}
