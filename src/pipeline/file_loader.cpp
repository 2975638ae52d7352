#include "pipeline/file_loader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shardpack {

std::string read_file_into(const std::string& path, std::vector<std::uint8_t>& out) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        return "not a regular file";
    }
    out.resize(static_cast<std::size_t>(st.st_size));
    std::size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::read(fd, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int err = n < 0 ? errno : 0;
            ::close(fd);
            return err ? std::string("read error: ") + std::strerror(err) : "file shrank while being read";
        }
        done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    if (out.empty()) return "empty file";
    return {};
}

void file_loader::operator()(sample_job& job) const {
    std::string why = read_file_into(job.row->image_path, job.image_file);
    if (!why.empty()) {
        job.error = job.row->image_path + ": " + why;
        return;
    }
    if (!job.row->label_path.empty()) {
        why = read_file_into(job.row->label_path, job.label_file);
        if (!why.empty()) job.error = job.row->label_path + ": " + why;
    }
}

}  // namespace shardpack
