// Writes the seed corpora of the fuzz targets, generated at run time (nothing binary is
// committed): fuzz_make_seeds OUT_DIR makes OUT_DIR/{shard,manifest,decode,csv,stream}/.
//   shard:    every shard of the fixture datasets (the real writer: zstd and raw records, one-hot,
//             uint16 index maps, classification, sizes that vary, an unknown optional section)
//             and the golden shard of tests/golden/tiny_shard.hex, each behind a flags byte;
//   manifest: the fixtures' manifest.json files (their shards are those fuzz_manifest reads
//             against), the golden vector's manifest, and tests/fuzz/seeds/manifest/*;
//   decode:   ../shared/data/pngsuite/*.png and ../shared/data/jpeg/*, plus PNGs and JPEGs the
//             project's encoders make (gray, RGB, RGBA; baseline and progressive) and TIFFs
//             libtiff writes (16-bit grey strips, 4-band tiles), each behind three option bytes;
//   csv:      tests/fuzz/seeds/csv/* behind a few selector bytes;
//   stream:   sample streams as shardpack.write sends them (v2 and v3 headers; pixels, PNG bytes,
//             ring parts, a rejected sample, field values), behind a selector byte.
#include <tiffio.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "decode/jpeg_encoder.hpp"
#include "decode/png_encoder.hpp"
#include "fuzz_common.hpp"

using namespace shardpack;
namespace fs = std::filesystem;

namespace {

int written = 0;

void seed(const std::string& dir, const std::string& name, const std::vector<unsigned char>& prefix, const std::string& body) {
    std::string bytes(prefix.begin(), prefix.end());
    bytes += body;
    fuzz::put_file(dir + "/" + name, bytes);
    ++written;
}

std::vector<fs::path> files_in(const std::string& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.is_regular_file()) out.push_back(e.path());
    std::sort(out.begin(), out.end());
    return out;
}

image_u8 pattern(std::uint32_t w, std::uint32_t h, std::uint32_t channels) {
    image_u8 img;
    img.width = w;
    img.height = h;
    img.channels = channels;
    img.pixels.resize(std::size_t(w) * h * channels);
    for (std::size_t i = 0; i < img.pixels.size(); ++i) img.pixels[i] = static_cast<std::uint8_t>((i * 37 / channels) ^ (i % 7 * 40));
    return img;
}

std::string as_string(const std::vector<std::uint8_t>& v) { return std::string(v.begin(), v.end()); }

