// A cold epoch through the kernel (issue 29): slowfs (../shared/tools/slowfs, built by CMake where
// fuse3 is found) mounts a small generated dataset as a hard disk (8 ms a seek, 150 MB/s, one head)
// BELOW the page cache, so that read-ahead, fadvise/madvise hints and page faults of memory maps
// reach the model as they would reach a disk. The mount gets 128 KiB of read-ahead (the kernel's
// default, what most disks and NFS mounts have). Each read starts evicted (posix_fadvise DONTNEED).
//
// - slowfs's seek counter is what the cold benchmark reports: files read in order cost about a
//   seek a file, records read shuffled about a seek a record.
// - cold_epoch_slowfs: one epoch with the C++ reader's defaults (open_options{}, the dataset's
//   preferred order, batches of 512) against the floor (the dataset's files read in order): the
//   reader must reach a third of the floor. Before the reader's own I/O engine (io_mode::stream/
//   blocks, issue 29) its defaults (mmap, a global shuffle: a seek a record) ran at 0.006-0.014x
//   and failed; with it, 0.56x (measured). Built against a reader without the engine (detected at
//   compile time), a miss is reported as an expected failure (ctest: skipped, with the figures),
//   unless SHARDPACK_COLD_STRICT=1.
// Without slowfs, /dev/fuse or root (to set the mount's read-ahead) both report themselves
// skipped with the reason. About 15 s (the default epoch stops once it is past the bound).
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <regex>
#include <thread>
#include <type_traits>

#include "shardpack/order.hpp"
#include "shardpack/reader.hpp"
#include "test_skip.hpp"
#include "test_support.hpp"

using namespace shardpack;
using namespace shardpack::test;
namespace fs = std::filesystem;

namespace {

using clock_type = std::chrono::steady_clock;
double seconds_since(clock_type::time_point t0) {
    return std::chrono::duration<double>(clock_type::now() - t0).count();
}

// The reader's I/O engine API (issue 29), detected so that this file compiles before and after it.
template <class E, class = void>
struct has_stream_mode : std::false_type {};
template <class E>
struct has_stream_mode<E, std::void_t<decltype(E::stream)>> : std::true_type {};
template <class D, class = void>
struct has_preferred_order : std::false_type {};
template <class D>
struct has_preferred_order<D, std::void_t<decltype(std::declval<const D&>().preferred_order())>> : std::true_type {};
constexpr bool engine_available = has_stream_mode<io_mode>::value;

// "blocks" when the dataset prefers the blocks order, else "global" (always, before the engine).
template <class D>
bool prefers_blocks(const D& ds) {
    if constexpr (has_preferred_order<D>::value) {
        const auto p = ds.preferred_order();
        if constexpr (std::is_same_v<std::decay_t<decltype(p)>, order_kind>) return p == order_kind::blocks;
        else return std::string(p) == "blocks";
    } else {
        return false;
    }
}

// The bytes of all shards (what the Python package calls data_bytes).
template <class D>
std::uint64_t shard_bytes_total(const D& ds) {
    std::uint64_t bytes = 0;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) bytes += ds.shard_bytes(k);
    return bytes;
}

// Why slowfs cannot be used here, or "" when it can.
std::string slowfs_unusable() {
#ifndef SHARDPACK_SLOWFS
    return std::string("slowfs was not built: ") + SHARDPACK_SLOWFS_MISSING;
#else
    if (::access("/dev/fuse", R_OK | W_OK) != 0) return "no usable /dev/fuse (FUSE is not available here)";
    if (::geteuid() != 0) return "not root: setting the mount's read_ahead_kb needs root";
    return "";
#endif
}

struct slowfs_counts {
    long long reads = 0, seeks = 0, bytes = 0;
};

