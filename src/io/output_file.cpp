#include "io/output_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "errors.hpp"
#include "io/output_folder.hpp"

namespace shardpack {
namespace {
constexpr std::size_t buffer_size = 1 << 20;

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
    throw io_error("cannot " + what + " " + path + ": " + std::strerror(err));
}
}  // namespace

output_file::output_file(const output_folder& folder, const std::string& name)
    : path_(folder.path_of(name)), buffer_(buffer_size) {
    fd_ = folder.create_new(name);
}

output_file::~output_file() {
    if (fd_ >= 0) ::close(fd_);
}

void output_file::flush() {
    std::size_t done = 0;
    while (done < used_) {
        const ssize_t n = ::write(fd_, buffer_.data() + done, used_ - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            fail("write", path_, errno);
        }
        done += static_cast<std::size_t>(n);
    }
    used_ = 0;
}

void output_file::write(const void* data, std::size_t size) {
    const auto* p = static_cast<const unsigned char*>(data);
    position_ += size;
    while (size > 0) {
        if (used_ == buffer_.size()) flush();
        const std::size_t n = std::min(size, buffer_.size() - used_);
        std::memcpy(buffer_.data() + used_, p, n);
        used_ += n;
        p += n;
        size -= n;
    }
}

void output_file::write_zeros(std::size_t count) {
    static const unsigned char zeros[256] = {};
    while (count > 0) {
        const std::size_t n = std::min(count, sizeof zeros);
        write(zeros, n);
        count -= n;
    }
}

void output_file::sync() {
    flush();
    if (::fsync(fd_) != 0) fail("sync", path_, errno);
}

void output_file::close() {
    if (fd_ < 0) return;
    flush();
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close", path_, errno);
}

void write_file_atomically(const std::string& path, const std::string& contents) {
    const std::filesystem::path p(path);
    const std::string name = p.filename().string();
    if (name.empty() || name == "." || name == "..") throw io_error("cannot write " + path + ": not a file name");
    // The folder is the one the caller named (links before the last component are followed as
    // usual); inside it nothing goes through a link.
    const std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
    output_folder::open(dir, false, true)->write_atomically(name, contents);
}

}  // namespace shardpack
