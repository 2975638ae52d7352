// A decoded 8-bit image in row-major, interleaved (HWC) order. The packer's unit of pixel data.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardpack {

// Channels of an interleaved 8-bit image; the value is the channel count.
enum class pixel_layout : std::uint8_t { gray = 1, rgb = 3, rgba = 4 };

inline constexpr std::uint32_t channel_count(pixel_layout layout) { return static_cast<std::uint32_t>(layout); }

struct image_u8 {
    std::uint32_t width = 0;
    std::uint32_t height = 0;
    std::uint32_t channels = 0;  // 1, 3 or 4
    std::vector<std::uint8_t> pixels;  // height * width * channels bytes

    std::size_t row_bytes() const { return std::size_t(width) * channels; }
    std::uint8_t* row(std::uint32_t y) { return pixels.data() + y * row_bytes(); }
    const std::uint8_t* row(std::uint32_t y) const { return pixels.data() + y * row_bytes(); }
};

}  // namespace shardpack
