#include "decode/decode_limits.hpp"

#include <string>

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

}  // namespace shardpack
