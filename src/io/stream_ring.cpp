#include "io/stream_ring.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "errors.hpp"

namespace shardpack {

namespace {
std::string fd_target(int fd) {
    char buf[256];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
    return n < 0 ? std::string("(unreadable: ") + std::strerror(errno) + ")" : std::string(buf, std::size_t(n));
}

// Why `fd` cannot be what the writer passed: a standard stream, or not open; "" if it can.
std::string passed_problem(int fd, struct stat& st) {
    if (fd >= 0 && fd <= STDERR_FILENO) return "a standard stream, not a descriptor the writer passed";
    if (fd < 0 || ::fstat(fd, &st) != 0) return "not an open descriptor";
    return {};
}

// Why `fd` cannot be the ring of `bytes` bytes; "" if it can.
std::string ring_problem(int fd, std::uint64_t bytes) {
    struct stat st {};
    if (std::string why = passed_problem(fd, st); !why.empty()) return why;
    const std::string target = fd_target(fd);
    if (target.rfind("/memfd:", 0) != 0) return "not a memfd (" + target + ")";
    if (!S_ISREG(st.st_mode)) return "not a regular memfd";
    if (std::uint64_t(st.st_size) != bytes)
        return "it holds " + std::to_string(st.st_size) + " bytes, the header says " + std::to_string(bytes);
    const int seals = ::fcntl(fd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK)) return "not sealed against shrinking (F_SEAL_SHRINK)";
    return {};
}

std::string ack_problem(int fd) {
    struct stat st {};
    if (std::string why = passed_problem(fd, st); !why.empty()) return why;
    int type = 0, domain = 0;
    socklen_t len = sizeof type;
    if (!S_ISSOCK(st.st_mode) || ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM)
        return "not a stream socket (" + fd_target(fd) + ")";
    len = sizeof domain;
    if (::getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0 || domain != AF_UNIX) return "not a Unix socket";
    return {};
}
}  // namespace

stream_ring::stream_ring(int ring_fd, std::uint64_t ring_bytes, int ack_fd) : bytes_(ring_bytes) {
    const std::string where = "standard input: the sample stream's ring (descriptor " + std::to_string(ring_fd) + "): ";
    if (ring_bytes < min_bytes || ring_bytes > max_bytes)
        throw input_error(where + std::to_string(ring_bytes) + " bytes, outside " + std::to_string(min_bytes) + ".." +
                          std::to_string(max_bytes));
    if (ring_fd == ack_fd) throw input_error(where + "the same descriptor as its acknowledgements");
    if (std::string why = ring_problem(ring_fd, ring_bytes); !why.empty()) throw input_error(where + why);
    if (std::string why = ack_problem(ack_fd); !why.empty())
        throw input_error("standard input: the sample stream's acknowledgement socket (descriptor " + std::to_string(ack_fd) +
                          "): " + why);
    void* p = ::mmap(nullptr, std::size_t(ring_bytes), PROT_READ, MAP_SHARED, ring_fd, 0);
    if (p == MAP_FAILED) throw input_error(where + "cannot map it: " + std::strerror(errno));
    base_ = static_cast<const unsigned char*>(p);
    ::close(ring_fd);  // the mapping keeps the memory
    ::fcntl(ack_fd, F_SETFD, FD_CLOEXEC);
    ack_fd_ = ack_fd;
}

stream_ring::~stream_ring() {
    if (base_) ::munmap(const_cast<unsigned char*>(base_), std::size_t(bytes_));
    if (ack_fd_ >= 0) ::close(ack_fd_);
}

void stream_ring::release(std::uint64_t parts) {
    unsigned char msg[sizeof parts];
    std::memcpy(msg, &parts, sizeof parts);  // little-endian, as the stream
    for (std::size_t sent = 0; sent < sizeof msg;) {
        const ssize_t r = ::send(ack_fd_, msg + sent, sizeof msg - sent, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            throw input_error(std::string("standard input: the writer is gone (its ring acknowledgement: ") +
                              std::strerror(errno) + "): nothing was published");
        sent += std::size_t(r);
    }
}

}  // namespace shardpack
