// make_sample_data: writes a small synthetic dataset to pack: images, color-coded masks (as RGB
// or as palette PNGs whose palette order differs from the class dictionary's), a class_dict.csv
// with an extra column, and the CSV list. Used by the demo, the tests and the benchmark.
//
//   make_sample_data --out DIR [--task seg|cls] [--scene street|parts] [--count N] [--width W] [--height H]
//                    [--seed S] [--palette-masks] [--jpeg] [--spaces] [--off-colors] [--stray-colors] [--bits 16]
//
// --scene parts: inspection frames of a part, as in industrial defect sets: a white background
// class over nearly every pixel and a few thin scratches, small dents and a stain clustered in
// one area (under 1% of the pixels labelled), so that many random crops hold no label at all.
//
// --off-colors: the masks of four classes hold colors 1-2 levels off their dictionary entry,
// as in public sets whose class_dict.csv was typed by hand. --stray-colors: every 10th mask
// also holds a few pixels of two colors no class has. --bits 16: 16-bit PNG images (each
// value the scene's byte, then a random low byte: every bit used).
#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "decode/color_convert.hpp"
#include "decode/jpeg_encoder.hpp"
#include "decode/png_encoder.hpp"
#include "image.hpp"

namespace {

using shardpack::image_u8;

struct sample_class {
    const char* name;
    std::uint8_t r, g, b;
    const char* description;
};

// Colors picked like CamVid's: distinct, with no order relation to their ids.
const sample_class classes[] = {
    {"sky", 128, 128, 128, "open sky"},        {"building", 128, 0, 0, "walls, roofs"},
    {"road", 128, 64, 128, "drivable surface"}, {"tree", 128, 128, 0, "vegetation"},
    {"car", 64, 0, 128, "vehicles"},            {"pedestrian", 64, 64, 0, "people"},
};
constexpr int class_count = sizeof classes / sizeof classes[0];

// --scene parts: the background first (class 0), white as in the industrial sets.
const sample_class part_classes[] = {
    {"background", 255, 255, 255, "the part's surface"}, {"scratch", 220, 20, 60, "thin scratches"},
    {"dent", 0, 120, 255, "small dents"},                  {"stain", 255, 200, 0, "stains"},
};
constexpr int part_class_count = sizeof part_classes / sizeof part_classes[0];

struct options {
    std::string out, task = "seg", scene = "street";
    int count = 24, width = 320, height = 240;
    unsigned seed = 1;
    bool palette_masks = false, jpeg = false, spaces = false, off_colors = false, stray_colors = false;
    int bits = 8;  // 16: 16-bit PNG images (the scene's values * 257 plus noise in the low byte)
};

// The color a mask holds for class c: its dictionary color, or with --off-colors 1-2 levels off
// for classes 1..4 (a different channel for each).
void mask_color(const options& o, int c, std::uint8_t out[3]) {
    if (o.scene == "parts") {
        out[0] = part_classes[c].r;
        out[1] = part_classes[c].g;
        out[2] = part_classes[c].b;
        return;
    }
    out[0] = classes[c].r;
    out[1] = classes[c].g;
    out[2] = classes[c].b;
    if (!o.off_colors || c < 1 || c > 4) return;
    const int channel = (c - 1) % 3, delta = c % 2 ? 2 : 1;
    out[channel] = std::uint8_t(out[channel] >= 128 ? out[channel] - delta : out[channel] + delta);
}

void write_bytes(const std::string& path, const std::vector<std::uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

// A palette PNG with the palette in reverse dictionary order, so that a reader that maps
// palette indices instead of colors gets every class wrong.
void write_palette_png(const std::string& path, const std::vector<std::uint8_t>& ids, int w, int h) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + path);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
    png_infop info = png_create_info_struct(png);
    std::vector<png_byte> row(static_cast<std::size_t>(w));  // before setjmp: longjmp must skip no destructor
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        std::fclose(f);
        throw std::runtime_error("libpng failed writing " + path);
    }
    png_init_io(png, f);
    png_set_IHDR(png, info, png_uint_32(w), png_uint_32(h), 8, PNG_COLOR_TYPE_PALETTE, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_color palette[class_count];
    for (int c = 0; c < class_count; ++c) {
        const auto& k = classes[class_count - 1 - c];
        palette[c] = {k.r, k.g, k.b};
    }
    png_set_PLTE(png, info, palette, class_count);
    png_write_info(png, info);
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) row[std::size_t(x)] = png_byte(class_count - 1 - ids[std::size_t(y * w + x)]);
        png_write_row(png, row.data());
    }
    png_write_end(png, nullptr);
    png_destroy_write_struct(&png, &info);
    std::fclose(f);
}

