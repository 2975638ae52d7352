#include "io/output_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "errors.hpp"
#include "io/output_folder.hpp"

namespace shardpack {

output_lock::output_lock(const std::string& dir) : output_lock(*output_folder::open(dir, true)) {}

output_lock::output_lock(const output_folder& folder) {
    const std::string& dir = folder.path();
    const std::string path = folder.path_of(file_name);
    fd_ = folder.open_read_write(file_name);  // O_NOFOLLOW: a link here is refused, its target untouched
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        char holder[256] = {};
        const ssize_t n = ::pread(fd_, holder, sizeof holder - 1, 0);
        ::close(fd_);
        fd_ = -1;
        if (err == EWOULDBLOCK)
            throw io_error(dir + " is being built by another shardpack process (" +
                           std::string(holder, n > 0 ? std::size_t(n) : 0) + "); not touching it");
        throw io_error("cannot lock " + path + ": " + std::strerror(err));
    }
    char host[128] = "unknown";
    ::gethostname(host, sizeof host - 1);
    char when[64] = "";
    const std::time_t now = std::time(nullptr);
    std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    const std::string text = "pid " + std::to_string(::getpid()) + " on " + host + " since " + when;
    if (::ftruncate(fd_, 0) == 0 && ::pwrite(fd_, text.data(), text.size(), 0) < 0) {
        // The holder description is a courtesy; the flock is what excludes.
    }
}

output_lock::~output_lock() {
    if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace shardpack
