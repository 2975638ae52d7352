// Where a dataset's bytes come from: a "storage" (the dataset folder: small files such as
// manifest.json, and shards by name) and a "byte source" (one shard: its size, reads at an
// offset, an optional whole-file mapping for zero-copy, and read-ahead hints).
//
// The reader (reader.hpp) reads everything through these two interfaces. This header holds the
// interfaces and the local implementations (a folder on a POSIX file system, read through mmap
// or through pread); a library that reads from elsewhere (object storage over HTTP) implements
// storage and byte_source in its own headers and passes its storage in open_options::storage,
// so that reader.hpp itself needs nothing but the standard library, POSIX, zstd and xxHash.
//
// Contract for implementations:
//   - every member may be called from any number of threads at once;
//   - read_at reads exactly `length` bytes or throws shardpack::error naming the file and the
//     reason (a short read is an error: shards do not change size once published);
//   - a byte_source stays readable for its whole lifetime, even when the name it was opened
//     under is removed or replaced (a rebuild): local sources hold the open file (or its
//     mapping), remote ones pin the object version they opened (ETag) and fail clearly if it
//     is gone;
//   - prefetch and advise are hints: they may do nothing, and never throw for a valid range.
#pragma once
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "error.hpp"
#include "regular_file.hpp"

namespace shardpack {

// A byte range of one source: [offset, offset + length).
struct byte_range {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};

// How records of a source will be read next (madvise for mappings, posix_fadvise for files).
enum class access_pattern { normal, random, sequential };

// One shard file (or object).
class byte_source {
public:
    virtual ~byte_source() = default;
    virtual std::uint64_t size() const = 0;
    // Reads bytes [offset, offset + length) into dst; throws shardpack::error on failure.
    virtual void read_at(std::uint64_t offset, std::size_t length, void* dst) const = 0;
    // The whole source in memory (a mapping), or null: then records are read with read_at.
    virtual const unsigned char* mapped() const { return nullptr; }
    // These ranges (sorted by offset, not overlapping, neighbours already merged) will be read
    // soon: start fetching them (read-ahead). A hint; the default does nothing.
    virtual void prefetch(const byte_range* ranges, std::size_t count) const {
        (void)ranges;
        (void)count;
    }
    // How the source will be read from now on. A hint; the default does nothing.
    virtual void advise(access_pattern pattern) const { (void)pattern; }
    // Names the source in messages ("folder/shard-00000-....spk", a URL).
    virtual std::string describe() const = 0;
};

// A dataset folder (or prefix).
class storage {
public:
    virtual ~storage() = default;
    // The whole of a small file of the folder (manifest.json), at most max_bytes bytes; throws
    // shardpack::error naming it when it is missing, larger, or cannot be read.
    virtual std::string read_small_file(const std::string& name, std::uint64_t max_bytes) const = 0;
    // Opens a shard (or any file of the folder) by name.
    virtual std::shared_ptr<byte_source> open(const std::string& name) const = 0;
    // A token that changes when the file `name` is replaced (a rebuild renames a new
    // manifest.json over the old one): inode, size and time for local files, an ETag remotely.
    // Empty when the file does not exist or the storage cannot tell; open() then does not retry.
    virtual std::string version_of(const std::string& name) const = 0;
    // Names the folder in messages (a path, a URL).
    virtual std::string describe() const = 0;
    // The names of the files directly in the folder, in no particular order (`shardpack verify`
    // looks for files no manifest names). Readers never list; a storage that cannot says so.
    virtual std::vector<std::string> list_names() const {
        throw error(describe() + ": this storage cannot list its files");
    }
    // Whether dataset::open opens shards only when first read, however few (true where an open
    // costs requests, as on object storage); false: as many as max_open_shards allows at open.
    virtual bool opens_shards_lazily() const { return false; }
    // These files will be opened soon (the shards a batch reads that are not open): start
    // fetching what open() reads, all at once. A hint; the default does nothing.
    virtual void will_open(const std::string* names, std::size_t count) const {
        (void)names;
        (void)count;
    }
};

// How shards are read (open_options::io; reader.hpp's I/O says when each wins):
//   mmap:   each local shard is memory-mapped; raw records are zero-copy views into the page cache;
//   pread:  each local shard is an open file; each record is one pread, and a batch's ranges are
//           announced to the kernel (posix_fadvise WILLNEED) first;
//   stream: the reader's I/O engine (io_engine.hpp) reads every shard whole, in file order, in
//           the background, into the page cache (local) or its own memory (remote), and
//           serves any order from what has arrived;
//   blocks: the engine reads the extents dataset::prefetch and read_batch ask for, in the
//           storage's order, into a cache bounded by open_options::cache_bytes;
//   automatic: the default: mmap where the data is in the page cache already, else stream
//           when the dataset fits cache_bytes, else blocks.
enum class io_mode { automatic, mmap, pread, stream, blocks };

// The name of an io_mode ("auto", "mmap", "pread", "stream", "blocks"), as Python spells it.
inline const char* io_mode_name(io_mode m) {
    switch (m) {
        case io_mode::mmap: return "mmap";
        case io_mode::pread: return "pread";
        case io_mode::stream: return "stream";
        case io_mode::blocks: return "blocks";
        case io_mode::automatic: break;
    }
    return "auto";
}

namespace detail {

inline std::string errno_text(int e) { return std::strerror(e); }

// A read-only memory mapping of a whole shard.
class mmap_source final : public byte_source {
public:
    explicit mmap_source(const std::string& path) : path_(path) {
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
                throw error(path + ": cannot map: " + errno_text(e) +
                            (e == ENOMEM ? " (too many mappings? see vm.max_map_count and open_options::max_open_shards)" : ""));
            }
            data_ = static_cast<const unsigned char*>(p);
        }
        ::close(fd);  // the mapping keeps the file alive, also after its name is removed
    }
    ~mmap_source() override {
        if (data_) ::munmap(const_cast<unsigned char*>(data_), size_);
    }
    mmap_source(const mmap_source&) = delete;
    mmap_source& operator=(const mmap_source&) = delete;

