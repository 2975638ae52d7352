#include "decode/tiff_decoder.hpp"

#include <tiffio.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "decode/color_convert.hpp"
#include "errors.hpp"

namespace shardpack {

namespace {

// libtiff reads from the file's bytes in memory: a read-only "mapping" (strips are then read
// where they lie) and a cursor for the directory reads.
struct memory_file {
    const std::uint8_t* data = nullptr;
    std::size_t size = 0;
    std::uint64_t pos = 0;
    char message[256] = {};  // libtiff's first error
};

tmsize_t read_proc(thandle_t h, void* buf, tmsize_t n) {
    auto* f = static_cast<memory_file*>(h);
    if (n < 0 || f->pos >= f->size) return 0;
    const std::size_t got = std::min<std::size_t>(std::size_t(n), f->size - std::size_t(f->pos));
    std::memcpy(buf, f->data + f->pos, got);
    f->pos += got;
    return static_cast<tmsize_t>(got);
}
tmsize_t write_proc(thandle_t, void*, tmsize_t) { return 0; }
toff_t seek_proc(thandle_t h, toff_t off, int whence) {
    auto* f = static_cast<memory_file*>(h);
    const std::uint64_t base = whence == SEEK_CUR ? f->pos : whence == SEEK_END ? f->size : 0;
    f->pos = base + off;
    return f->pos;
}
int close_proc(thandle_t) { return 0; }
toff_t size_proc(thandle_t h) { return static_cast<memory_file*>(h)->size; }
int map_proc(thandle_t h, void** base, toff_t* size) {
    auto* f = static_cast<memory_file*>(h);
    *base = const_cast<std::uint8_t*>(f->data);
    *size = f->size;
    return 1;
}
void unmap_proc(thandle_t, void*, toff_t) {}

int on_error(TIFF*, void* user, const char* module, const char* fmt, va_list ap) {
    auto* f = static_cast<memory_file*>(user);
    if (f->message[0] == '\0') {
        char text[200];
        std::vsnprintf(text, sizeof text, fmt, ap);
        std::snprintf(f->message, sizeof f->message, "%s%s%s", module ? module : "", module ? ": " : "", text);
    }
    return 1;  // handled: nothing on stderr
}
int on_warning(TIFF*, void*, const char*, const char*, va_list) { return 1; }  // warnings never fail an image

struct tiff_closer {
    void operator()(TIFF* t) const { TIFFClose(t); }
};

// Compressed bytes may expand at most this many times (deflate's bound is 1032, zstd's and
// LZW's higher but not for real images): a file whose strips or tiles could not hold its image
// even so is truncated or lying about its size, refused before the image is allocated.
constexpr std::uint64_t max_tiff_ratio = 8192;

[[noreturn]] void fail(const memory_file& f, const std::string& what) {
    throw decode_error("TIFF: " + what + (f.message[0] ? std::string(" (") + f.message + ")" : std::string()));
}

// The first directory, opened and checked.
struct opened_tiff {
    std::unique_ptr<memory_file> file = std::make_unique<memory_file>();
    std::unique_ptr<TIFF, tiff_closer> tif;
    tiff_header h;
    std::uint16_t planar = PLANARCONFIG_CONTIG;
};

void open_tiff(const std::uint8_t* data, std::size_t size, opened_tiff& t) {
    memory_file& f = *t.file;
    f.data = data;
    f.size = size;
    TIFFOpenOptions* options = TIFFOpenOptionsAlloc();
    if (!options) throw std::bad_alloc();
    TIFFOpenOptionsSetErrorHandlerExtR(options, on_error, &f);
    TIFFOpenOptionsSetWarningHandlerExtR(options, on_warning, &f);
    TIFFOpenOptionsSetMaxSingleMemAlloc(options, static_cast<tmsize_t>(max_decoded_bytes));
    t.tif.reset(TIFFClientOpenExt("tiff", "r", &f, read_proc, write_proc, seek_proc, close_proc, size_proc, map_proc,
                                  unmap_proc, options));
    TIFFOpenOptionsFree(options);
    if (!t.tif) fail(f, "cannot read the header");
    TIFF* tif = t.tif.get();
    std::uint32_t w = 0, h = 0;
    std::uint16_t bits = 1, samples = 1, format = SAMPLEFORMAT_UINT, photometric = PHOTOMETRIC_MINISBLACK, compression = 1;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &w) || !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &h)) fail(f, "no image size");
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bits);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &samples);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &format);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &t.planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
    TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric);
    if (w == 0 || h == 0 || w > max_decode_dimension || h > max_decode_dimension)
        fail(f, "image is " + std::to_string(w) + "x" + std::to_string(h) + "; 1 to " +
                    std::to_string(max_decode_dimension) + " pixels a side are supported");
    if (bits != 8 && bits != 16) fail(f, std::to_string(bits) + "-bit samples are not supported (8 and 16 are)");
    if (format != SAMPLEFORMAT_UINT)
        fail(f, std::string(format == SAMPLEFORMAT_IEEEFP ? "floating-point" : format == SAMPLEFORMAT_INT ? "signed" : "other") +
                    " samples are not supported (unsigned integers are)");
    if (samples == 0 || samples > 255) fail(f, std::to_string(samples) + " samples a pixel; 1 to 255 are supported");
    if (photometric == PHOTOMETRIC_PALETTE) fail(f, "palette images are not supported");
    if (photometric == PHOTOMETRIC_MINISWHITE) fail(f, "min-is-white images are not supported (0 would be white)");
    if (photometric == PHOTOMETRIC_YCBCR) {
        // JPEG-compressed YCbCr: libjpeg converts to RGB. Other YCbCr (subsampled) is refused.
        if (compression != COMPRESSION_JPEG || t.planar != PLANARCONFIG_CONTIG)
            fail(f, "YCbCr images are supported only JPEG-compressed");
        TIFFSetField(tif, TIFFTAG_JPEGCOLORMODE, JPEGCOLORMODE_RGB);
    }
    if (t.planar != PLANARCONFIG_CONTIG && t.planar != PLANARCONFIG_SEPARATE) fail(f, "unknown planar configuration");
    check_decoded_size("TIFF", w, h, std::uint32_t(samples) * (bits / 8));
    // The stored strips or tiles must be able to hold the image.
    const bool tiled = TIFFIsTiled(tif) != 0;
    const std::uint32_t pieces = tiled ? TIFFNumberOfTiles(tif) : TIFFNumberOfStrips(tif);
    std::uint64_t* counts = nullptr;
    if (!TIFFGetField(tif, tiled ? TIFFTAG_TILEBYTECOUNTS : TIFFTAG_STRIPBYTECOUNTS, &counts) || counts == nullptr)
        fail(f, "no strip or tile byte counts");
    std::uint64_t stored = 0;
    for (std::uint32_t i = 0; i < pieces; ++i) stored += std::min<std::uint64_t>(counts[i], size);
    const std::uint64_t image_bytes = std::uint64_t(w) * h * samples * (bits / 8);
    const std::uint64_t ratio = compression == COMPRESSION_NONE ? 1 : max_tiff_ratio;
    if (image_bytes / ratio > stored)
        fail(f, "file is far too small for a " + std::to_string(w) + "x" + std::to_string(h) + " image (truncated or corrupt)");
    t.h = {w, h, bits, samples};
}