#ifdef SHARDPACK_SLOWFS
// slowfs serving `source` at `mountpoint` with the hard-disk model, for the object's lifetime.
class slowfs_mount {
public:
    slowfs_mount(const std::string& source, const std::string& mountpoint, const std::string& log)
        : mountpoint_(mountpoint), log_(log) {
        fs::create_directories(mountpoint);
        struct stat parent {};
        REQUIRE(::stat(fs::path(mountpoint).parent_path().c_str(), &parent) == 0);
        pid_ = ::fork();
        REQUIRE(pid_ >= 0);
        if (pid_ == 0) {
            const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (fd >= 0) ::dup2(fd, 2);
            ::setenv("SLOWFS_SRC", source.c_str(), 1);
            ::setenv("SLOWFS_SEEK_MS", "8", 1);
            ::setenv("SLOWFS_MBPS", "150", 1);
            ::setenv("SLOWFS_REQ_MS", "0", 1);
            ::execl(SHARDPACK_SLOWFS, SHARDPACK_SLOWFS, mountpoint.c_str(), "-f", "-o", "ro", static_cast<char*>(nullptr));
            ::_exit(127);
        }
        // Mounted once the folder is on another device.
        const auto t0 = clock_type::now();
        for (;;) {
            struct stat st {};
            if (::stat(mountpoint.c_str(), &st) == 0 && st.st_dev != parent.st_dev) {
                dev_ = st.st_dev;
                break;
            }
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) {
                pid_ = -1;
                FAIL("slowfs exited before mounting: " << read_file(log));
            }
            if (seconds_since(t0) > 20) FAIL("slowfs did not mount within 20 s: " << read_file(log));
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    ~slowfs_mount() {
        if (pid_ <= 0) return;
        std::system(("fusermount3 -u " + shell_quote(mountpoint_) + " 2>/dev/null").c_str());
        for (int i = 0; i < 200; ++i) {
            int status = 0;
            if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
            std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, nullptr, 0);
    }
    slowfs_mount(const slowfs_mount&) = delete;
    slowfs_mount& operator=(const slowfs_mount&) = delete;

    // Sets the mount's read-ahead (/sys/class/bdi/MAJ:MIN/read_ahead_kb); "" or why it could not.
    std::string set_read_ahead_kb(int kb) const {
        const std::string file =
            "/sys/class/bdi/" + std::to_string(major(dev_)) + ":" + std::to_string(minor(dev_)) + "/read_ahead_kb";
        std::ofstream(file) << kb << "\n";
        const std::string now = read_file(file);
        if (now.rfind(std::to_string(kb), 0) == 0 && (now.size() == std::to_string(kb).size() || now[std::to_string(kb).size()] == '\n'))
            return "";
        return "could not set " + file + " to " + std::to_string(kb) + " (it reads \"" + now + "\")";
    }

    // The model's counters so far: SIGUSR1 makes slowfs print them to its log.
    slowfs_counts counts() const {
        const std::regex line(R"(slowfs: (\d+) reads, (\d+) seeks, (\d+) bytes)");
        const auto lines_now = [&] {
            std::vector<slowfs_counts> all;
            const std::string text = read_file(log_);
            for (std::sregex_iterator it(text.begin(), text.end(), line), end; it != end; ++it)
                all.push_back({std::stoll((*it)[1]), std::stoll((*it)[2]), std::stoll((*it)[3])});
            return all;
        };
        const std::size_t before = lines_now().size();
        REQUIRE(::kill(pid_, SIGUSR1) == 0);
        for (int i = 0; i < 400; ++i) {
            const auto all = lines_now();
            if (all.size() > before) return all.back();
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        FAIL("slowfs printed no counters after SIGUSR1: " << read_file(log_));
        return {};
    }

private:
    std::string mountpoint_, log_;
    pid_t pid_ = -1;
    dev_t dev_ = 0;
};
#endif

// Drops the folder's files from the page cache.
void evict(const std::string& folder) {
    for (const auto& e : fs::directory_iterator(folder)) {
        if (!e.is_regular_file()) continue;
        const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
    }
}

// The floor: the dataset's files read in order (names sorted: shards in dataset order), 1 MiB reads.
std::uint64_t read_in_order(const std::string& folder) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(folder))
        if (e.is_regular_file()) files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    std::vector<char> buffer(1 << 20);
    std::uint64_t total = 0;
    for (const auto& f : files) {
        const int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        for (ssize_t n; (n = ::read(fd, buffer.data(), buffer.size())) > 0;) total += std::uint64_t(n);
        ::close(fd);
    }
    return total;
}