// A street-like scene: sky, buildings, road, trees, cars and people as simple shapes, with
// texture so the images compress like photos rather than like flat color.
void make_scene(std::mt19937& rng, int w, int h, image_u8& image, std::vector<std::uint8_t>& ids) {
    ids.assign(std::size_t(w) * h, 0);
    auto fill = [&](int x0, int y0, int x1, int y1, std::uint8_t id) {
        for (int y = std::max(0, y0); y < std::min(h, y1); ++y)
            for (int x = std::max(0, x0); x < std::min(w, x1); ++x) ids[std::size_t(y * w + x)] = id;
    };
    const int horizon = h * 2 / 5 + int(rng() % unsigned(h / 5 + 1));
    fill(0, horizon, w, h, 2);  // road
    for (int b = 0; b < 4; ++b) {
        const int bw = w / 8 + int(rng() % unsigned(w / 5 + 1)), bx = int(rng() % unsigned(w));
        fill(bx, horizon - int(rng() % unsigned(horizon + 1)), bx + bw, horizon, 1);
    }
    for (int t = 0; t < 3; ++t) {
        const int cx = int(rng() % unsigned(w)), cy = horizon - h / 10, r = h / 12 + int(rng() % unsigned(h / 10 + 1));
        for (int y = cy - r; y < cy + r; ++y)
            for (int x = cx - r; x < cx + r; ++x)
                if ((x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r) fill(x, y, x + 1, y + 1, 3);
    }
    for (int c = 0; c < 3; ++c) {
        const int cw = w / 6, ch = h / 8, cx = int(rng() % unsigned(w)), cy = horizon + int(rng() % unsigned(h - horizon));
        fill(cx, cy - ch, cx + cw, cy, 4);
    }
    for (int p = 0; p < 2; ++p) {
        const int px = int(rng() % unsigned(w)), py = horizon + int(rng() % unsigned(h - horizon));
        fill(px, py - h / 6, px + w / 40 + 2, py, 5);
    }
    image.width = std::uint32_t(w);
    image.height = std::uint32_t(h);
    image.channels = 3;
    image.pixels.resize(std::size_t(w) * h * 3);
    std::normal_distribution<float> noise(0.0f, 6.0f);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const auto& k = classes[ids[std::size_t(y * w + x)]];
            const float shade = 0.75f + 0.25f * std::sin(float(x) * 0.05f) * std::cos(float(y) * 0.04f);
            const std::uint8_t base[3] = {k.r, k.g, k.b};
            for (int c = 0; c < 3; ++c) {
                const float v = float(base[c]) * shade + 40.0f + noise(rng);
                image.pixels[(std::size_t(y) * w + x) * 3 + c] = std::uint8_t(std::clamp(v, 0.0f, 255.0f));
            }
        }
}

