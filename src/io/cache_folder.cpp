#include "io/cache_folder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>
#include <sstream>

#include "errors.hpp"
#include "shardpack/detail/xxhash.hpp"

namespace shardpack {

namespace {
constexpr const char* magic = "#shardpack-cache\t1";
constexpr std::size_t max_ledger_bytes = std::size_t(64) << 20;
constexpr const char* ledger_head =
    "#shardpack-cache\t1\n"
    "# A shardpack cache: shardpack writes here, and removes only the files listed below\n"
    "# while each is still the file it wrote (same inode and size).\n";

bool is_plain_name(const std::string& name) {
    return !name.empty() && name[0] != '.' && name.find_first_of("/\t\n") == std::string::npos;
}

// Makes `path` and its missing parents, mode 0700 (the cache holds the user's data).
bool make_folders(const std::string& path) {
    std::string at;
    for (std::size_t i = 0; i <= path.size(); ++i) {
        if ((i == path.size() || path[i] == '/') && !at.empty() && ::mkdir(at.c_str(), 0700) != 0 && errno != EEXIST)
            return false;
        if (i < path.size()) at += path[i];
    }
    return true;
}
}  // namespace

cached_file::~cached_file() { ::close(fd_); }

void cached_file::read_at(std::uint64_t offset, std::size_t length, void* dst) const {
    std::size_t done = 0;
    while (done < length) {
        const ssize_t got = ::pread(fd_, static_cast<char*>(dst) + done, length - done, off_t(offset + done));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) throw io_error("cannot read " + path_ + ": " + std::strerror(errno));
        if (got == 0) throw io_error("cannot read " + path_ + ": it ends before byte " + std::to_string(offset + length));
        done += std::size_t(got);
    }
}

std::uint64_t cached_file::xxh3() const {
    XXH3_state_t h;
    XXH3_64bits_reset(&h);
    std::vector<unsigned char> buf(std::size_t(4) << 20);
    for (std::uint64_t at = 0; at < size_;) {
        const std::size_t n = std::size_t(std::min<std::uint64_t>(buf.size(), size_ - at));
        read_at(at, n, buf.data());
        XXH3_64bits_update(&h, buf.data(), n);
        at += n;
    }
    return XXH3_64bits_digest(&h);
}

void cached_file::touch() const { ::futimens(fd_, nullptr); }

class cache_folder::turn {
public:
    explicit turn(const cache_folder& c) : c_(c), lock_(c.m_) {
        if (c_.lock_fd_ >= 0 && c_.lock_pid_ != ::getpid()) c_.lock_fd_ = -1;  // the parent's: shares its flock
        if (c_.lock_fd_ < 0) {
            c_.lock_fd_ = c_.folder_->open_read_write(lock_name);
            c_.lock_pid_ = ::getpid();
        }
        while (::flock(c_.lock_fd_, LOCK_EX) != 0)
            if (errno != EINTR) throw io_error("cannot lock " + c_.path_of(lock_name) + ": " + std::strerror(errno));
    }
    ~turn() { ::flock(c_.lock_fd_, LOCK_UN); }

private:
    const cache_folder& c_;
    std::lock_guard<std::mutex> lock_;
};

