// Identifies an image file's format from its magic bytes, never from its extension: datasets
// routinely hold PNGs named .jpg and HTML error pages named .png.
#pragma once
#include <cstddef>
#include <cstdint>

namespace shardpack {

enum class file_format { png, jpeg, gif, bmp, webp, tiff, unknown };

file_format sniff_format(const std::uint8_t* data, std::size_t size);

// "PNG", "JPEG", "GIF", "BMP", "WebP", "TIFF", "unknown".
const char* format_name(file_format format);

}  // namespace shardpack