// An inspection frame: a brushed grey surface, background (class 0) nearly everywhere, and near
// one spot a few scratches (random walks a few pixels wide), dents (small discs) and a stain.
void make_part(std::mt19937& rng, int w, int h, image_u8& image, std::vector<std::uint8_t>& ids) {
    ids.assign(std::size_t(w) * h, 0);
    auto dot = [&](int x, int y, int r, std::uint8_t id) {
        for (int yy = y - r; yy <= y + r; ++yy)
            for (int xx = x - r; xx <= x + r; ++xx)
                if (yy >= 0 && yy < h && xx >= 0 && xx < w && (xx - x) * (xx - x) + (yy - y) * (yy - y) <= r * r)
                    ids[std::size_t(yy) * w + xx] = id;
    };
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    // Sparser than the industrial frames of issue 33 (37% of their uniform 512x512 crops held
    // under 1% labelled pixels): 68% of such crops of 40 frames of 1920x1080 (--seed 2).
    const int side = std::min(w, h), cx = int(unit(rng) * float(w)), cy = int(unit(rng) * float(h)), spread = side * 2 / 3;
    const auto near = [&](int c) { return c + int(rng() % unsigned(spread)) - spread / 2; };
    const int scratches = 3 + int(rng() % 4u), width = std::max(1, side / 360);
    for (int k = 0; k < scratches; ++k) {
        float x = float(near(cx)), y = float(near(cy)), angle = unit(rng) * 6.2832f;
        const int length = side / 4 + int(rng() % unsigned(side / 2 + 1));
        for (int step = 0; step < length; ++step) {
            dot(int(x), int(y), width, 1);
            angle += (unit(rng) - 0.5f) * 0.2f;
            x += std::cos(angle);
            y += std::sin(angle);
        }
    }
    const int dents = 3 + int(rng() % 5u);
    for (int k = 0; k < dents; ++k) dot(near(cx), near(cy), std::max(2, side / 108 + int(rng() % unsigned(side / 120 + 1))), 2);
    if (rng() % 10u < 7u) dot(cx, cy, std::max(3, side / 40 + int(rng() % unsigned(side / 45 + 1))), 3);
    image.width = std::uint32_t(w);
    image.height = std::uint32_t(h);
    image.channels = 3;
    image.pixels.resize(std::size_t(w) * h * 3);
    std::normal_distribution<float> noise(0.0f, 4.0f);
    const std::uint8_t marks[part_class_count][3] = {{0, 0, 0}, {60, 55, 50}, {95, 100, 110}, {150, 120, 60}};
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const std::uint8_t id = ids[std::size_t(y) * w + x];
            const float grain = 150.0f + 20.0f * std::sin(float(y) * 0.3f + 0.02f * float(x));
            for (int c = 0; c < 3; ++c) {
                const float v = id ? float(marks[id][c]) + noise(rng) : grain + noise(rng);
                image.pixels[(std::size_t(y) * w + x) * 3 + c] = std::uint8_t(std::clamp(v, 0.0f, 255.0f));
            }
        }
}

