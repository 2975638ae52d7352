// A cache folder of shardpack's own: the object-storage disk cache ($SHARDPACK_CACHE_DIR/meta
// and .../shards, src/remote/s3_storage.cpp). It is claimed like an output folder: used only
// when it was missing or empty when first claimed, and then marked by its ledger
// .shardpack-cache; a folder holding anything else, or a link, is refused with an error naming
// it, and nothing in it is touched. The ledger lists the files the cache wrote and may remove:
//
//   #shardpack-cache<TAB>1
//   file<TAB><inode><TAB><size><TAB><name>
//
// A file counts as the cache's only while the ledger lists its name with the inode and size it
// has now, and it is a regular file of this user, not a link: only such a file is read back
// (open_listed) and removed (eviction, damage). A user's file put into the folder, even under
// a name the cache writes, is never read, replaced or removed. Processes sharing the folder take
// turns on the ledger with an flock on .shardpack-cache.lock.
#pragma once
#include <sys/stat.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "io/output_folder.hpp"

namespace shardpack {

// A file of a cache folder, open for reading (it stays readable when its name is removed).
class cached_file {
public:
    cached_file(int fd, std::string path, std::uint64_t size) : fd_(fd), path_(std::move(path)), size_(size) {}
    ~cached_file();
    cached_file(const cached_file&) = delete;
    cached_file& operator=(const cached_file&) = delete;

    std::uint64_t size() const { return size_; }
    const std::string& path() const { return path_; }
    // Exactly `length` bytes at `offset`; io_error naming the file otherwise.
    void read_at(std::uint64_t offset, std::size_t length, void* dst) const;
    // The XXH3-64 of the whole file, read now.
    std::uint64_t xxh3() const;
    // Marks it used now (its modification time, the order of eviction).
    void touch() const;

private:
    int fd_;
    std::string path_;
    std::uint64_t size_;
};

class cache_folder {
public:
    // Bytes to write, in order.
    using pieces = std::vector<std::pair<const void*, std::size_t>>;

    // Opens `dir` (made with its missing parents, mode 0700, when missing) and claims it (see
    // above). io_error naming it when it is not a cache folder, or a link; nullptr when it is
    // missing and cannot be made (no cache then: not an error).
    static std::shared_ptr<cache_folder> claim(const std::string& dir);
    ~cache_folder();
    cache_folder(const cache_folder&) = delete;
    cache_folder& operator=(const cache_folder&) = delete;

    const std::string& path() const { return folder_->path(); }
    std::string path_of(const std::string& name) const { return folder_->path_of(name); }

    // A small file of the folder of exactly `size` bytes (its content is checked by the
    // caller); nullopt when it is missing, another size, not a regular file or a link.
    std::optional<std::string> read(const std::string& name, std::uint64_t size) const;
    // Whether a regular file (not a link) has that name.
    bool holds(const std::string& name) const { return folder_->kind_of(name) == output_folder::kind::file; }
    // Writes a new file `name` (a temporary, then a rename) unless the name is taken. Not
    // listed: the cache never removes it. False when it cannot be written.
    bool add(const std::string& name, const pieces& bytes) const;
    // The same, listed in the ledger, after removing listed files, least recently used first,
    // until the listed files and this one fit in `limit` bytes.
    bool add_listed(const std::string& name, const pieces& bytes, std::uint64_t limit) const;
    // The listed file `name` (above), opened; nullptr when there is none.
    std::shared_ptr<cached_file> open_listed(const std::string& name) const;
    // Removes the listed file `name` if it is still the one listed.
    void remove_listed(const std::string& name) const;

    static constexpr const char* ledger_name = ".shardpack-cache";
    static constexpr const char* lock_name = ".shardpack-cache.lock";

private:
    struct entry {
        std::uint64_t inode = 0, size = 0;
    };
    explicit cache_folder(std::shared_ptr<output_folder> folder) : folder_(std::move(folder)) {}
    std::vector<std::pair<std::string, entry>> listed() const;
    bool is_listed_file(const std::string& name, const entry& e, struct stat* st) const;
    // The temporary holding `bytes`, its inode and size; empty name when it cannot be written.
    std::string write_temporary(const pieces& bytes, entry& written) const;
    bool place(const std::string& temporary, const std::string& name) const;

    // Serialises the ledger's readers-modify-writers: threads by the mutex, processes by the flock.
    class turn;
    std::shared_ptr<output_folder> folder_;
    mutable std::mutex m_;
    mutable int lock_fd_ = -1;
    mutable int lock_pid_ = 0;  // the process that opened lock_fd_ (a forked child opens its own)
};

}  // namespace shardpack
