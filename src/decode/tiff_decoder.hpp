// TIFF decoding through libtiff, from memory: 8- and 16-bit unsigned samples, 1 to 255 samples a
// pixel, strips or tiles, contiguous or separate planes, every compression the system's libtiff
// reads. The first image (directory) of the file is decoded; later pages are ignored.
#pragma once
#include <cstddef>
#include <cstdint>

#include "decode/decode_limits.hpp"
#include "image.hpp"

namespace shardpack {

// What a TIFF's first directory says, without decoding pixels. Throws decode_error "TIFF: ..."
// naming what is wrong or not supported.
struct tiff_header {
    std::uint32_t width = 0, height = 0;
    std::uint16_t bits = 0;     // per sample: 8 or 16
    std::uint16_t samples = 0;  // per pixel: 1 to 255
};
tiff_header read_tiff_header(const std::uint8_t* data, std::size_t size);

// Decodes to req.layout: bands keeps every sample as stored; gray takes the first sample of a
// 1- or 2-sample image (gray, gray + alpha) and PIL's luma of the first three of a 3 or more;
// rgb replicates a gray sample or takes the first three; rgba adds an opaque alpha (255, 65535)
// to 1 or 3 samples and takes the second sample of a gray + alpha image as its alpha. 16-bit
// samples keep all 16 bits with req.keep_16 (host byte order), else their high byte. All rows
// are decoded (req.max_rows is not used). Throws decode_error "TIFF: <reason>" on corrupt or
// unsupported files (1-, 4-, 32-bit, signed or floating-point samples, palette, YCbCr without
// JPEG compression, min-is-white) and on images over the decode limits.
void decode_tiff(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out,
                 decoded_info* info = nullptr);

}  // namespace shardpack
