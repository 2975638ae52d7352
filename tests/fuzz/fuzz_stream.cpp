// libFuzzer target: bytes -> the sample stream that `shardpack build --samples -` reads on its
// standard input (src/pipeline/sample_stream.hpp): the bytes become standard input.
//
// Input: one selector byte, then the stream.
//   bit 0:    a real ring: where the stream starts with a v3 header, its descriptors and size are
//             replaced by those of a sealed 64 KiB memfd (a known pattern) and a Unix socket
//             pair made for the input, so that ring parts are checked against a ring that exists
//   bits 1-2: the class table's size (0, 1, 3, 256)
// Every sample is read, as the build reads them (first(), then next() until the end frame), or
// until input_error. Anything else escaping, a sanitizer report or a broken invariant is a
// finding: a sample taken as good whose pixels' bytes do not make its shape.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <typeinfo>

#include "errors.hpp"
#include "fuzz_common.hpp"
#include "pipeline/sample_stream.hpp"

using namespace shardpack;
using shardpack::fuzz::finding;

namespace {

constexpr std::uint64_t ring_bytes = 65536;
constexpr std::uint64_t max_row_bytes = 1 << 20;  // what a frame may claim; it is allocated before it is read

unsigned char ring_byte(std::uint64_t i) { return static_cast<unsigned char>((i * 131) ^ (i >> 8)); }

// A sealed memfd of ring_bytes holding ring_byte(i) at i, or -1.
int make_ring() {
    const int fd = ::memfd_create("fuzz-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    std::string bytes(ring_bytes, '\0');
    for (std::uint64_t i = 0; i < ring_bytes; ++i) bytes[i] = static_cast<char>(ring_byte(i));
    if (::pwrite(fd, bytes.data(), bytes.size(), 0) != static_cast<ssize_t>(bytes.size()) ||
        ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

// Closes fd unless the stream's ring already did (nothing else opens descriptors meanwhile).
void close_if_open(int fd) {
    if (fd >= 0 && ::fcntl(fd, F_GETFD) != -1) ::close(fd);
}

void check(const sample_job& job) {
    if (!job.ok()) return;
    for (const auto* part : {&job.image_pixels, &job.label_pixels}) {
        if (!part->is_pixels()) continue;
        const auto& bytes = part == &job.image_pixels ? job.image_file : job.label_file;
        if (std::uint64_t(part->width) * part->height * part->channels * part->value_bytes != bytes.size())
            finding("a sample taken as good whose pixels do not make its shape");
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    if (size < 1) return 0;
    const unsigned sel = data[0];
    std::string stream(reinterpret_cast<const char*>(data + 1), size - 1);
    static constexpr std::size_t class_counts[] = {0, 1, 3, 256};
    const std::size_t classes = class_counts[(sel >> 1) & 3];

    int ring = -1, ours = -1, theirs = -1;
    if ((sel & 1) && stream.size() >= 32 && std::memcmp(stream.data(), sample_stream_magic, 8) == 0) {
        int pair[2];
        ring = make_ring();
        if (ring < 0 || ::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) finding("cannot make a ring");
        ours = pair[0];
        theirs = pair[1];
        ::fcntl(ours, F_SETFL, O_NONBLOCK);
        const std::int32_t fds[2] = {ring, theirs};
        std::memcpy(&stream[16], fds, sizeof fds);
        std::memcpy(&stream[24], &ring_bytes, sizeof ring_bytes);
    }
    // The stream as standard input.
    const int in = ::memfd_create("fuzz-stdin", MFD_CLOEXEC);
    if (in < 0 || ::pwrite(in, stream.data(), stream.size(), 0) != static_cast<ssize_t>(stream.size()) || ::dup2(in, 0) != 0)
        finding("cannot make standard input");
    ::close(in);
    ::lseek(0, 0, SEEK_SET);

    try {
        sample_stream s(classes, nullptr);
        s.first(max_row_bytes);
        sample_job job;
        for (std::size_t seq = 0; s.next(job, seq, max_row_bytes); ++seq) check(job);
        (void)s.digest();
    } catch (const input_error&) {
    } catch (const std::exception& e) {
        finding(std::string("an exception other than input_error: ") + typeid(e).name() + ": " + e.what());
    }
    close_if_open(ring);
    close_if_open(theirs);
    if (ours >= 0) {
        char sink[4096];
        while (::read(ours, sink, sizeof sink) > 0) {
        }
        ::close(ours);
    }
    return 0;
}
