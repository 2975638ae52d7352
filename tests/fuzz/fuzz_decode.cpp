// libFuzzer target: bytes -> the image decoders of src/decode/ and what the build does next.
//
// Input: three option bytes, then the file's bytes.
//   byte 0: bits 0-1 output layout (gray, rgb, rgba, rgb); bits 2-3 resize (none, stretch,
//           shorter, fit); bits 4-5 crop (center, topleft, none, center); bit 6 filter lanczos
//           (else area / bilinear by bit 7); bit 7 also: unknown mask colors are errors
//   byte 1: target size: 0 = none, else width 1 + (b & 31), height 1 + (b >> 3)
//   byte 2: bit 0: recompute the CRC of every PNG chunk first, so that mutations get past them;
//           bit 1: keep 16-bit samples (decode_request::keep_16: 16-bit PNG and TIFF)
// Steps, as the build's sample_transformer does them:
//   1. sniff_format, read_image_size (header only). Images over max_fuzz_pixels are skipped
//      here: the decoders' own limits allow up to 2 GiB, more than a fuzzer's memory limit,
//      so big dimensions are refused cheaply by the harness;
//   2. plan_geometry, decode_image with the plan's max_rows (and the JPEG DCT scale for a
//      downscale), apply_geometry on the result;
//   3. the decoded image as a color mask: map_mask with a color_lookup, expand_one_hot,
//      count_classes;
//   4. a full decode, and for PNG the libdeflate fast path against libpng: when the fast path
//      takes a file, libpng must decode it too, to the same pixels.
// Decoders may throw decode_error (input_error); plan_geometry/apply_geometry/map_mask
// input_error or usage_error. Anything else, a sanitizer report or a broken invariant is a finding.
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include <zlib.h>

#include "decode/image_decoder.hpp"
#include "decode/jpeg_decoder.hpp"
#include "decode/png_decoder.hpp"
#include "decode/png_fast_decoder.hpp"
#include "decode/sniff.hpp"
#include "errors.hpp"
#include "fuzz_common.hpp"
#include "pipeline/sample_transformer.hpp"
#include "transform/geometry.hpp"
#include "transform/label_map.hpp"

using namespace shardpack;
using shardpack::fuzz::finding;

