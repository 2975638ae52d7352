#include "decode/sniff.hpp"

#include <cstring>

#include "decode/probe_counts.hpp"

namespace shardpack {

namespace {

bool starts_with(const std::uint8_t* data, std::size_t size, const char* magic, std::size_t length) {
    return size >= length && std::memcmp(data, magic, length) == 0;
}

}  // namespace

file_format sniff_format(const std::uint8_t* data, std::size_t size) {
    probe_counting::count(probe_counting::sniffs);
    if (data == nullptr) return file_format::unknown;
    // PNG is recognised by its first four bytes only, so that a signature damaged further on
    // (CR/LF conversion, a flipped byte) reaches libpng and gets its specific message.
    if (starts_with(data, size, "\x89PNG", 4)) return file_format::png;
    if (starts_with(data, size, "\xFF\xD8\xFF", 3)) return file_format::jpeg;
    if (starts_with(data, size, "GIF87a", 6) || starts_with(data, size, "GIF89a", 6)) return file_format::gif;
    if (size >= 12 && std::memcmp(data, "RIFF", 4) == 0 && std::memcmp(data + 8, "WEBP", 4) == 0)
        return file_format::webp;
    if (starts_with(data, size, "II*\0", 4) || starts_with(data, size, "MM\0*", 4)) return file_format::tiff;
    if (starts_with(data, size, "BM", 2)) return file_format::bmp;
    return file_format::unknown;
}

const char* format_name(file_format format) {
    switch (format) {
        case file_format::png: return "PNG";
        case file_format::jpeg: return "JPEG";
        case file_format::gif: return "GIF";
        case file_format::bmp: return "BMP";
        case file_format::webp: return "WebP";
        case file_format::tiff: return "TIFF";
        case file_format::unknown: break;
    }
    return "unknown";
}

}  // namespace shardpack