// A cls dataset of `records` grey 112x112 records (64 images listed again and again), in shards of
// 16 MiB, under dir/data/ds.
std::string make_grey_dataset(const temp_dir& dir, std::size_t records) {
    const std::string src = dir / "src";
    make_samples(src, {"--task", "cls", "--count", "64", "--width", "112", "--height", "112", "--seed", "7"});
    const std::string text = read_file(src + "/list.csv");
    std::vector<std::string> rows;
    for (std::size_t a = 0, b; a < text.size(); a = b + 1) {
        b = text.find('\n', a);
        if (b == std::string::npos) b = text.size();
        if (b > a) rows.push_back(text.substr(a, b - a));
    }
    REQUIRE(rows.size() > 1);
    std::string csv = rows[0] + "\n";
    for (std::size_t i = 0; i < records; ++i) csv += rows[1 + i % (rows.size() - 1)] + "\n";
    write_file(src + "/cold.csv", csv);
    const std::string out = dir / "data/ds";
    fs::create_directories(dir / "data");
    const auto r = cli({"-q", "build", "--csv", src + "/cold.csv", "--out", out, "--color", "gray", "--size", "112x112", "--shard-size", "16MiB"});
    INFO(r.err);
    REQUIRE(r.code == 0);
    return out;
}

}  // namespace

TEST_CASE("slowfs counts a seek per file read in order and about one per record read shuffled", "[cold][slowfs]") {
    const std::string why = slowfs_unusable();
    if (!why.empty()) SHARDPACK_SKIP(why);
#ifdef SHARDPACK_SLOWFS
    temp_dir dir("coldfs");
    const std::string ds_dir = make_grey_dataset(dir, 2000);
    slowfs_mount mount(dir / "data", dir / "mnt", dir / "slowfs.log");
    const std::string ra = mount.set_read_ahead_kb(128);
    if (!ra.empty()) SHARDPACK_SKIP(ra);
    const std::string mnt_ds = dir / "mnt/ds";
    std::size_t files = 0;
    for (const auto& e : fs::directory_iterator(mnt_ds)) files += e.is_regular_file();

    evict(mnt_ds);
    const auto c0 = mount.counts();
    const std::uint64_t bytes = read_in_order(mnt_ds);
    const auto c1 = mount.counts();
    INFO("in order: " << c1.reads - c0.reads << " reads, " << c1.seeks - c0.seeks << " seeks, " << files << " files");
    CHECK(std::uint64_t(c1.bytes - c0.bytes) == bytes);
    // A seek a file, and a few more where the kernel's read-ahead and the read it follows reach
    // slowfs's threads out of order.
    CHECK(c1.seeks - c0.seeks <= static_cast<long long>(files) + (c1.reads - c0.reads) / 10);

    // 150 records in a shuffled order, read with pread (the reader's own reads, no map).
    evict(mnt_ds);
    open_options o;
    o.io = io_mode::pread;
    const auto ds = dataset::open(mnt_ds, o);
    const auto order = permutation(ds.size(), 1, 0);
    const auto c2 = mount.counts();
    read_context ctx;
    for (std::size_t k = 0; k < 150; ++k) (void)ds.read(static_cast<std::size_t>(order[k]), ctx);
    const auto c3 = mount.counts();
    INFO("shuffled: " << c3.reads - c2.reads << " reads, " << c3.seeks - c2.seeks << " seeks for 150 records");
    CHECK(c3.seeks - c2.seeks >= 120);
#endif
}

