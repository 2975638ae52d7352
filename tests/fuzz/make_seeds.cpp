// Writes the seed corpora of the fuzz targets, generated at run time (nothing binary is
// committed): fuzz_make_seeds OUT_DIR makes OUT_DIR/{shard,manifest,decode,csv}/.
//   shard:    every shard of the fixture datasets (the real writer: zstd and raw records, one-hot,
//             uint16 index maps, classification, sizes that vary, an unknown optional section)
//             and the golden shard of tests/golden/tiny_shard.hex, each behind a flags byte;
//   manifest: the fixtures' manifest.json files (their shards are those fuzz_manifest reads
//             against), the golden vector's manifest, and tests/fuzz/seeds/manifest/*;
//   decode:   ../shared/data/pngsuite/*.png and ../shared/data/jpeg/*, plus PNGs and JPEGs the
//             project's encoders make (gray, RGB, RGBA; baseline and progressive), each behind
//             three option bytes;
//   csv:      tests/fuzz/seeds/csv/* behind a few selector bytes.
#include <algorithm>
#include <cstdio>
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

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
        return 2;
    }
    const std::string out = argv[1];
    const std::string shard_dir = out + "/shard", manifest_dir = out + "/manifest", decode_dir = out + "/decode",
                      csv_dir = out + "/csv", work = out + "/.work";
    for (const auto& d : {shard_dir, manifest_dir, decode_dir, csv_dir, work}) fs::create_directories(d);
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
    std::error_code ec;
    fs::remove_all(work, ec);
    std::printf("%d seed files in %s\n", written, out.c_str());
    return 0;
}
