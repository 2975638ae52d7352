// Reading inputs: files the user names (CSV lists, class tables, configs, images, masks) and
// the files of datasets and parts shardpack reads back. The rules are the reader's
// (shardpack/detail/regular_file.hpp): a non-blocking open, so a FIFO or device is refused
// instead of waited on; only regular files; a size bound; the path in every error.
//
// Every input opened here is also remembered (device and inode), so that a write can refuse
// to replace a file this process reads (output_folder::write_atomically).
#pragma once
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardpack {

// Remembers `st` (a file this process reads) / whether one like it was remembered.
void note_input(const struct stat& st);
bool is_noted_input(const struct stat& st);

// An input opened for reading: a regular file (refused otherwise, naming what it is).
class input_file {
public:
    input_file() = default;
    // Throws input_error "cannot read PATH: reason".
    explicit input_file(const std::string& path);
    // The same without an exception (for the many images of a build): false with `why` set
    // ("not a regular file (a FIFO)"). remember: note it as an input (note_input).
    bool open(const std::string& path, std::string& why, bool remember);
    // A file of a folder read back (a dataset's or part's): NAME in the folder open as
    // `folder_fd` at `folder_path`, never through a link. Not remembered as an input.
    input_file(int folder_fd, const std::string& folder_path, const std::string& name);
    ~input_file();
    input_file(const input_file&) = delete;
    input_file& operator=(const input_file&) = delete;

    // Up to n bytes into buf; fewer only at the end of the file. Throws input_error.
    std::size_t read(void* buf, std::size_t n);
    // The same without an exception: the count, or -1 with errno set.
    long long read_some(void* buf, std::size_t n);
    // The whole file when it has at most max_bytes; throws input_error otherwise.
    std::string read_all(std::uint64_t max_bytes);
    std::uint64_t size() const { return static_cast<std::uint64_t>(stat_.st_size); }
    const struct stat& status() const { return stat_; }
    const std::string& path() const { return path_; }
    int fd() const { return fd_; }

private:
    std::string path_;
    int fd_ = -1;
    struct stat stat_ {};
};

// A text input read in pieces (CSV lists, class tables, configs). The path "-" is standard
// input (whatever it is: a pipe is the point); any other path must be a regular file, opened
// without blocking, and is remembered as an input.
class text_file_reader {
public:
    // Throws input_error "cannot read PATH: reason".
    explicit text_file_reader(const std::string& path);
    // Up to n bytes into buf; 0 at the end of the file. Throws input_error "cannot read PATH: reason".
    std::size_t read(char* buf, std::size_t n);
    // The file's size where known (a regular file), else 0.
    std::uint64_t size() const { return size_; }

private:
    std::string path_;
    input_file file_;
    bool is_stdin_ = false;
    std::uint64_t size_ = 0;
    bool done_ = false;
};

// Largest class table or config file accepted: such files are a few kilobytes, and 65535
// classes with long names and descriptions fit in a few megabytes.
inline constexpr std::uint64_t max_text_input_bytes = std::uint64_t(16) << 20;

// The whole text file's bytes ("-": standard input), at most max_bytes of them. Throws
// input_error "cannot read PATH: reason" (not a regular file, larger than max_bytes, a read error).
std::string read_text_file(const std::string& path, std::uint64_t max_bytes = max_text_input_bytes);

// The whole of the regular file at `path` when it has at most max_bytes bytes. Throws
// input_error "cannot read PATH: reason".
std::string read_input_file(const std::string& path, std::uint64_t max_bytes);

// A file read line by line, each at most max_line bytes, never whole: for our own files that
// may be large (fingerprints.tsv, rejected.csv). Lines are returned without their LF.
class line_reader {
public:
    line_reader(input_file& file, std::size_t max_line);
    // False at the end of the file. Throws input_error naming the file and line for a longer line.
    bool next(std::string& line);
    std::uint64_t line_number() const { return line_number_; }

private:
    input_file& file_;
    std::size_t max_line_;
    std::string buffer_;
    std::size_t start_ = 0;
    bool end_ = false;
    std::uint64_t line_number_ = 0;
};

}  // namespace shardpack
