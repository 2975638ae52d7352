// JPEG encoding, for generated test and sample data (the packer itself never writes JPEG).
#pragma once
#include <cstdint>
#include <vector>

#include "image.hpp"

namespace shardpack {

// Encodes an 8-bit gray (1 channel) or RGB (3) image as baseline (or progressive) JPEG with
// 4:2:0 chroma subsampling. Throws std::invalid_argument for other channel counts.
std::vector<std::uint8_t> encode_jpeg(const image_u8& img, int quality = 90, bool progressive = false);

}  // namespace shardpack
