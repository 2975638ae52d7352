#include "format/output_folder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "errors.hpp"
#include "format/output_file.hpp"

namespace shardpack {

namespace {
[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
    if (err == ELOOP) throw io_error("cannot " + what + " " + path + ": it is a symbolic link, which shardpack never follows");
    throw io_error("cannot " + what + " " + path + ": " + std::strerror(err));
}
}  // namespace

std::shared_ptr<output_folder> output_folder::open(const std::string& given, bool create, bool follow_link) {
    std::string path = given;  // "DIR/" would resolve a link at DIR despite O_NOFOLLOW
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (create) {
        std::error_code ec;
        const std::filesystem::path p(path);
        if (p.has_parent_path() && p.parent_path() != p) std::filesystem::create_directories(p.parent_path(), ec);
        if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) fail("create folder", path, errno);
    }
    const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | (follow_link ? 0 : O_NOFOLLOW) | O_CLOEXEC);
    if (fd < 0) fail("open folder", path, errno);
    return std::shared_ptr<output_folder>(new output_folder(path, fd));
}

output_folder::~output_folder() {
    if (fd_ >= 0) ::close(fd_);
}

std::shared_ptr<output_folder> output_folder::subfolder(const std::string& name, bool create) const {
    if (create && ::mkdirat(fd_, name.c_str(), 0755) != 0 && errno != EEXIST) fail("create folder", path_of(name), errno);
    const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) fail("open folder", path_of(name), errno == ENOTDIR && kind_of(name) == kind::link ? ELOOP : errno);
    return std::shared_ptr<output_folder>(new output_folder(path_of(name), fd));
}

int output_folder::create_new(const std::string& name) const {
    const int fd = ::openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) fail("create", path_of(name), errno == EEXIST && kind_of(name) == kind::link ? ELOOP : errno);
    return fd;
}

int output_folder::open_append(const std::string& name) const {
    const int fd = ::openat(fd_, name.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) fail("open", path_of(name), errno);
    return fd;
}

int output_folder::open_read_write(const std::string& name) const {
    const int fd = ::openat(fd_, name.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) fail("open", path_of(name), errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        throw io_error("cannot open " + path_of(name) + ": not a regular file");
    }
    return fd;
}

std::optional<std::string> output_folder::read_small(const std::string& name, std::size_t max_bytes) const {
    // O_NONBLOCK: a FIFO planted here must not stall the open; it is then refused as not regular.
    const int fd = ::openat(fd_, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    std::optional<std::string> text;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && std::uint64_t(st.st_size) <= max_bytes) {
        std::string buf(std::size_t(st.st_size), '\0');
        std::size_t done = 0;
        while (done < buf.size()) {
            const ssize_t n = ::read(fd, buf.data() + done, buf.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            done += std::size_t(n);
        }
        buf.resize(done);
        text = std::move(buf);
    }
    ::close(fd);
    return text;
}

output_folder::kind output_folder::kind_of(const std::string& name) const {
    struct stat st {};
    if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return kind::missing;
    if (S_ISLNK(st.st_mode)) return kind::link;
    if (S_ISREG(st.st_mode)) return kind::file;
    if (S_ISDIR(st.st_mode)) return kind::folder;
    return kind::other;
}

std::vector<std::string> output_folder::names() const {
    std::vector<std::string> out;
    const int fd = ::openat(fd_, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);  // fdopendir takes its descriptor
    if (fd < 0) fail("list", path_, errno);
    DIR* d = ::fdopendir(fd);
    if (!d) {
        const int err = errno;
        ::close(fd);
        fail("list", path_, err);
    }
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name != "." && name != "..") out.push_back(name);
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

bool output_folder::remove(const std::string& name) const {
    if (::unlinkat(fd_, name.c_str(), 0) == 0) return true;
    if (errno == ENOENT) return false;
    fail("remove", path_of(name), errno);
}

bool output_folder::remove_empty_folder(const std::string& name) const {
    return ::unlinkat(fd_, name.c_str(), AT_REMOVEDIR) == 0;
}

void output_folder::rename(const std::string& from, const output_folder& dest, const std::string& to) const {
    if (::renameat(fd_, from.c_str(), dest.fd_, to.c_str()) != 0) fail("rename " + path_of(from) + " to", dest.path_of(to), errno);
}

void output_folder::sync() const {
    if (::fsync(fd_) != 0 && errno != EINVAL) fail("sync folder", path_, errno);
}

void output_folder::write_atomically(const std::string& name, const std::string& contents) const {
    const std::string tmp = name + ".tmp-" + std::to_string(::getpid());
    remove(tmp);  // left by a process that had this pid before; never a link's target
    try {
        output_file f(*this, tmp);
        f.write(contents.data(), contents.size());
        f.sync();
        f.close();
        rename(tmp, *this, name);
        sync();
    } catch (...) {
        ::unlinkat(fd_, tmp.c_str(), 0);
        throw;
    }
}

}  // namespace shardpack
