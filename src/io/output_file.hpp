// A file written through a buffer with POSIX calls, so that every failure (ENOSPC, EIO, EROFS)
// surfaces as an io_error naming the file, and durability is explicit (sync()).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace shardpack {

class output_folder;

class output_file {
public:
    // A new file NAME in `folder`, created exclusively (output_folder::create_new): an existing
    // name, a link included, is an error.
    output_file(const output_folder& folder, const std::string& name);
    ~output_file();                          // closes; never throws (call close() to see errors)
    output_file(const output_file&) = delete;
    output_file& operator=(const output_file&) = delete;

    void write(const void* data, std::size_t size);
    void write_zeros(std::size_t count);
    std::uint64_t position() const { return position_; }
    void sync();   // flushes the buffer and fsyncs
    void close();  // flushes and closes
    const std::string& path() const { return path_; }

private:
    std::string path_;
    int fd_ = -1;
    std::vector<unsigned char> buffer_;
    std::size_t used_ = 0;
    std::uint64_t position_ = 0;
    void flush();
};

// Writes a whole small file durably under a temporary name (PATH.tmp-PID, created exclusively,
// never through a link) and renames it into place: a regular file of ours at PATH is replaced; a
// link at PATH is refused like anything that is not a regular file of this user or that is an input
// of this process (output_folder::write_atomically).
void write_file_atomically(const std::string& path, const std::string& contents);

}  // namespace shardpack