TEST_CASE("cold_epoch_slowfs: the C++ reader's defaults read a cold epoch at a third of the floor or better "
          "(hard-disk model, 128 KiB read-ahead)", "[cold][slowfs]") {
    const std::string why = slowfs_unusable();
    if (!why.empty()) SHARDPACK_SKIP(why);
#ifdef SHARDPACK_SLOWFS
    constexpr double bound = 1.0 / 3.0;  // the issue's target is 0.5x for the Loader; CI machines are noisy
    temp_dir dir("coldep");
    const std::string ds_dir = make_grey_dataset(dir, 5000);
    slowfs_mount mount(dir / "data", dir / "mnt", dir / "slowfs.log");
    const std::string mnt_ds = dir / "mnt/ds";
    const std::string ra = mount.set_read_ahead_kb(128);
    if (!ra.empty()) SHARDPACK_SKIP(ra);

    // The floor, read twice: the faster counts (the first may also pay the source's own disk).
    double floor_s = 1e9;
    long long floor_seeks = 0;
    for (int rep = 0; rep < 2; ++rep) {
        evict(mnt_ds);
        const auto c0 = mount.counts();
        const auto t0 = clock_type::now();
        read_in_order(mnt_ds);
        const double s = seconds_since(t0);
        if (s < floor_s) {
            floor_s = s;
            floor_seeks = mount.counts().seeks - c0.seeks;
        }
    }

    // One epoch with the defaults. Once past the bound (and a second of grace for a loaded
    // machine), it stops: the figures are then of the records read so far.
    evict(mnt_ds);
    const auto c0 = mount.counts();
    // A sanitized build (scripts/test.sh's ASan run) is CPU-bound here: its rate says nothing
    // about the I/O, so it reads the whole epoch and checks only what does not depend on time.
    const bool timed = shardpack::test::sanitizer_factor == 1;
    const double give_up = timed ? floor_s / bound + 1.0 : 600.0;
    const auto t0 = clock_type::now();
    const auto ds = dataset::open(mnt_ds);
    const std::size_t n = ds.size();
    const bool blocks = prefers_blocks(ds);
    order_options oo;
    if (blocks) {
        oo.kind = order_kind::blocks;
        oo.shard_starts = shard_starts_of(ds);
        oo.block = std::max<std::size_t>(1, std::size_t((4ull << 20) * n / std::max<std::uint64_t>(1, shard_bytes_total(ds))));
    }
    const auto order = epoch_order(n, 0, 0, 0, 1, false, oo);
    std::vector<std::size_t> idx(order.begin(), order.end());
    const auto block_starts = order_blocks(n, oo.block, oo.shard_starts);
    block_read_ahead ahead(order, block_starts, records_per_window(block_starts, oo.window));
    const std::size_t batch = 512;
    const auto info = ds.schema();
    std::vector<std::uint8_t> images(batch * info.fixed_height * info.fixed_width * info.channels),
        labels(batch * info.class_count);
    sample_buffers out;
    out.image_u8 = images.data();
    out.image_capacity = images.size();
    out.label_u8 = labels.data();
    out.label_capacity = labels.size();
    read_context ctx;
    std::size_t done = 0;
    for (std::size_t p = 0; p < n && seconds_since(t0) < give_up; p += batch) {
        if (blocks) {
            const auto& r = ahead.before(p);
            if (!r.empty()) ds.prefetch(r.data(), r.size());
        }
        const std::size_t count = std::min(batch, n - p);
        ds.read_batch(idx.data() + p, count, out, ctx);
        done += count;
    }
    const double epoch_s = seconds_since(t0);
    const auto c1 = mount.counts();
    // The whole epoch's time at the rate reached (the same figure when it finished).
    const double projected_s = epoch_s * double(n) / double(std::max<std::size_t>(1, done));
    const double ratio = floor_s / projected_s;
    const long long seeks = c1.seeks - c0.seeks;
    std::ostringstream figures;
    figures << "floor " << floor_s << " s (" << floor_seeks << " seeks); defaults (" << (blocks ? "blocks" : "global")
            << " order" << (engine_available ? "" : ", no I/O engine in this reader") << "): " << done << " of " << n
            << " records in " << epoch_s << " s, " << seeks << " seeks: " << ratio << "x the floor (bound " << bound << "x)";
    std::cout << "cold_epoch_slowfs: " << figures.str() << std::endl;
    const bool pass = done == n && ratio >= bound;
    const char* strict = std::getenv("SHARDPACK_COLD_STRICT");
    if (!pass && !engine_available && !(strict && std::string(strict) == "1"))
        SHARDPACK_SKIP("expected failure until the reader's I/O engine lands (issue 29): " << figures.str());
    INFO(figures.str());
    CHECK(done == n);
    if (timed) CHECK(ratio >= bound);
    // A seek per ~4 MiB block at most, and a few per file: never one per record.
    CHECK(seeks <= std::max<long long>(64, static_cast<long long>(n / 16)));
#endif
}