std::shared_ptr<cache_folder> cache_folder::claim(const std::string& given) {
    std::string dir = given;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();  // "DIR/" would resolve a link at DIR
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) {
        if (!make_folders(dir)) return nullptr;
    } else if (S_ISLNK(st.st_mode)) {
        throw io_error(dir + " is a symbolic link; a shardpack cache is a folder of its own and never followed through "
                             "a link: set SHARDPACK_CACHE_DIR to another folder, or remove the link");
    }
    std::shared_ptr<cache_folder> c(new cache_folder(output_folder::open(dir, false)));
    const output_folder& f = *c->folder_;
    auto marked = [&] {
        if (f.kind_of(ledger_name) != output_folder::kind::file) return false;
        const auto text = f.read_small(ledger_name, max_ledger_bytes);
        if (!text || text->compare(0, std::strlen(magic), magic) != 0)
            throw io_error(dir + ": its " + ledger_name + " is not a shardpack cache ledger; not touching the folder. "
                           "Remove it, or set SHARDPACK_CACHE_DIR to another folder");
        return true;
    };
    if (marked()) return c;
    // Missing or empty (but for what a claim running at the same time writes): ours from now.
    std::vector<std::string> foreign;
    for (const auto& name : f.names())
        if (name != lock_name && name.rfind(std::string(ledger_name) + ".tmp-", 0) != 0) foreign.push_back(name);
    if (!foreign.empty()) {
        std::string shown;
        for (std::size_t i = 0; i < foreign.size() && i < 3; ++i) shown += (i ? ", " : "") + foreign[i];
        if (foreign.size() > 3) shown += " and " + std::to_string(foreign.size() - 3) + " more";
        throw io_error(dir + " is not a shardpack cache: it holds " + shown + " and no " + ledger_name +
                       " ledger. shardpack caches only in a folder it made (missing or empty at first use), and never "
                       "removes files it did not write; set SHARDPACK_CACHE_DIR to another folder, or empty this one");
    }
    try {
        turn t(*c);
        if (!marked()) f.write_atomically(ledger_name, ledger_head);
    } catch (const std::exception&) {
        return nullptr;  // an empty folder it cannot write to: no cache
    }
    return c;
}

cache_folder::~cache_folder() {
    if (lock_fd_ >= 0 && lock_pid_ == ::getpid()) ::close(lock_fd_);
}

std::optional<std::string> cache_folder::read(const std::string& name, std::uint64_t size) const {
    if (!is_plain_name(name)) return std::nullopt;
    auto text = folder_->read_small(name, std::size_t(size));
    if (!text || text->size() != size) return std::nullopt;
    return text;
}

std::vector<std::pair<std::string, cache_folder::entry>> cache_folder::listed() const {
    std::vector<std::pair<std::string, entry>> out;
    const auto text = folder_->read_small(ledger_name, max_ledger_bytes);
    if (!text) return out;
    std::size_t at = 0;
    while (at < text->size()) {
        const std::size_t nl = text->find('\n', at);
        if (nl == std::string::npos) break;  // a line being appended: not yet listed
        const std::string line = text->substr(at, nl - at);
        at = nl + 1;
        unsigned long long inode = 0, size = 0;
        int name_at = 0;
        if (line.rfind("file\t", 0) != 0 || std::sscanf(line.c_str(), "file\t%llu\t%llu\t%n", &inode, &size, &name_at) != 2 ||
            name_at <= 0)
            continue;
        const std::string name = line.substr(std::size_t(name_at));
        if (is_plain_name(name)) out.push_back({name, entry{inode, size}});
    }
    return out;
}

