// A PNG's libpng read session carried from the header probe to the decode, so that libpng opens
// each file once: probe_image opens it and reads the header, and decode_png's libpng path or
// decode_mask_values takes it up where the header ended instead of creating a second session
// and reading the header again. (An 8-bit PNG that the fast path decodes needs no session
// after the probe; the next open or close frees it.) libpng is not included here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

namespace shardpack {

namespace png_detail {
struct png_session;
}

class png_reader {
public:
    png_reader();
    ~png_reader();
    png_reader(png_reader&&) noexcept;
    png_reader& operator=(png_reader&&) noexcept;

    // Opens a session over data[0, size) (which must outlive it) and reads the header: the
    // signature, IHDR and the chunks before IDAT. Throws decode_error as the decoders do.
    void open(const std::uint8_t* data, std::size_t size);
    // The open session over these very bytes, still at the end of their header, for one decode
    // to continue; null otherwise. The session is then taken: a second call returns null.
    png_detail::png_session* take(const std::uint8_t* data, std::size_t size);
    // The session a decode of data[0, size) continues: `opened`'s where it has one over these
    // bytes (the probe's), else this reader's own, opened now.
    png_detail::png_session& take_or_open(png_reader* opened, const std::uint8_t* data, std::size_t size);
    // The header's facts (valid after open).
    const png_detail::png_session& session() const { return *session_; }
    // Frees libpng's structures.
    void close();

private:
    std::unique_ptr<png_detail::png_session> session_;  // at a fixed address: libpng points at it
    bool at_header_ = false;
};

}  // namespace shardpack