// Rows [y0, y0 + rows) x columns [x0, x0 + cols) of plane `plane` (separate planes) or of every
// sample (contiguous), from a piece `piece_width` pixels wide, into the interleaved image.
void place(const std::uint8_t* piece, std::uint32_t piece_width, std::uint32_t x0, std::uint32_t y0, std::uint32_t cols,
           std::uint32_t rows, int plane, const tiff_header& h, image_u8& img) {
    const std::size_t b = h.bits / 8, px = std::size_t(h.samples) * b;
    for (std::uint32_t r = 0; r < rows; ++r) {
        std::uint8_t* dst = img.row(y0 + r) + std::size_t(x0) * px;
        if (plane < 0) {
            std::memcpy(dst, piece + std::size_t(r) * piece_width * px, std::size_t(cols) * px);
        } else {
            const std::uint8_t* src = piece + std::size_t(r) * piece_width * b;
            for (std::uint32_t c = 0; c < cols; ++c) std::memcpy(dst + c * px + std::size_t(plane) * b, src + c * b, b);
        }
    }
}

// The first directory's samples as stored (bands), 8 or 16 bits in the host's order.
void read_samples(opened_tiff& t, const decode_request& req, image_u8& img) {
    TIFF* tif = t.tif.get();
    const tiff_header& h = t.h;
    img.width = h.width;
    img.height = h.height;
    img.channels = h.samples;
    img.sample_bytes = h.bits / 8;
    img.pixels.resize(std::size_t(h.width) * h.height * img.pixel_bytes());
    const int planes = t.planar == PLANARCONFIG_SEPARATE ? h.samples : 1;
    const bool separate = t.planar == PLANARCONFIG_SEPARATE;
    std::vector<std::uint8_t> piece;
    if (TIFFIsTiled(tif)) {
        std::uint32_t tw = 0, th = 0;
        TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tw);
        TIFFGetField(tif, TIFFTAG_TILELENGTH, &th);
        const tmsize_t tile_bytes = TIFFTileSize(tif);
        if (tw == 0 || th == 0 || tile_bytes <= 0) fail(*t.file, "bad tile size");
        piece.resize(std::size_t(tile_bytes));
        const std::size_t need = std::size_t(tw) * th * (separate ? 1 : h.samples) * (h.bits / 8);
        if (piece.size() < need) fail(*t.file, "tile size does not match its tiles");
        for (int s = 0; s < planes; ++s)
            for (std::uint32_t y = 0; y < h.height; y += th)
                for (std::uint32_t x = 0; x < h.width; x += tw) {
                    if (decode_interrupted(req)) throw decode_error("interrupted");
                    const ttile_t tile = TIFFComputeTile(tif, x, y, 0, static_cast<std::uint16_t>(s));
                    if (TIFFReadEncodedTile(tif, tile, piece.data(), tile_bytes) < 0)
                        fail(*t.file, "tile " + std::to_string(tile) + " cannot be decoded");
                    place(piece.data(), tw, x, y, std::min(tw, h.width - x), std::min(th, h.height - y), separate ? s : -1, h, img);
                }
    } else {
        std::uint32_t rows_per_strip = h.height;
        TIFFGetFieldDefaulted(tif, TIFFTAG_ROWSPERSTRIP, &rows_per_strip);
        rows_per_strip = std::max<std::uint32_t>(1, std::min(rows_per_strip, h.height));
        const tmsize_t strip_bytes = TIFFStripSize(tif);
        if (strip_bytes <= 0) fail(*t.file, "bad strip size");
        piece.resize(std::size_t(strip_bytes));
        for (int s = 0; s < planes; ++s)
            for (std::uint32_t y = 0; y < h.height; y += rows_per_strip) {
                if (decode_interrupted(req)) throw decode_error("interrupted");
                const std::uint32_t rows = std::min(rows_per_strip, h.height - y);
                const tstrip_t strip = TIFFComputeStrip(tif, y, static_cast<std::uint16_t>(s));
                const tmsize_t got = TIFFReadEncodedStrip(tif, strip, piece.data(), strip_bytes);
                const std::size_t want = std::size_t(rows) * h.width * (separate ? 1 : h.samples) * (h.bits / 8);
                if (got < 0 || std::size_t(got) < want) fail(*t.file, "strip " + std::to_string(strip) + " cannot be decoded");
                place(piece.data(), h.width, 0, y, h.width, rows, separate ? s : -1, h, img);
            }
    }
}

}  // namespace

tiff_header read_tiff_header(const std::uint8_t* data, std::size_t size) {
    opened_tiff t;
    open_tiff(data, size, t);
    return t.h;
}

void decode_tiff(const std::uint8_t* data, std::size_t size, const decode_request& req, image_u8& out, decoded_info* info) {
    opened_tiff t;
    open_tiff(data, size, t);
    if (info != nullptr) *info = decoded_info{t.h.width, t.h.height};
    if (req.layout == pixel_layout::bands && req.keep_16) {  // as stored: straight into the output
        read_samples(t, req, out);
        return;
    }
    image_u8 stored;
    read_samples(t, req, stored);
    if (!req.keep_16) convert_depth(stored, 1);  // 16-bit samples: their high byte
    convert_samples(stored, req.layout, out);
}

}  // namespace shardpack