bool cache_folder::is_listed_file(const std::string& name, const entry& e, struct stat* out) const {
    struct stat st {};
    if (::fstatat(folder_->fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return false;
    if (out) *out = st;
    return S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && std::uint64_t(st.st_ino) == e.inode &&
           std::uint64_t(st.st_size) == e.size;
}

std::string cache_folder::write_temporary(const pieces& bytes, entry& written) const {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    char suffix[24];
    std::snprintf(suffix, sizeof suffix, "%016llx", static_cast<unsigned long long>(rng()));
    const std::string tmp = ".tmp-" + std::to_string(::getpid()) + "-" + suffix;
    int fd = -1;
    try {
        fd = folder_->create_new(tmp);  // O_EXCL | O_NOFOLLOW: a fresh file, never a link's target
    } catch (const std::exception&) {
        return {};
    }
    bool ok = true;
    for (const auto& [p, n] : bytes) {
        std::size_t done = 0;
        while (ok && done < n) {
            const ssize_t w = ::write(fd, static_cast<const char*>(p) + done, n - done);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) ok = false;
            else done += std::size_t(w);
        }
    }
    struct stat st {};
    ok = ok && ::fstat(fd, &st) == 0;
    if (::close(fd) != 0) ok = false;
    if (!ok) {
        ::unlinkat(folder_->fd(), tmp.c_str(), 0);
        return {};
    }
    written = entry{std::uint64_t(st.st_ino), std::uint64_t(st.st_size)};
    return tmp;
}

// Renames the temporary to `name` unless something has that name (it is left alone); the
// temporary is gone either way.
bool cache_folder::place(const std::string& temporary, const std::string& name) const {
    const int fd = folder_->fd();
    bool placed = ::renameat2(fd, temporary.c_str(), fd, name.c_str(), RENAME_NOREPLACE) == 0;
    if (!placed && (errno == EINVAL || errno == ENOSYS) && folder_->kind_of(name) == output_folder::kind::missing)
        placed = ::renameat(fd, temporary.c_str(), fd, name.c_str()) == 0;  // a file system without RENAME_NOREPLACE
    if (!placed) ::unlinkat(fd, temporary.c_str(), 0);
    return placed;
}

bool cache_folder::add(const std::string& name, const pieces& bytes) const {
    if (!is_plain_name(name) || folder_->kind_of(name) != output_folder::kind::missing) return false;
    entry written;
    const std::string tmp = write_temporary(bytes, written);
    return !tmp.empty() && place(tmp, name);
}

bool cache_folder::add_listed(const std::string& name, const pieces& bytes, std::uint64_t limit) const {
    if (!is_plain_name(name) || folder_->kind_of(name) != output_folder::kind::missing) return false;
    entry written;
    const std::string tmp = write_temporary(bytes, written);
    if (tmp.empty()) return false;
    try {
        turn t(*this);
        // The listed files that are still the ones listed, least recently used first.
        struct own {
            std::string name;
            entry e;
            std::int64_t used;
        };
        std::vector<own> files;
        std::uint64_t total = 0;
        for (const auto& [n, e] : listed()) {
            struct stat st {};
            if (n == name || !is_listed_file(n, e, &st)) continue;
            if (std::any_of(files.begin(), files.end(), [&n = n](const own& o) { return o.name == n; })) continue;
            files.push_back({n, e, std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec});
            total += e.size;
        }
        std::sort(files.begin(), files.end(), [](const own& a, const own& b) { return a.used < b.used; });
        std::vector<bool> gone(files.size(), false);
        for (std::size_t i = 0; i < files.size() && total + written.size > limit; ++i)
            if (::unlinkat(folder_->fd(), files[i].name.c_str(), 0) == 0 || errno == ENOENT) total -= files[i].e.size, gone[i] = true;
        const bool fits = total + written.size <= limit;
        const bool placed = fits && place(tmp, name);
        if (!placed && !fits) ::unlinkat(folder_->fd(), tmp.c_str(), 0);
        // The ledger: the files kept, and the new one.
        std::string text = ledger_head;
        auto line = [](const std::string& n, const entry& e) {
            return "file\t" + std::to_string(e.inode) + "\t" + std::to_string(e.size) + "\t" + n + "\n";
        };
        for (std::size_t i = 0; i < files.size(); ++i)
            if (!gone[i]) text += line(files[i].name, files[i].e);
        if (placed) text += line(name, written);
        folder_->write_atomically(ledger_name, text);
        return placed;
    } catch (const std::exception&) {
        ::unlinkat(folder_->fd(), tmp.c_str(), 0);
        return false;  // a cache that cannot be written is not an error
    }
}

std::shared_ptr<cached_file> cache_folder::open_listed(const std::string& name) const {
    if (!is_plain_name(name)) return nullptr;
    for (const auto& [n, e] : listed()) {
        if (n != name) continue;
        const int fd = ::openat(folder_->fd(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0) return nullptr;
        struct stat st {};
        if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && std::uint64_t(st.st_ino) == e.inode &&
            std::uint64_t(st.st_size) == e.size)
            return std::make_shared<cached_file>(fd, path_of(name), e.size);
        ::close(fd);
    }
    return nullptr;
}

void cache_folder::remove_listed(const std::string& name) const {
    try {
        turn t(*this);
        for (const auto& [n, e] : listed())
            if (n == name && is_listed_file(n, e, nullptr)) ::unlinkat(folder_->fd(), name.c_str(), 0);
    } catch (const std::exception&) {
        // Not removed: it stays listed, and is checked again at its next use.
    }
}

}  // namespace shardpack
