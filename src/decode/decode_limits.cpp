#include "decode/decode_limits.hpp"

#include <algorithm>
#include <string>

#include "decode/jpeg_decoder.hpp"
#include "errors.hpp"

namespace shardpack {

void check_decoded_size(const char* format, std::uint64_t width, std::uint64_t height, std::uint32_t channels) {
    // Callers pass 32-bit dimensions, so width * height fits in 64 bits; dividing the limit
    // instead of multiplying by channels keeps the comparison exact.
    const std::uint64_t pixels = width * height;
    if (channels == 0 || pixels > max_decoded_bytes / channels)
        throw decode_error(std::string(format) + ": image too large: " + std::to_string(width) + "x" +
                           std::to_string(height) + "x" + std::to_string(channels) + " bytes exceeds the " +
                           std::to_string(max_decoded_bytes >> 20) + " MiB decode limit");
}

std::uint64_t decode_memory_estimate(const image_probe& probe, const decode_request& req) {
    // bands: as many as the source has (at most 4 in a PNG); a 16-bit source kept at 16 bits: twice the bytes.
    const std::uint64_t sample = req.keep_16 && probe.bit_depth == 16 ? 2 : 1;
    const std::uint64_t want = (req.layout == pixel_layout::bands ? std::max<std::uint64_t>(probe.channels, 4) : channel_count(req.layout)) * sample;
    const auto rows_of = [&](std::uint64_t h) { return req.max_rows == 0 || req.max_rows >= h ? h : std::uint64_t(req.max_rows); };
    const std::uint32_t width = probe.width, height = probe.height;
    if (probe.format == file_format::jpeg) {
        const unsigned m = jpeg_dct_scale_eighths(width, height, req.min_width, req.min_height);
        const std::uint64_t w = (std::uint64_t(width) * m + 7) / 8, h = (std::uint64_t(height) * m + 7) / 8;
        return w * rows_of(h) * want + w * 4;  // the output and a row to convert in
    }
    if (probe.format == file_format::tiff) {  // the samples as stored, then the layout's copy, and a strip
        const std::uint64_t stored = std::uint64_t(width) * height * probe.channels * (probe.bit_depth / 8);
        return 2 * stored + std::uint64_t(width) * height * want;
    }
    // PNG: IHDR's bit depth, color type and interlace.
    static const unsigned channels_of[7] = {1, 0, 3, 1, 2, 0, 4};
    const std::uint64_t depth = probe.bit_depth;
    const std::uint64_t channels = probe.color_type <= 6 && channels_of[probe.color_type] ? channels_of[probe.color_type] : 4;
    const bool interlaced = probe.interlaced;
    const std::uint64_t w = width, h = height;
    const std::uint64_t inflated = h * ((w * channels * depth + 7) / 8 + 1);
    const std::uint64_t out = w * (interlaced ? h : rows_of(h)) * (interlaced ? std::max<std::uint64_t>(want, 3 * sample) : want);
    return inflated + out;
}

}  // namespace shardpack