    std::uint64_t size() const override { return size_; }
    const unsigned char* mapped() const override { return data_; }
    const unsigned char* data() const { return data_; }
    void read_at(std::uint64_t offset, std::size_t length, void* dst) const override {
        if (offset > size_ || length > size_ - offset)
            throw error(path_ + ": read of " + std::to_string(length) + " bytes at " + std::to_string(offset) +
                        " runs past the end (" + std::to_string(size_) + " bytes)");
        if (length) std::memcpy(dst, data_ + offset, length);
    }
    void prefetch(const byte_range* ranges, std::size_t count) const override {
        if (!data_ || count == 0) return;
        if (resident(ranges, count)) return;
        const std::uint64_t page = page_size();
        for (std::size_t i = 0; i < count; ++i) {
            const std::uint64_t begin = ranges[i].offset / page * page;
            const std::uint64_t end = std::min<std::uint64_t>(ranges[i].offset + ranges[i].length, size_);
            if (end > begin)
                ::madvise(const_cast<unsigned char*>(data_) + begin, static_cast<std::size_t>(end - begin), MADV_WILLNEED);
        }
    }
    void advise(access_pattern pattern) const override {
        if (!data_) return;
        const int advice = pattern == access_pattern::random ? MADV_RANDOM
                         : pattern == access_pattern::sequential ? MADV_SEQUENTIAL : MADV_NORMAL;
        ::madvise(const_cast<unsigned char*>(data_), size_, advice);
    }
    std::string describe() const override { return path_; }

