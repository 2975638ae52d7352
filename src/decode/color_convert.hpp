// Pixel-format conversions shared by the decoders and by anyone who needs an image in another
// layout. Gray is computed exactly as PIL's Image.convert("L") does, so packed datasets match
// what a PIL-based training pipeline would have produced.
#pragma once
#include <cstddef>
#include <cstdint>

#include "image.hpp"

namespace shardpack {

// L = (R*19595 + G*38470 + B*7471 + 0x8000) >> 16 per pixel (ITU-R 601-2 luma, PIL's
// rounding). `gray` may equal `rgb` (in-place conversion works front to back).
void rgb_to_gray_pil(const std::uint8_t* rgb, std::uint8_t* gray, std::size_t pixels);

// The same for 16-bit samples (in the host's byte order): L = (R*19595 + G*38470 + B*7471 +
// 0x8000) >> 16, the same weights and rounding at 16 bits.
void rgb16_to_gray_pil(const std::uint16_t* rgb, std::uint16_t* gray, std::size_t pixels);

// CMYK as libjpeg hands it out to RGB. `adobe_inverted` is for files with an Adobe APP14
// marker (Photoshop and most other writers), whose samples store 255 - ink: then
// R = C*K/255 (rounded), likewise G from M and B from Y. Without the marker the samples are
// plain ink amounts: R = (255-C)*(255-K)/255. No color management (ICC) is applied.
// `rgb` may equal `cmyk` (in-place conversion works front to back).
void cmyk_to_rgb(const std::uint8_t* cmyk, std::uint8_t* rgb, std::size_t pixels, bool adobe_inverted);

// Converts between gray, rgb and rgba: gray is replicated to R=G=B; alpha is dropped (not
// composited) or added as opaque 0xFF; color to gray uses rgb_to_gray_pil on R, G, B.
// Returns `img` itself (moved) when it already has `layout`. Throws std::invalid_argument
// when img.channels is not 1, 3 or 4 or the pixel buffer has the wrong size.
image_u8 convert_layout(image_u8 img, pixel_layout layout);

// Any image of 1..N bands at 8 or 16 bits (`src.sample_bytes`) in `layout`, into `out`, as the
// decoders give a file of it: bands keeps every sample; gray takes the first band of a 1- or
// 2-band image, else PIL's luma of the first three; rgb and rgba replicate gray, take the
// alpha of a 2-band image or the fourth band, or add an opaque one; the depth is kept.
void convert_samples(const image_u8& src, pixel_layout layout, image_u8& out);

// 8-bit samples to 16 (v * 257: 255 becomes 65535), or 16-bit samples to their high byte (v >> 8,
// as PIL and OpenCV reduce 16-bit PNGs), in place; `img` then has `sample_bytes`.
void convert_depth(image_u8& img, std::uint32_t sample_bytes);

}  // namespace shardpack