// Little-endian bytes of v (the sample stream's layout: src/pipeline/sample_stream.hpp).
template <class T>
void put(std::string& out, T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

// A frame head of the sample stream, then its key, label key, reason, parts and field cells.
struct frame {
    char tag = 'S';
    std::uint8_t image_kind = 2, image_channels = 3, label_kind = 0, label_channels = 0, label_value_bytes = 1,
                 image_value_bytes = 1;
    std::uint32_t iw = 0, ih = 0, lw = 0, lh = 0;
    std::int32_t class_id = 0;
    std::string key = "k", label_key, reason, image, label, fields;
    std::string bytes() const {
        std::string out;
        for (std::uint8_t b : {std::uint8_t(tag), image_kind, image_channels, label_kind, label_channels, label_value_bytes,
                               image_value_bytes, std::uint8_t(0)})
            put(out, b);
        for (std::uint32_t v : {iw, ih, lw, lh}) put(out, v);
        put(out, class_id);
        for (std::size_t v : {key.size(), label_key.size(), reason.size()}) put(out, std::uint32_t(v));
        put(out, std::uint64_t(image_kind == 3 ? std::uint64_t(iw) * ih * image_channels * image_value_bytes : image.size()));
        put(out, std::uint64_t(label_kind == 3 ? std::uint64_t(lw) * lh * label_channels * label_value_bytes : label.size()));
        put(out, std::uint32_t(fields.size()));
        put(out, std::uint32_t(0));
        return out + key + label_key + reason + image + label + fields;
    }
};

std::string end_frame(std::uint64_t count) {
    frame f;
    f.tag = 'E';
    f.image_kind = f.image_channels = 0;
    f.key.clear();
    std::string out = f.bytes();
    std::memcpy(&out[40], &count, sizeof count);  // an end frame's image_bytes: the samples sent
    return out;
}

std::string offset_part(std::uint64_t offset) {
    std::string out;
    put(out, offset);
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    const std::string out = argv[1];
    const std::string shard_dir = out + "/shard", manifest_dir = out + "/manifest", decode_dir = out + "/decode",
                      csv_dir = out + "/csv", stream_dir = out + "/stream", work = out + "/.work";
    for (const auto& d : {shard_dir, manifest_dir, decode_dir, csv_dir, stream_dir, work}) fs::create_directories(d);
    const std::string tests = SHARDPACK_TEST_FILES, shared = SHARDPACK_SHARED_DATA;

    // Shards and manifests from the writer.
    for (const auto& d : fuzz::write_fixture_datasets(work)) {
        const std::string tag = fs::path(d).filename().string();
        seed(manifest_dir, tag + ".json", {}, test::read_file(d + "/manifest.json"));
        int k = 0;
        for (const auto& p : files_in(d))
            if (p.extension() == ".spk") {
                const std::string bytes = test::read_file(p.string());
                seed(shard_dir, tag + "-" + std::to_string(k) + ".fix", {fuzz::fix_records | fuzz::fix_header}, bytes);
                if (k++ == 0) seed(shard_dir, tag + ".noverify", {fuzz::fix_records | fuzz::fix_header | fuzz::no_verify}, bytes);
            }
    }
    const auto golden = fuzz::golden_shard(tests + "/golden/tiny_shard.hex");
    const std::string golden_bytes(golden.begin(), golden.end());
    seed(shard_dir, "golden.asis", {0}, golden_bytes);
    seed(shard_dir, "golden.fix", {fuzz::fix_records | fuzz::fix_header}, golden_bytes);
    seed(manifest_dir, "golden.json", {},
         "{\"format\": \"shardpack\", \"format_version\": \"1.0\", \"records\": 1, \"shards\": [{\"file\": "
         "\"shard-00000-d908886912887cfc.spk\", \"records\": 1, \"first_record\": 0, \"bytes\": " +
             std::to_string(golden.size()) + ", \"xxh3\": \"d908886912887cfc\"}]}");
    for (const auto& p : files_in(tests + "/fuzz/seeds/manifest")) seed(manifest_dir, p.filename().string(), {}, test::read_file(p));

    // Images: PngSuite, libjpeg-turbo's test images, and the encoders' output.
    int n = 0;
    auto image_seed = [&](const std::string& name, const std::string& bytes) {
        const auto o0 = static_cast<unsigned char>(n * 53 + 1), o1 = static_cast<unsigned char>(n % 3 == 0 ? 0 : n * 29 + 7);
        seed(decode_dir, name, {o0, o1, static_cast<unsigned char>(n % 2)}, bytes);
        ++n;
    };
    for (const auto& p : files_in(shared + "/pngsuite"))
        if (p.extension() == ".png") image_seed(p.filename().string(), test::read_file(p.string()));
    for (const auto& p : files_in(shared + "/jpeg"))
        if (p.extension() == ".jpg" || p.extension() == ".png") image_seed(p.filename().string(), test::read_file(p.string()));
    for (std::uint32_t c : {1u, 3u, 4u}) image_seed("enc-" + std::to_string(c) + ".png", as_string(encode_png(pattern(13, 7, c))));
    // TIFFs (libtiff's writer): 16-bit grey in deflate strips, 4 bands of 8 bits in LZW tiles;
    // each also with the keep_16 bit (decode option byte 2, bit 1).
    for (int t = 0; t < 2; ++t) {
        const std::string path = work + "/seed.tif";
        TIFF* tif = TIFFOpen(path.c_str(), "w");
        if (!tif) return 1;
        const std::uint32_t w = 19, h = 11, c = t == 0 ? 1 : 4, b = t == 0 ? 2 : 1;
        TIFFSetField(tif, TIFFTAG_IMAGEWIDTH, w);
        TIFFSetField(tif, TIFFTAG_IMAGELENGTH, h);
        TIFFSetField(tif, TIFFTAG_SAMPLESPERPIXEL, std::uint16_t(c));
        TIFFSetField(tif, TIFFTAG_BITSPERSAMPLE, std::uint16_t(8 * b));
        TIFFSetField(tif, TIFFTAG_PHOTOMETRIC, c == 1 ? PHOTOMETRIC_MINISBLACK : PHOTOMETRIC_RGB);
        if (c == 4) {
            const std::uint16_t extra = EXTRASAMPLE_UNASSALPHA;
            TIFFSetField(tif, TIFFTAG_EXTRASAMPLES, std::uint16_t(1), &extra);
        }
        TIFFSetField(tif, TIFFTAG_COMPRESSION, t == 0 ? COMPRESSION_ADOBE_DEFLATE : COMPRESSION_LZW);
        std::vector<std::uint8_t> px(std::size_t(w) * h * c * b);
        for (std::size_t i = 0; i < px.size(); ++i) px[i] = static_cast<std::uint8_t>(i * 7 + i / 13);
        if (t == 0) {
            TIFFSetField(tif, TIFFTAG_ROWSPERSTRIP, 4u);
            for (std::uint32_t y = 0; y < h; y += 4)
                TIFFWriteEncodedStrip(tif, TIFFComputeStrip(tif, y, 0), px.data() + std::size_t(y) * w * c * b,
                                      tmsize_t(std::size_t(std::min(4u, h - y)) * w * c * b));
        } else {
            TIFFSetField(tif, TIFFTAG_TILEWIDTH, 16u);
            TIFFSetField(tif, TIFFTAG_TILELENGTH, 16u);
            std::vector<std::uint8_t> tile(std::size_t(TIFFTileSize(tif)));
            for (std::uint32_t y = 0; y < h; y += 16)
                for (std::uint32_t x = 0; x < w; x += 16) {
                    std::fill(tile.begin(), tile.end(), std::uint8_t(0));
                    for (std::uint32_t r = 0; r < 16 && y + r < h; ++r)
                        for (std::uint32_t q = 0; q < 16 && x + q < w; ++q)
                            std::memcpy(tile.data() + (std::size_t(r) * 16 + q) * c, px.data() + (std::size_t(y + r) * w + x + q) * c, c);
                    TIFFWriteTile(tif, tile.data(), x, y, 0, 0);
                }
        }
        TIFFClose(tif);
        const std::string bytes = test::read_file(path);
        for (unsigned char o2 : {0, 2})
            seed(decode_dir, "tiff-" + std::to_string(t) + "-" + std::to_string(o2) + ".tif",
                 {static_cast<unsigned char>(t * 53 + 1), static_cast<unsigned char>(t ? 0 : 77), o2}, bytes);
    }
    for (std::uint32_t c : {1u, 3u})
        for (bool progressive : {false, true})
            image_seed("enc-" + std::to_string(c) + (progressive ? "-prog" : "") + ".jpg",
                       as_string(encode_jpeg(pattern(19, 11, c), 85, progressive)));

    // CSV texts, each behind a few selectors (header mode, task, columns, names list).
    for (const auto& p : files_in(tests + "/fuzz/seeds/csv")) {
        const std::string text = test::read_file(p.string());
        for (unsigned char sel : {0x00, 0x09, 0x26, 0x48})
            seed(csv_dir, p.filename().string() + "." + std::to_string(sel), {sel}, text);
    }
    // Sample streams (the selector: bit 0 a real ring, bits 1-2 the class count; 0x04: 3 classes).
    const std::string v2 = std::string("SPSAMPv2", 8) + std::string("\x02\0\0\0\0\0\0\0", 8);
    std::string v3 = std::string("SPSAMPv3", 8);
    put(v3, std::uint64_t(2));
    put(v3, std::int32_t(-1));
    put(v3, std::int32_t(-1));
    put(v3, std::uint64_t(0));
    std::string v3_ring = v3;  // the fuzz target puts its own ring's descriptors and size here
    const image_u8 rgb = pattern(4, 3, 3), mask = pattern(4, 3, 3);
    frame cls;
    cls.iw = 4, cls.ih = 3, cls.class_id = 1, cls.label_key = "b";
    cls.image = as_string(rgb.pixels);
    frame seg = cls;
    seg.label_kind = 2, seg.label_channels = 3, seg.lw = 4, seg.lh = 3, seg.label_key = "mask", seg.class_id = -1;
    seg.label = as_string(mask.pixels);
    frame index = seg;
    index.label_channels = 1, index.label_value_bytes = 2;
    index.label = std::string(4 * 3 * 2, '\1');
    frame png = cls;
    png.image_kind = 1, png.image_channels = 0, png.iw = png.ih = 0;
    png.image = as_string(encode_png(pattern(5, 4, 3)));
    frame ring = seg;
    ring.image_kind = 3, ring.label_kind = 3;
    ring.image = offset_part(0);
    ring.label = offset_part(4096);
    frame rejected;
    rejected.tag = 'R', rejected.image_kind = rejected.image_channels = 0, rejected.class_id = -1;
    rejected.reason = "the image is float32: expected uint8 or uint16";
    frame fielded = cls;
    fielded.fields = std::string("3\0a;b\0", 6);
    seed(stream_dir, "v2-cls", {0x04}, v2 + cls.bytes() + cls.bytes() + end_frame(2));
    seed(stream_dir, "v3-seg", {0x04}, v3 + seg.bytes() + index.bytes() + end_frame(2));
    seed(stream_dir, "v3-png-rejected", {0x04}, v3 + png.bytes() + rejected.bytes() + end_frame(2));
    seed(stream_dir, "v3-ring", {0x05}, v3_ring + ring.bytes() + ring.bytes() + end_frame(2));
    seed(stream_dir, "v3-fields", {0x02}, v3 + fielded.bytes() + end_frame(1));
    seed(stream_dir, "v3-cut", {0x04}, v3 + seg.bytes().substr(0, 100));

    std::error_code ec;
    fs::remove_all(work, ec);
    std::printf("%d seed files in %s\n", written, out.c_str());
    return 0;
}