    static std::uint64_t page_size() {
        static const long p = ::sysconf(_SC_PAGESIZE);
        return p > 0 ? std::uint64_t(p) : 4096;
    }

private:
    // Whether the pages of `ranges` were all in memory at the last look, so that no WILLNEED is
    // needed. A WILLNEED is a system call per range that walks the page cache page by page:
    // about 1.5 us a range here, a fifth of a warm read of a 12 KB raw record, and all of it
    // wasted on a shard in memory. So one mincore() over the span of a batch's ranges (at most
    // `look_limit` bytes: ~50 us for 86 MB) looks, and while it found every page resident no
    // hint is given for a second. A span that was not all resident is looked at again only after
    // a back-off (1 s, doubling to 64 s), so a cold shard pays the per-range hints and rarely the
    // look. Hints only: a page evicted meanwhile costs a fault, never a wrong byte.
    bool resident(const byte_range* ranges, std::size_t count) const {
        constexpr std::int64_t second = 1000000000;
        constexpr std::uint64_t look_limit = std::uint64_t(256) << 20;
        const std::int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                     std::chrono::steady_clock::now().time_since_epoch()).count();
        if (now < resident_until_.load(std::memory_order_relaxed)) return true;
        if (now < next_look_.load(std::memory_order_relaxed)) return false;
        const std::uint64_t page = page_size();
        std::uint64_t begin = size_, end = 0;
        for (std::size_t i = 0; i < count; ++i) {
            begin = std::min(begin, ranges[i].offset / page * page);
            end = std::max(end, std::min<std::uint64_t>(ranges[i].offset + ranges[i].length, size_));
        }
        bool all = false;
        if (end > begin && end - begin <= look_limit) {
            thread_local std::vector<unsigned char> pages;
            pages.resize(static_cast<std::size_t>((end - begin + page - 1) / page));
            if (::mincore(const_cast<unsigned char*>(data_) + begin, static_cast<std::size_t>(end - begin), pages.data()) == 0)
                all = std::all_of(pages.begin(), pages.end(), [](unsigned char v) { return (v & 1) != 0; });
        }
        if (all) {
            resident_until_.store(now + second, std::memory_order_relaxed);
            back_off_.store(second, std::memory_order_relaxed);
        } else {
            const std::int64_t wait = back_off_.load(std::memory_order_relaxed);
            next_look_.store(now + wait, std::memory_order_relaxed);
            back_off_.store(std::min<std::int64_t>(2 * wait, 64 * second), std::memory_order_relaxed);
        }
        return all;
    }

    std::string path_;
    const unsigned char* data_ = nullptr;
    std::size_t size_ = 0;
    // resident()'s state (steady-clock nanoseconds); relaxed: a race only moves a hint.
    mutable std::atomic<std::int64_t> resident_until_{0}, next_look_{0}, back_off_{1000000000};
};

// A shard read with pread through an open descriptor (kept open: the file stays readable after
// a rebuild removes its name).
class pread_source final : public byte_source {
public:
    explicit pread_source(const std::string& path) : path_(path) {
        struct stat st {};
        std::string why;
        fd_ = open_regular_file(path, st, why);
        if (fd_ < 0) {
            if (why.find("Too many open files") != std::string::npos)
                why += " (see ulimit -n and open_options::max_open_shards)";
            throw error(path + ": " + why);
        }
        size_ = static_cast<std::uint64_t>(st.st_size);
    }
    ~pread_source() override {
        if (fd_ >= 0) ::close(fd_);
    }
    pread_source(const pread_source&) = delete;
    pread_source& operator=(const pread_source&) = delete;

    std::uint64_t size() const override { return size_; }
    void read_at(std::uint64_t offset, std::size_t length, void* dst) const override {
        if (offset > size_ || length > size_ - offset)
            throw error(path_ + ": read of " + std::to_string(length) + " bytes at " + std::to_string(offset) +
                        " runs past the end (" + std::to_string(size_) + " bytes)");
        std::size_t done = 0;
        while (done < length) {
            const ssize_t got = ::pread(fd_, static_cast<char*>(dst) + done, length - done, off_t(offset + done));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0) throw error(path_ + ": read error at offset " + std::to_string(offset + done) + ": " + errno_text(errno));
            if (got == 0)
                throw error(path_ + ": ends at " + std::to_string(offset + done) + " bytes, " + std::to_string(size_) +
                            " were there at open: the file was truncated");
            done += static_cast<std::size_t>(got);
        }
    }
    void prefetch(const byte_range* ranges, std::size_t count) const override {
        for (std::size_t i = 0; i < count; ++i)
            ::posix_fadvise(fd_, off_t(ranges[i].offset), off_t(ranges[i].length), POSIX_FADV_WILLNEED);
    }
    void advise(access_pattern pattern) const override {
        const int advice = pattern == access_pattern::random ? POSIX_FADV_RANDOM
                         : pattern == access_pattern::sequential ? POSIX_FADV_SEQUENTIAL : POSIX_FADV_NORMAL;
        ::posix_fadvise(fd_, 0, 0, advice);
    }
    std::string describe() const override { return path_; }

private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

// Opens a local file as `mode` says (automatic means mmap here; the dataset decides).
inline std::shared_ptr<byte_source> open_local_source(const std::string& path, io_mode mode) {
    if (mode == io_mode::pread || mode == io_mode::stream || mode == io_mode::blocks)
        return std::make_shared<pread_source>(path);
    return std::make_shared<mmap_source>(path);
}

