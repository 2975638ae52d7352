// A decoded image of 8- or 16-bit samples in row-major, interleaved (HWC) order. The packer's
// unit of pixel data.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardpack {

// Channels of an interleaved image; the value is the channel count. bands: every sample per
// pixel the source stores, as stored (a count the source decides, so 0 here).
enum class pixel_layout : std::uint8_t { bands = 0, gray = 1, rgb = 3, rgba = 4 };

inline constexpr std::uint32_t channel_count(pixel_layout layout) { return static_cast<std::uint32_t>(layout); }

struct image_u8 {
    std::uint32_t width = 0;
    std::uint32_t height = 0;
    std::uint32_t channels = 0;  // 1, 3 or 4; 1 to 255 for images kept as their bands
    std::vector<std::uint8_t> pixels;  // height * width * channels * sample_bytes bytes
    std::uint32_t sample_bytes = 1;    // 1: uint8; 2: uint16 in the host's byte order

    std::size_t pixel_bytes() const { return std::size_t(channels) * sample_bytes; }
    std::size_t row_bytes() const { return std::size_t(width) * pixel_bytes(); }
    const std::uint16_t* samples16() const { return reinterpret_cast<const std::uint16_t*>(pixels.data()); }
    std::uint16_t* samples16() { return reinterpret_cast<std::uint16_t*>(pixels.data()); }
    std::uint8_t* row(std::uint32_t y) { return pixels.data() + y * row_bytes(); }
    const std::uint8_t* row(std::uint32_t y) const { return pixels.data() + y * row_bytes(); }
};

}  // namespace shardpack
