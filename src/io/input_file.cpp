#include "io/input_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>

#include "errors.hpp"
#include "shardpack/detail/regular_file.hpp"

namespace shardpack {

namespace {
std::mutex noted_mutex;
std::set<std::pair<dev_t, ino_t>>& noted() {
    static std::set<std::pair<dev_t, ino_t>> files;
    return files;
}
// The list of inputs remembered stays small: lists, tables, configs, manifests and the masks
// of `colors`; past this many, the oldest checks still hold and new ones are not added.
constexpr std::size_t max_noted_inputs = std::size_t(1) << 21;
}  // namespace

void note_input(const struct stat& st) {
    std::lock_guard<std::mutex> lock(noted_mutex);
    if (noted().size() < max_noted_inputs) noted().emplace(st.st_dev, st.st_ino);
}

bool is_noted_input(const struct stat& st) {
    std::lock_guard<std::mutex> lock(noted_mutex);
    return noted().count({st.st_dev, st.st_ino}) != 0;
}

input_file::input_file(const std::string& path) : path_(path) {
    std::string why;
    fd_ = detail::open_regular_file(path, stat_, why);
    if (fd_ < 0) throw input_error("cannot read " + path + ": " + why);
    note_input(stat_);
}

bool input_file::open(const std::string& path, std::string& why, bool remember) {
    if (fd_ >= 0) ::close(fd_);
    path_ = path;
    fd_ = detail::open_regular_file(path, stat_, why);
    if (fd_ < 0) return false;
    if (remember) note_input(stat_);
    return true;
}

input_file::input_file(int folder_fd, const std::string& folder_path, const std::string& name)
    : path_(folder_path + "/" + name) {
    // The same rules as open_regular_file, through the folder's descriptor and never a link.
    fd_ = ::openat(folder_fd, name.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_NOFOLLOW | O_CLOEXEC);
    if (fd_ < 0) {
        const int err = errno;
        struct stat st {};
        if (err == ELOOP || (::fstatat(folder_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)))
            throw input_error("cannot read " + path_ + ": it is a symbolic link, which shardpack never follows in a dataset");
        throw input_error("cannot read " + path_ + ": " + std::strerror(err));
    }
    std::string why;
    if (::fstat(fd_, &stat_) != 0) why = std::string("cannot stat: ") + std::strerror(errno);
    else if (!S_ISREG(stat_.st_mode)) why = std::string("not a regular file (") + detail::file_kind_name(stat_.st_mode) + ")";
    else if (const int flags = ::fcntl(fd_, F_GETFL); flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0)
        why = std::string("cannot clear O_NONBLOCK: ") + std::strerror(errno);
    if (!why.empty()) {
        ::close(fd_);
        fd_ = -1;
        throw input_error("cannot read " + path_ + ": " + why);
    }
    // Not remembered as an input: our own files are read back to be replaced (a ledger).
}

input_file::~input_file() {
    if (fd_ >= 0) ::close(fd_);
}

std::size_t input_file::read(void* buf, std::size_t n) {
    const long long got = detail::read_fully(fd_, buf, n);
    if (got < 0) throw input_error("cannot read " + path_ + ": " + std::strerror(errno));
    return static_cast<std::size_t>(got);
}

long long input_file::read_some(void* buf, std::size_t n) { return detail::read_fully(fd_, buf, n); }

std::string input_file::read_all(std::uint64_t max_bytes) {
    if (size() > max_bytes)
        throw input_error("cannot read " + path_ + ": it is " + std::to_string(size()) + " bytes, more than the " +
                          std::to_string(max_bytes) + " accepted for this file");
    std::string out(static_cast<std::size_t>(size()), '\0');
    const std::size_t got = read(out.data(), out.size());
    char extra = 0;
    if (got != out.size() || (out.size() < max_bytes && read(&extra, 1) != 0))
        throw input_error("cannot read " + path_ + ": it changed size while being read");
    return out;
}

std::string read_input_file(const std::string& path, std::uint64_t max_bytes) {
    input_file file(path);
    return file.read_all(max_bytes);
}

text_file_reader::text_file_reader(const std::string& path) : path_(path) {
    if (path == "-") {
        is_stdin_ = true;
        return;
    }
    std::string why;
    if (!file_.open(path, why, true)) throw input_error("cannot read " + path + ": " + why);
    size_ = file_.size();
}

std::size_t text_file_reader::read(char* buf, std::size_t n) {
    if (done_ || n == 0) return 0;
    const long long got = detail::read_fully(is_stdin_ ? STDIN_FILENO : file_.fd(), buf, n);
    if (got < 0) throw input_error("cannot read " + path_ + ": " + std::strerror(errno));
    done_ = static_cast<std::size_t>(got) < n;  // short only at the end of the file
    return static_cast<std::size_t>(got);
}

std::string read_text_file(const std::string& path, std::uint64_t max_bytes) {
    text_file_reader file(path);
    if (file.size() > max_bytes)
        throw input_error("cannot read " + path + ": it is " + std::to_string(file.size()) + " bytes, more than the " +
                          std::to_string(max_bytes) + " accepted for this kind of file");
    std::string out;
    char buf[1 << 16];
    while (const std::size_t n = file.read(buf, sizeof buf)) {
        if (out.size() + n > max_bytes)  // standard input, or a file that grew
            throw input_error("cannot read " + path + ": more than the " + std::to_string(max_bytes) +
                              " bytes accepted for this kind of file");
        out.append(buf, n);
    }
    return out;
}

line_reader::line_reader(input_file& file, std::size_t max_line) : file_(file), max_line_(max_line) {}

bool line_reader::next(std::string& line) {
    for (;;) {
        const std::size_t lf = buffer_.find('\n', start_);
        if (lf != std::string::npos || end_) {
            if (start_ >= buffer_.size() && lf == std::string::npos) return false;
            const std::size_t stop = lf == std::string::npos ? buffer_.size() : lf;
            line.assign(buffer_, start_, stop - start_);
            start_ = lf == std::string::npos ? buffer_.size() : lf + 1;
            ++line_number_;
            if (line.size() > max_line_) break;
            return true;
        }
        if (buffer_.size() - start_ > max_line_) {
            ++line_number_;
            break;
        }
        buffer_.erase(0, start_);
        start_ = 0;
        const std::size_t old = buffer_.size();
        buffer_.resize(old + (1 << 16));
        const std::size_t got = file_.read(buffer_.data() + old, 1 << 16);
        buffer_.resize(old + got);
        end_ = got == 0;
    }
    throw input_error(file_.path() + ":" + std::to_string(line_number_) + ": the line is longer than the " +
                      std::to_string(max_line_) + " bytes accepted in this file");
}

}  // namespace shardpack
