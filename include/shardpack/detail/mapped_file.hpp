// A read-only memory mapping of a whole file (POSIX mmap). Shards are read through this, so a
// raw record is a pointer into the page cache and costs no copy.
#pragma once
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include "error.hpp"
#include "regular_file.hpp"

namespace shardpack::detail {

class mapped_file {
public:
    explicit mapped_file(const std::string& path) {
        // Non-blocking open and a type check first: a FIFO named like a shard must not hang.
        struct stat st {};
        std::string why;
        const int fd = open_regular_file(path, st, why);
        if (fd < 0) throw error(path + ": " + why);
        size_ = static_cast<std::size_t>(st.st_size);
        if (size_ > 0) {
            void* p = ::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd, 0);
            if (p == MAP_FAILED) {
                const int e = errno;
                ::close(fd);
                throw error(path + ": cannot map: " + std::strerror(e));
            }
            data_ = static_cast<const unsigned char*>(p);
        }
        ::close(fd);  // the mapping keeps the file alive
    }
    ~mapped_file() {
        if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
    }
    mapped_file(const mapped_file&) = delete;
    mapped_file& operator=(const mapped_file&) = delete;

    const unsigned char* data() const { return data_; }
    std::size_t size() const { return size_; }

    // Hints that the whole file will be read in order (verify) or at random (training).
    void advise_sequential() const {
        if (data_) ::madvise(const_cast<unsigned char*>(data_), size_, MADV_SEQUENTIAL);
    }
    void advise_random() const {
        if (data_) ::madvise(const_cast<unsigned char*>(data_), size_, MADV_RANDOM);
    }

private:
    const unsigned char* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace shardpack::detail
