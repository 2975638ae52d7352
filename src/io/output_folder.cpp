#include "io/output_folder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "errors.hpp"
#include "io/input_file.hpp"
#include "io/output_file.hpp"
#include "shardpack/detail/regular_file.hpp"

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

bool output_folder::remove_if_empty(const std::string& path) { return ::rmdir(path.c_str()) == 0; }

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
    try {
        input_file file(fd_, path_, name);
        if (file.size() > max_bytes) return std::nullopt;
        return file.read_all(max_bytes);
    } catch (const std::exception&) {
        return std::nullopt;
    }
}

std::string output_folder::read_own(const std::string& name, std::uint64_t max_bytes) const {
    input_file file(fd_, path_, name);
    return file.read_all(max_bytes);
}

std::optional<std::string> output_folder::read_own_if_present(const std::string& name, std::uint64_t max_bytes) const {
    if (kind_of(name) == kind::missing) return std::nullopt;
    return read_own(name, max_bytes);
}

output_folder::kind output_folder::kind_of(const std::string& name) const {
    struct stat st {};
    if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return kind::missing;
    if (S_ISLNK(st.st_mode)) return kind::link;
    if (S_ISREG(st.st_mode)) return kind::file;
    if (S_ISDIR(st.st_mode)) return kind::folder;
    return kind::other;
}

std::string output_folder::kind_name(const std::string& name) const {
    struct stat st {};
    if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return "missing";
    if (S_ISLNK(st.st_mode)) return "a symbolic link";
    return detail::file_kind_name(st.st_mode);
}

std::optional<unsigned> output_folder::owner_of(const std::string& name) const {
    struct stat st {};
    if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return std::nullopt;
    return unsigned(st.st_uid);
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
    struct stat st {};
    if (::fstatat(fd_, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode)) fail("replace", path_of(name), ELOOP);
        if (!S_ISREG(st.st_mode))
            throw io_error("cannot replace " + path_of(name) + ": it is " + detail::file_kind_name(st.st_mode) +
                           ", not a file shardpack wrote");
        if (st.st_uid != ::geteuid())
            throw io_error("cannot replace " + path_of(name) + ": it belongs to user " + std::to_string(st.st_uid) +
                           ", not to this user (" + std::to_string(::geteuid()) + ")");
        if (is_noted_input(st))
            throw io_error("cannot replace " + path_of(name) + ": it is an input of this command; name another file");
    }
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

void output_folder::append_durably(const std::string& name, std::initializer_list<std::string_view> pieces) const {
    const int fd = open_append(name);
    for (const std::string_view text : pieces) {
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                const int err = errno;
                ::close(fd);
                fail("write", path_of(name), err);
            }
            done += std::size_t(n);
        }
    }
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) fail("sync", path_of(name), err);
}

namespace {
// The permissions a file created with mode 0644 gets: read once, before any thread starts
// (umask cannot be read without setting it).
mode_t new_file_mode() {
    static const mode_t mode = [] {
        const mode_t mask = ::umask(022);
        ::umask(mask);
        return mode_t(0644 & ~mask);
    }();
    return mode;
}
}  // namespace

bool output_folder::link_like_copy(const std::string& source, std::uint64_t expected_size, const std::string& name,
                                   std::string& why_not) const {
    const int fd = ::open(source.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        why_not = errno == ELOOP ? "it is a symbolic link" : std::string("cannot open it: ") + std::strerror(errno);
        return false;
    }
    struct stat st {};
    const bool stat_ok = ::fstat(fd, &st) == 0;
    ::close(fd);
    if (!stat_ok || !S_ISREG(st.st_mode)) why_not = "it is not a regular file";
    else if (std::uint64_t(st.st_size) != expected_size) why_not = "its size changed";
    else if (st.st_uid != ::geteuid()) why_not = "it belongs to user " + std::to_string(st.st_uid) + ", not to this user";
    else if ((st.st_mode & 07777) != new_file_mode()) why_not = "its permissions differ from a new file's";
    if (!why_not.empty()) return false;
    if (::linkat(AT_FDCWD, source.c_str(), fd_, name.c_str(), 0) != 0) {
        why_not = std::string("cannot link it: ") + std::strerror(errno);
        return false;
    }
    // The name may have been replaced between the check and the link: the link must be to
    // the very file checked, else it goes and the caller copies.
    struct stat linked {};
    if (::fstatat(fd_, name.c_str(), &linked, AT_SYMLINK_NOFOLLOW) != 0 || linked.st_dev != st.st_dev ||
        linked.st_ino != st.st_ino) {
        ::unlinkat(fd_, name.c_str(), 0);
        why_not = "it changed while being linked";
        return false;
    }
    return true;
}

}  // namespace shardpack
