// Opening input files without ever blocking: a FIFO, a terminal or a device given where a
// file is expected must be an error, not a hang. Every file shardpack reads (images, masks,
// lists, class tables, configs, manifests, shards) is opened here:
//   open(O_RDONLY | O_NONBLOCK | O_NOCTTY): opening a FIFO for reading does not wait for a
//     writer, and a terminal does not become the controlling one;
//   fstat: anything but a regular file is refused, naming what it is;
//   then O_NONBLOCK is cleared, so reads of the regular file behave as usual.
#pragma once
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "error.hpp"

namespace shardpack::detail {

// "a FIFO", "a folder", "a character device", ... for a refusal's message.
inline const char* file_kind_name(mode_t mode) {
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    if (S_ISREG(mode)) return "a regular file";
    return "not a regular file";
}

// Opens `path` for reading when it is a regular file. Returns the descriptor (blocking mode,
// close-on-exec) and fills `st`; or returns -1 with `why` set ("cannot open: No such file or
// directory", "not a regular file (a FIFO)").
inline int open_regular_file(const std::string& path, struct stat& st, std::string& why) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        why = std::string("cannot open: ") + std::strerror(errno);
        return -1;
    }
    if (::fstat(fd, &st) != 0) {
        why = std::string("cannot stat: ") + std::strerror(errno);
        ::close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        why = std::string("not a regular file (") + file_kind_name(st.st_mode) + ")";
        ::close(fd);
        return -1;
    }
    const int flags = ::fcntl(fd, F_GETFL);
    if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        why = std::string("cannot clear O_NONBLOCK: ") + std::strerror(errno);
        ::close(fd);
        return -1;
    }
    return fd;
}

// Reads up to n bytes at the descriptor's position, retrying short reads and EINTR. Returns
// the count (less than n only at the end of the file) or -1 with errno set.
inline long long read_fully(int fd, void* buf, std::size_t n) {
    std::size_t done = 0;
    while (done < n) {
        const ssize_t got = ::read(fd, static_cast<char*>(buf) + done, n - done);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) break;
        done += static_cast<std::size_t>(got);
    }
    return static_cast<long long>(done);
}

// The whole of a regular file of at most max_bytes bytes, for text inputs (manifests, class
// tables, configs). Throws error "PATH: reason" for anything else, or a larger file.
inline std::string read_regular_file(const std::string& path, std::uint64_t max_bytes) {
    struct stat st {};
    std::string why;
    const int fd = open_regular_file(path, st, why);
    if (fd < 0) throw error(path + ": " + why);
    if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
        ::close(fd);
        throw error(path + ": is " + std::to_string(st.st_size) + " bytes, more than the " +
                    std::to_string(max_bytes) + " bytes accepted for this file");
    }
    std::string out(static_cast<std::size_t>(st.st_size), '\0');
    const long long got = read_fully(fd, &out[0], out.size());
    const int read_errno = errno;
    // A file that grew while being read: one byte more than the limit tells.
    char extra = 0;
    const long long more = got == static_cast<long long>(out.size()) && out.size() < max_bytes ? read_fully(fd, &extra, 1) : 0;
    ::close(fd);
    if (got < 0) throw error(path + ": read error: " + std::strerror(read_errno));
    if (got != static_cast<long long>(out.size()) || more != 0)
        throw error(path + ": changed size while being read");
    return out;
}

}  // namespace shardpack::detail