int run(const options& o) {
    namespace fs = std::filesystem;
    fs::create_directories(o.out + "/images");
    std::mt19937 rng(o.seed);
    std::ofstream list(o.out + "/list.csv");
    if (o.task == "seg") {
        fs::create_directories(o.out + "/masks");
        std::ofstream dict(o.out + "/class_dict.csv");
        dict << "name,r,g,b,description\n";
        if (o.scene == "parts")
            for (const auto& k : part_classes) dict << k.name << "," << int(k.r) << "," << int(k.g) << "," << int(k.b) << "," << k.description << "\n";
        else
            for (const auto& k : classes) dict << k.name << "," << int(k.r) << "," << int(k.g) << "," << int(k.b) << "," << k.description << "\n";
        list << "image,mask\n";
    } else {
        list << "image,label\n";
    }
    image_u8 image, mask;
    std::vector<std::uint8_t> ids;
    for (int i = 0; i < o.count; ++i) {
        char stem[64];
        std::snprintf(stem, sizeof stem, o.spaces && i % 3 == 1 ? "img %04d" : "img_%04d", i);
        int w = o.width, h = o.height;
        if (o.task == "cls") {  // varied sizes and aspect ratios, like a photo collection
            w = o.width * (70 + int(rng() % 61)) / 100;
            h = o.height * (70 + int(rng() % 61)) / 100;
        }
        if (o.scene == "parts") make_part(rng, w, h, image, ids);
        else make_scene(rng, w, h, image, ids);
        const std::string ext = o.jpeg ? ".jpg" : ".png";
        const std::string image_rel = std::string("images/") + stem + ext;
        if (o.bits == 16) {  // every bit used: the scene's high byte, a random low byte
            image_u8 wide = image;
            shardpack::convert_depth(wide, 2);
            for (std::size_t k = 0; k < wide.pixels.size() / 2; ++k)
                wide.samples16()[k] = static_cast<std::uint16_t>((wide.samples16()[k] & 0xff00) | (rng() & 0xff));
            write_bytes(o.out + "/" + image_rel, shardpack::encode_png(wide));
        } else {
            write_bytes(o.out + "/" + image_rel, o.jpeg ? shardpack::encode_jpeg(image, 90) : shardpack::encode_png(image));
        }
        if (o.task == "seg") {
            const std::string mask_rel = std::string("masks/") + stem + ".png";
            if (o.palette_masks) {
                write_palette_png(o.out + "/" + mask_rel, ids, w, h);
            } else {
                mask.width = std::uint32_t(w);
                mask.height = std::uint32_t(h);
                mask.channels = 3;
                mask.pixels.resize(std::size_t(w) * h * 3);
                for (std::size_t p = 0; p < ids.size(); ++p) mask_color(o, ids[p], &mask.pixels[p * 3]);
                if (o.stray_colors && i % 10 == 3) {  // a few pixels of colors no class has
                    const std::uint8_t strays[2][3] = {{250, 10, 250}, {3, 3, 3}};
                    for (int k = 0; k < 2; ++k)
                        for (int y = 5 + 4 * k; y < 8 + 4 * k; ++y)
                            for (int x = 5; x < 9; ++x)
                                std::memcpy(&mask.pixels[(std::size_t(y) * w + x) * 3], strays[k], 3);
                }
                write_bytes(o.out + "/" + mask_rel, shardpack::encode_png(mask));
            }
            list << '"' << image_rel << "\",\"" << mask_rel << "\"\n";
        } else {
            // The class of a scene: what covers most of its lower half, by name.
            std::vector<int> votes(class_count, 0);
            for (std::size_t p = ids.size() / 2; p < ids.size(); ++p) ++votes[ids[p]];
            votes[2] = 0;  // every scene has road
            const int best = int(std::max_element(votes.begin(), votes.end()) - votes.begin());
            list << '"' << image_rel << "\"," << classes[best].name << "\n";
        }
    }
    std::printf("%s: %d %s samples\n", o.out.c_str(), o.count, o.task.c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
            return argv[++i];
        };
        try {
            if (a == "--out") o.out = value();
            else if (a == "--task") o.task = value();
            else if (a == "--scene") o.scene = value();
            else if (a == "--count") o.count = std::stoi(value());
            else if (a == "--width") o.width = std::stoi(value());
            else if (a == "--height") o.height = std::stoi(value());
            else if (a == "--seed") o.seed = unsigned(std::stoul(value()));
            else if (a == "--palette-masks") o.palette_masks = true;
            else if (a == "--jpeg") o.jpeg = true;
            else if (a == "--spaces") o.spaces = true;
            else if (a == "--off-colors") o.off_colors = true;
            else if (a == "--stray-colors") o.stray_colors = true;
            else if (a == "--bits") o.bits = std::stoi(value());
            else throw std::runtime_error("unknown option " + a);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "make_sample_data: %s\n", e.what());
            return 2;
        }
    }
    if (o.out.empty() || (o.task != "seg" && o.task != "cls") || (o.scene != "street" && o.scene != "parts") ||
        (o.scene == "parts" && (o.task != "seg" || o.palette_masks)) || o.count < 1 || o.width < 16 || o.height < 16) {
        std::fprintf(stderr, "usage: make_sample_data --out DIR [--task seg|cls] [--scene street|parts] [--count N] [--width W] "
                             "[--height H] [--seed S] [--palette-masks] [--jpeg] [--spaces] [--off-colors] [--stray-colors] "
                             "[--bits 16]\n");
        return 2;
    }
    try {
        return run(o);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "make_sample_data: %s\n", e.what());
        return 1;
    }
}