namespace {

constexpr std::uint64_t max_fuzz_pixels = std::uint64_t(1) << 22;  // 4 Mpx: 16 MiB as RGBA

volatile std::uint64_t sink;

void check_image(const image_u8& img, std::uint32_t want_channels, const char* what) {
    if (img.channels != want_channels) finding(std::string(what) + ": wrong channel count");
    if (img.width == 0 || img.height == 0) finding(std::string(what) + ": an empty image");
    if (img.sample_bytes != 1 && img.sample_bytes != 2) finding(std::string(what) + ": a sample size other than 1 or 2");
    if (img.pixels.size() != std::size_t(img.width) * img.height * img.channels * img.sample_bytes)
        finding(std::string(what) + ": pixel buffer of the wrong size");
}

std::string pixel_diff(const image_u8& a, const image_u8& b) {
    if (a.width != b.width || a.height != b.height || a.channels != b.channels)
        return std::to_string(a.width) + "x" + std::to_string(a.height) + "x" + std::to_string(a.channels) + " vs " +
               std::to_string(b.width) + "x" + std::to_string(b.height) + "x" + std::to_string(b.channels);
    for (std::size_t i = 0; i < a.pixels.size(); ++i)
        if (a.pixels[i] != b.pixels[i])
            return "byte " + std::to_string(i) + ": " + std::to_string(a.pixels[i]) + " vs " + std::to_string(b.pixels[i]);
    return {};
}

void map_as_mask(const image_u8& mask, const geometry_plan& plan, bool strict) {
    // A dictionary of some colors that occur (so lookups hit) and some that do not.
    std::vector<label_color> colors = {{0, 0, 0}, {255, 255, 255}, {128, 64, 128}};
    std::set<std::uint32_t> seen = {0, 0xFFFFFF, 0x804080};
    const std::size_t c = mask.channels;
    for (std::size_t p = 0; p < mask.pixels.size() / c && colors.size() < 12; p += 1 + p / 2) {
        const std::uint8_t* px = mask.pixels.data() + p * c;
        const label_color col = c == 1 ? label_color{px[0], px[0], px[0]} : label_color{px[0], px[1], px[2]};
        if (seen.insert(color_lookup::pack(col.r, col.g, col.b)).second) colors.push_back(col);
    }
    const color_lookup lookup(colors);
    label_plane plane;
    unknown_color_hit first{};
    std::uint64_t unknown = 0;
    map_mask(mask, plan, lookup, strict ? unknown_color_policy::error : unknown_color_policy::ignore, 255, plane,
             &first, &unknown);
    if (plane.width != plan.x.out_len || plane.height != plan.y.out_len ||
        plane.ids.size() != std::size_t(plane.width) * plane.height)
        finding("map_mask: label plane of the wrong size");
    for (auto id : plane.ids)
        if (id != 255 && id >= colors.size()) finding("map_mask: a class id outside the dictionary");
    if (first.count != unknown) finding("map_mask: unknown counts disagree");
    const std::size_t pixels = plane.ids.size();
    std::vector<std::uint8_t> one_hot(pixels * colors.size());
    expand_one_hot(plane.ids.data(), pixels, static_cast<std::uint32_t>(colors.size()), one_hot.data());
    std::vector<std::uint64_t> counts(colors.size());
    count_classes(plane, counts);
    std::uint64_t total = 0, ones = 0;
    for (auto n : counts) total += n;
    for (auto v : one_hot) ones += v;
    if (total != ones) finding("count_classes and expand_one_hot disagree");
    sink = sink + total;
}

void run(const std::uint8_t* data, std::size_t size, unsigned o0, unsigned o1, bool keep_16) {
    static const pixel_layout layouts[4] = {pixel_layout::gray, pixel_layout::rgb, pixel_layout::rgba, pixel_layout::rgb};
    const pixel_layout layout = layouts[o0 & 3];
    const std::uint32_t want = channel_count(layout);
    const file_format format = sniff_format(data, size);
    sink = sink + std::strlen(format_name(format));

    std::uint32_t width = 0, height = 0;
    read_image_size(data, size, width, height);
    if (width == 0 || height == 0) finding("read_image_size returned an empty size");
    if (std::uint64_t(width) * height > max_fuzz_pixels) return;

    geometry_options g;
    if (o1 != 0) {
        g.width = 1 + (o1 & 31);
        g.height = 1 + (o1 >> 3);
        g.resize = static_cast<resize_mode>((o0 >> 2) & 3);
    }
    static const crop_mode crops[4] = {crop_mode::center, crop_mode::topleft, crop_mode::none, crop_mode::center};
    g.crop = crops[(o0 >> 4) & 3];
    g.filter = (o0 & 0x40) ? resample_filter::lanczos : (o0 & 0x80) ? resample_filter::bilinear : resample_filter::area;
    const geometry_plan mask_plan = plan_geometry(width, height, g);
    geometry_plan image_plan = mask_plan;
    decode_request req;
    req.layout = layout;
    req.keep_16 = keep_16;
    if (format == file_format::jpeg && g.resize != resize_mode::none)
        image_plan = plan_jpeg_dct_scaling(width, height, mask_plan, g, req);
    req.max_rows = image_plan.y.src_rows_needed();

    image_u8 decoded;
    decoded_info info;
    try {
        decode_image(data, size, req, decoded, &info);
    } catch (const decode_error&) {
        return;
    }
    check_image(decoded, want, "decode_image");
    if (info.full_width != width || info.full_height != height) finding("decoded_info differs from read_image_size");
    if (decoded.width != image_plan.x.src_len) finding("decoded width differs from the plan");
    const std::uint32_t full_rows = image_plan.y.src_len;
    const std::uint32_t min_rows = req.max_rows && req.max_rows < full_rows ? req.max_rows : full_rows;
    if (decoded.height < min_rows || decoded.height > full_rows) finding("decode_image returned too few or too many rows");

    image_u8 out;
    resample_scratch scratch;
    apply_geometry(decoded, image_plan, g.filter, out, scratch);
    check_image(out, want, "apply_geometry");
    if (out.width != image_plan.x.out_len || out.height != image_plan.y.out_len) finding("apply_geometry: wrong output size");
    if (image_plan == mask_plan && decoded.sample_bytes == 1) map_as_mask(decoded, mask_plan, (o0 & 0x80) != 0);

    // The whole image, and for PNG the fast path against libpng.
    decode_request full;
    full.layout = layout;
    full.keep_16 = keep_16;
    image_u8 whole;
    decode_image(data, size, full, whole, &info);
    check_image(whole, want, "full decode");
    if (whole.width != width || whole.height != height) finding("full decode: size differs from the header");
    if (format == file_format::png) {
        image_u8 fast, slow;
        decoded_info fast_info;
        const bool took = decode_png_fast(data, size, full, fast, &fast_info);
        try {
            decode_png_libpng(data, size, full, slow, nullptr);
        } catch (const decode_error& e) {
            // libdeflate decodes some streams with forbidden Huffman codes that zlib refuses,
            // by design (png_fast_decoder.hpp); the Adler-32 still vouches for the output. Any
            // other refusal of a file the fast path took is a finding.
            const std::string why = e.what();
            const bool huffman_code = why.find("invalid literal/length code") != std::string::npos ||
                                      why.find("invalid distance code") != std::string::npos ||
                                      why.find("invalid code lengths set") != std::string::npos ||
                                      why.find("invalid literal/lengths set") != std::string::npos ||
                                      why.find("invalid distances set") != std::string::npos ||
                                      why.find("invalid bit length repeat") != std::string::npos;
            if (took && !huffman_code) finding("the PNG fast path decoded a file libpng refuses: " + why);
            return;
        }
        if (took) {
            const std::string diff = pixel_diff(fast, slow);
            if (!diff.empty()) finding("the PNG fast path and libpng differ: " + diff);
        }
        if (!pixel_diff(whole, slow).empty()) finding("decode_png and decode_png_libpng differ");
    }
}

// Rewrites each chunk's CRC (over type and data) where the chunk lies inside the file.
void fix_png_crcs(std::vector<std::uint8_t>& f) {
    auto be32 = [&](std::size_t at) {
        return std::uint32_t(f[at]) << 24 | std::uint32_t(f[at + 1]) << 16 | std::uint32_t(f[at + 2]) << 8 | f[at + 3];
    };
    for (std::size_t pos = 8; pos + 12 <= f.size();) {
        const std::uint32_t length = be32(pos);
        if (length > f.size() - pos - 12) break;
        const uLong crc = crc32(0, f.data() + pos + 4, static_cast<uInt>(length + 4));
        for (int i = 0; i < 4; ++i) f[pos + 8 + length + i] = static_cast<std::uint8_t>(crc >> (24 - 8 * i));
        pos += std::size_t(length) + 12;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 3) return 0;
    std::vector<std::uint8_t> file(data + 3, data + size);  // its own allocation: ASan sees overreads
    if ((data[2] & 1) && sniff_format(file.data(), file.size()) == file_format::png) fix_png_crcs(file);
    try {
        run(file.data(), file.size(), data[0], data[1], (data[2] & 2) != 0);
    } catch (const input_error&) {   // decode_error included
    } catch (const usage_error&) {   // plan_geometry on options it refuses
    } catch (const std::exception& e) {
        finding(std::string("threw ") + typeid(e).name() + ": " + e.what());
    }
    return 0;
}
