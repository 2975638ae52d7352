#include "decode/jpeg_encoder.hpp"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <string>
#include <cstdlib>
#include <stdexcept>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>

namespace shardpack {

namespace {

struct error_manager {
    jpeg_error_mgr pub;
    std::jmp_buf jump;
    char message[JMSG_LENGTH_MAX];
};

void jump_on_error(j_common_ptr cinfo) {
    auto* err = reinterpret_cast<error_manager*>(cinfo->err);
    (*cinfo->err->format_message)(cinfo, err->message);
    std::longjmp(err->jump, 1);
}

// C-style on purpose: setjmp/longjmp must not skip C++ destructors, so nothing with one lives
// in this frame. Returns false with err->message set when libjpeg fails.
bool compress_rows(const image_u8* img, int quality, bool progressive, unsigned char** buffer, unsigned long* size,
                   error_manager* err) {
    jpeg_compress_struct cinfo;
    std::memset(&cinfo, 0, sizeof cinfo);
    cinfo.err = jpeg_std_error(&err->pub);
    err->pub.error_exit = jump_on_error;
    if (setjmp(err->jump)) {
        jpeg_destroy_compress(&cinfo);
        return false;
    }
    jpeg_create_compress(&cinfo);
    jpeg_mem_dest(&cinfo, buffer, size);
    cinfo.image_width = img->width;
    cinfo.image_height = img->height;
    cinfo.input_components = static_cast<int>(img->channels);
    cinfo.in_color_space = img->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, quality, TRUE);
    if (progressive) jpeg_simple_progression(&cinfo);
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = const_cast<JSAMPROW>(img->pixels.data() + std::size_t(cinfo.next_scanline) * img->row_bytes());
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    return true;
}

}  // namespace

std::vector<std::uint8_t> encode_jpeg(const image_u8& img, int quality, bool progressive) {
    if (img.channels != 1 && img.channels != 3) throw std::invalid_argument("encode_jpeg: gray or RGB only");
    if (img.pixels.size() != img.row_bytes() * img.height || img.width == 0 || img.height == 0)
        throw std::invalid_argument("encode_jpeg: bad image buffer");
    unsigned char* buffer = nullptr;
    unsigned long size = 0;
    error_manager err{};
    const bool ok = compress_rows(&img, quality, progressive, &buffer, &size, &err);
    std::vector<std::uint8_t> out;
    if (ok) out.assign(buffer, buffer + size);
    std::free(buffer);
    if (!ok) throw std::runtime_error(std::string("JPEG encode: ") + err.message);
    return out;
}

}  // namespace shardpack
