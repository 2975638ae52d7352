// The read session's longjmp discipline (png_session.hpp), with its error handler and guard:
// libpng runs only inside run_png_guarded(), and neither it nor the body holds an object with a
// destructor; the output vector lives in encode_png().
#include "decode/png_encoder.hpp"

#include <png.h>

#include <new>
#include <stdexcept>
#include <string>

#include "decode/png_session.hpp"
#include "errors.hpp"
#include "shardpack/detail/endian.hpp"

namespace shardpack {

namespace {

constexpr int png_compression_level = 6;  // zlib's default trade-off; fixed so output is stable

struct png_write_session {
    png_structp png = nullptr;
    png_infop info = nullptr;
    const image_u8* img = nullptr;
    std::vector<std::uint8_t>* out = nullptr;
    bool out_of_memory = false;
    char message[256] = {};
};

struct png_write_session_guard {
    png_write_session& s;
    ~png_write_session_guard() { png_destroy_write_struct(&s.png, &s.info); }
};

void on_png_write_warning(png_structp, png_const_charp) {}

// A C++ exception must not cross libpng's C frames: catch it, then raise a libpng error
// (outside the handler, so the exception is finished before the longjmp).
void write_to_vector(png_structp png, png_bytep data, std::size_t length) {
    auto* s = static_cast<png_write_session*>(png_get_io_ptr(png));
    try {
        s->out->insert(s->out->end(), data, data + length);
    } catch (...) {
        s->out_of_memory = true;
    }
    if (s->out_of_memory) png_error(png, "out of memory");
}

void flush_nothing(png_structp) {}

void write_body(png_write_session& s) {
    const image_u8& img = *s.img;
    const int color_type = img.channels == 1 ? PNG_COLOR_TYPE_GRAY
                         : img.channels == 2 ? PNG_COLOR_TYPE_GRAY_ALPHA
                         : img.channels == 3 ? PNG_COLOR_TYPE_RGB
                                             : PNG_COLOR_TYPE_RGB_ALPHA;
    png_set_IHDR(s.png, s.info, img.width, img.height, img.sample_bytes == 2 ? 16 : 8, color_type, PNG_INTERLACE_NONE,
                 PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(s.png, s.info);
    if (img.sample_bytes == 2 && detail::little_endian_host()) png_set_swap(s.png);  // host order to PNG's big-endian
    for (std::uint32_t y = 0; y < img.height; ++y) png_write_row(s.png, img.row(y));
    png_write_end(s.png, nullptr);
}

}  // namespace

std::vector<std::uint8_t> encode_png(const image_u8& img) {
    if (img.channels < 1 || img.channels > 4 || (img.sample_bytes != 1 && img.sample_bytes != 2))
        throw std::invalid_argument("encode_png: unsupported channel count " + std::to_string(img.channels));
    if (img.width == 0 || img.height == 0) throw std::invalid_argument("encode_png: empty image");
    if (img.pixels.size() != img.row_bytes() * img.height)
        throw std::invalid_argument("encode_png: pixel buffer has the wrong size");

    std::vector<std::uint8_t> out;
    out.reserve(img.pixels.size() / 2 + 1024);
    png_write_session s;
    png_write_session_guard guard{s};
    s.img = &img;
    s.out = &out;
    s.png = png_create_write_struct(PNG_LIBPNG_VER_STRING, &s, png_detail::png_error_handler<png_write_session>,
                                    on_png_write_warning);
    if (s.png == nullptr) throw std::bad_alloc();
    s.info = png_create_info_struct(s.png);
    if (s.info == nullptr) throw std::bad_alloc();
    png_set_write_fn(s.png, &s, write_to_vector, flush_nothing);
    png_set_user_limits(s.png, 0x7FFFFFFF, 0x7FFFFFFF);  // PNG's own maximum, not libpng's 1e6 default
    png_set_compression_level(s.png, png_compression_level);

    if (!png_detail::run_png_guarded(s, write_body)) {
        if (s.out_of_memory) throw std::bad_alloc();
        throw io_error(std::string("PNG encode: ") + s.message);
    }
    return out;
}

}  // namespace shardpack