// What tells one version of a local file from the next: a rebuild renames a new file over it.
inline std::string local_file_version(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return {};
    return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
           std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

// The share of a local file's pages in the page cache now (0 when it cannot tell): one
// mapping and one mincore() of the whole file, then unmapped. ~10 us plus 1 us per 4 MiB.
inline double resident_share(const std::string& path, std::uint64_t& bytes) {
    struct stat st {};
    std::string why;
    bytes = 0;
    const int fd = open_regular_file(path, st, why);
    if (fd < 0) return 0;
    bytes = static_cast<std::uint64_t>(st.st_size);
    double share = 0;
    if (st.st_size > 0) {
        const std::size_t size = static_cast<std::size_t>(st.st_size);
        void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
        if (p != MAP_FAILED) {
            const std::uint64_t page = mmap_source::page_size();
            std::vector<unsigned char> pages(static_cast<std::size_t>((size + page - 1) / page));
            if (::mincore(p, size, pages.data()) == 0) {
                const auto in = std::count_if(pages.begin(), pages.end(), [](unsigned char v) { return (v & 1) != 0; });
                share = double(in) / double(pages.size());
            }
            ::munmap(p, size);
        }
    }
    ::close(fd);
    return share;
}

// Memory the system could give this process now without swapping: MemAvailable (Linux), else
// the free pages; 0 when neither can be read.
inline std::uint64_t available_memory() {
    struct stat st {};
    std::string why;
    const int fd = open_regular_file("/proc/meminfo", st, why);  // st_size is 0: read what comes
    if (fd >= 0) {
        char text[4096];
        const long long got = read_fully(fd, text, sizeof text - 1);
        ::close(fd);
        if (got > 0) {
            text[got] = 0;
            const char* at = std::strstr(text, "MemAvailable:");
            if (at) return std::strtoull(at + 13, nullptr, 10) * 1024;
        }
    }
#ifdef _SC_AVPHYS_PAGES
    const long pages = ::sysconf(_SC_AVPHYS_PAGES);
    if (pages > 0) return std::uint64_t(pages) * mmap_source::page_size();
#endif
    return 0;
}

// A dataset folder on a local (or network-mounted) file system.
class local_storage final : public storage {
public:
    local_storage(std::string folder, io_mode mode) : folder_(std::move(folder)), mode_(mode) {}
    std::string read_small_file(const std::string& name, std::uint64_t max_bytes) const override {
        return read_regular_file(folder_ + "/" + name, max_bytes);
    }
    std::shared_ptr<byte_source> open(const std::string& name) const override {
        return open_local_source(folder_ + "/" + name, mode_);
    }
    // The share of these files' bytes in the page cache (io_mode::automatic's first question).
    double resident_share(const std::vector<std::string>& names) const {
        std::uint64_t in = 0, all = 0;
        for (const auto& n : names) {
            std::uint64_t bytes = 0;
            const double share = detail::resident_share(folder_ + "/" + n, bytes);
            in += static_cast<std::uint64_t>(share * double(bytes));
            all += bytes;
        }
        return all ? double(in) / double(all) : 1.0;
    }
    std::string version_of(const std::string& name) const override { return local_file_version(folder_ + "/" + name); }
    std::string describe() const override { return folder_; }
    std::vector<std::string> list_names() const override {
        std::vector<std::string> names;
        DIR* d = ::opendir(folder_.c_str());
        if (!d) throw error(folder_ + ": cannot list the folder: " + std::strerror(errno));
        errno = 0;
        while (const dirent* e = ::readdir(d)) {
            const std::string n = e->d_name;
            if (n != "." && n != "..") names.push_back(n);
            errno = 0;
        }
        const int failed = errno;
        ::closedir(d);
        if (failed) throw error(folder_ + ": cannot list the folder: " + std::strerror(failed));
        return names;
    }
    io_mode mode() const { return mode_; }
    const std::string& folder() const { return folder_; }

private:
    std::string folder_;
    io_mode mode_;
};

// Sorts ranges by offset and merges those that overlap or lie within `gap` bytes of each other
// (reading a small gap costs less than another request on a disk or over HTTP).
inline void merge_ranges(std::vector<byte_range>& ranges, std::uint64_t gap) {
    if (ranges.size() < 2) return;
    std::sort(ranges.begin(), ranges.end(), [](const byte_range& a, const byte_range& b) { return a.offset < b.offset; });
    std::size_t out = 0;
    for (std::size_t i = 1; i < ranges.size(); ++i) {
        byte_range& last = ranges[out];
        const std::uint64_t end = last.offset + last.length;
        if (ranges[i].offset <= end + gap) {
            last.length = std::max(end, ranges[i].offset + ranges[i].length) - last.offset;
        } else {
            ranges[++out] = ranges[i];
        }
    }
    ranges.resize(out + 1);
}

}  // namespace detail
}  // namespace shardpack
