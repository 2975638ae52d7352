// The ring a sample stream may bring beside standard input (pipeline/sample_stream.hpp says
// how the stream uses it): shared memory the Python writer puts large pixel parts into, so
// that they do not cross the pipe, and a socket on which the build tells the writer how many
// ring parts it has copied out (their room may then be reused).
//
// Both descriptors are inherited from the writer and named by numbers in the stream's header,
// so nothing about them is trusted: the ring must be a memfd (/proc/self/fd/N reads
// "/memfd:..."), a regular file of exactly the size the header says, sealed against shrinking
// (F_SEAL_SHRINK: pages cannot vanish under the mapping, which would be a SIGBUS), and is
// mapped read-only; the socket must be a Unix stream socket. Both are made close-on-exec here.
#pragma once
#include <cstddef>
#include <cstdint>

namespace shardpack {

class stream_ring {
public:
    // The smallest and largest ring a header may announce.
    static constexpr std::uint64_t min_bytes = 4096;
    static constexpr std::uint64_t max_bytes = std::uint64_t(1) << 30;

    // Maps the ring (then closes ring_fd) and keeps ack_fd. Throws input_error
    // "standard input: the sample stream's ring (descriptor N): reason".
    stream_ring(int ring_fd, std::uint64_t ring_bytes, int ack_fd);
    ~stream_ring();
    stream_ring(const stream_ring&) = delete;
    stream_ring& operator=(const stream_ring&) = delete;

    std::uint64_t size() const { return bytes_; }
    // The ring's bytes from `offset` on; the caller has checked that its part lies inside.
    const unsigned char* at(std::uint64_t offset) const { return base_ + offset; }
    // Tells the writer that `parts` ring parts (a count since the stream began) have been
    // copied out. Throws input_error when the writer is gone.
    void release(std::uint64_t parts);

private:
    const unsigned char* base_ = nullptr;
    std::uint64_t bytes_ = 0;
    int ack_fd_ = -1;
};

}  // namespace shardpack
