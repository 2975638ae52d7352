/* LD_PRELOAD shim that makes the files under one folder behave like a cold mechanical disk,
 * reproducibly, whatever the machine's real storage: used by the cold-storage benchmark
 * (scripts/bench.sh --cold) and its tests (tests/test_slow_disk.cpp).
 *
 * The model: one disk head and a page cache that starts empty.
 * - Every read of a file under SHARDPACK_SLOW_DISK_PATH is split into 4 KiB pages. Pages read
 *   before (the page cache) cost nothing. Each run of consecutive pages not yet read costs
 *   its bytes at SHARDPACK_SLOW_DISK_MBPS (default 150, MB/s = 10^6 bytes/s), plus a seek of
 *   SHARDPACK_SLOW_DISK_SEEK_MS (default 8) unless it starts at the page where the previous
 *   disk read ended, in the same file. No read-ahead is modelled: the disk reads what is asked.
 * - The cost is charged by sleeping until the disk is free again, while holding one lock: the
 *   disk serves one request at a time, so threads reading in parallel queue as they do on one
 *   spindle, and time the caller spends between reads is not given back.
 * - Calls seen: read, pread, pread64, readv, preadv, preadv64, fread (stdio: numpy's fromfile,
 *   which np.load uses), posix_fadvise(POSIX_FADV_WILLNEED) and readahead(2) (a read ahead is
 *   charged at once, as a read: the model has no queue to overlap it with), and
 *   posix_fadvise(POSIX_FADV_DONTNEED), which forgets the file's pages (an eviction); opens
 *   (open, openat and their 64 forms), dup, dup2, dup3, fcntl and fcntl64 (F_DUPFD*) and close keep the
 *   table of which descriptors are files under the folder.
 * - NOT seen: page faults of memory maps (mmap). A reader that maps the files reads them for
 *   free here; the shim counts such mappings ("mmaps" in the statistics) so that a benchmark
 *   can refuse to report them. Nor io_uring, nor reads by the kernel for sendfile or splice.
 * The files' real bytes are read as usual (from the real page cache when they are hot), so the
 * charged time comes on top of the real reads.
 *
 * Statistics: shardpack_slow_disk_stats(long long out[6]) (find it with dlsym(RTLD_DEFAULT)
 * or ctypes.CDLL(None)): reads seen, seeks charged, bytes charged, microseconds charged, mmaps
 * of files under the folder, pages cached. shardpack_slow_disk_reset() zeroes them and empties
 * the page cache of the model. At exit, when SHARDPACK_SLOW_DISK_STATS names a file, one JSON
 * line with them is appended to it.
 *
 * Without SHARDPACK_SLOW_DISK_PATH the shim charges nothing. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096ull
#define MAX_FDS 65536

struct tracked_file {
    dev_t dev;
    ino_t ino;
    uint64_t pages;
    unsigned char* cached; /* one bit per page */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char folder[PATH_MAX];
static size_t folder_length;
static double seek_s = 0.008, bytes_per_s = 150e6;
static int configured;
static struct tracked_file* files;
static size_t file_count, file_capacity;
static int fd_file[MAX_FDS]; /* index + 1 into files, 0 = not tracked */
static long long head_file = -1;
static uint64_t head_page;
static long long stat_reads, stat_seeks, stat_bytes, stat_us, stat_mmaps;

static void configure(void) {
    /* Called with the lock held. */
    if (configured) return;
    configured = 1;
    const char* p = getenv("SHARDPACK_SLOW_DISK_PATH");
    if (p && *p && realpath(p, folder)) {
        folder_length = strlen(folder);
        while (folder_length > 1 && folder[folder_length - 1] == '/') folder[--folder_length] = 0;
    } else {
        folder_length = 0;
    }
    const char* s = getenv("SHARDPACK_SLOW_DISK_SEEK_MS");
    if (s) seek_s = atof(s) / 1000.0;
    s = getenv("SHARDPACK_SLOW_DISK_MBPS");
    if (s && atof(s) > 0) bytes_per_s = atof(s) * 1e6;
}

/* The disk is busy until this time (CLOCK_MONOTONIC, ns): a request starts when it is free. */
static int64_t disk_free_ns;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Waits until the disk has served a request costing `seconds`. Sleeps shorter than 1 ms are
 * carried to the next request instead (a sleep costs ~60 us of timer slack, which would
 * inflate thousands of small transfers); so a caller may get its data up to 1 ms early, never
 * more in total. */
static void charge(double seconds) {
    if (seconds <= 0) return;
    stat_us += (long long)(seconds * 1e6 + 0.5);
    const int64_t now = now_ns();
    if (disk_free_ns < now) disk_free_ns = now;
    disk_free_ns += (int64_t)(seconds * 1e9);
    if (disk_free_ns - now < 1000000) return;
    struct timespec until;
    until.tv_sec = (time_t)(disk_free_ns / 1000000000);
    until.tv_nsec = (long)(disk_free_ns % 1000000000);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) != 0) {
    }
}

/* A file under the folder just opened as fd: track it. */
static void track(int fd) {
    if (fd < 0 || fd >= MAX_FDS) return;
    pthread_mutex_lock(&lock);
    configure();
    fd_file[fd] = 0;
    if (folder_length == 0) goto out;
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, path, sizeof path - 1);
    if (n <= 0) goto out;
    path[n] = 0;
    if (strncmp(path, folder, folder_length) != 0 || (path[folder_length] != '/' && path[folder_length] != 0)) goto out;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) goto out;
    for (size_t k = 0; k < file_count; ++k)
        if (files[k].dev == st.st_dev && files[k].ino == st.st_ino) {
            const uint64_t pages = ((uint64_t)st.st_size + PAGE - 1) / PAGE;
            if (pages > files[k].pages) { /* the file grew: room for its new pages */
                unsigned char* more = realloc(files[k].cached, (size_t)(pages + 7) / 8);
                if (!more) goto out;
                memset(more + (files[k].pages + 7) / 8, 0, (size_t)((pages + 7) / 8 - (files[k].pages + 7) / 8));
                files[k].cached = more;
                files[k].pages = pages;
            }
            fd_file[fd] = (int)k + 1;
            goto out;
        }
    if (file_count == file_capacity) {
        const size_t capacity = file_capacity ? 2 * file_capacity : 64;
        struct tracked_file* more = realloc(files, capacity * sizeof *files);
        if (!more) goto out;
        files = more;
        file_capacity = capacity;
    }
    struct tracked_file* f = &files[file_count];
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->pages = ((uint64_t)st.st_size + PAGE - 1) / PAGE;
    f->cached = calloc((size_t)(f->pages + 7) / 8 + 1, 1);
    if (!f->cached) goto out;
    fd_file[fd] = (int)++file_count;
out:
    pthread_mutex_unlock(&lock);
}

static int tracked(int fd) { return fd >= 0 && fd < MAX_FDS && fd_file[fd] != 0; }

/* Charges a read of [offset, offset + length) of fd's file. */
static void disk_read(int fd, uint64_t offset, uint64_t length) {
    if (!tracked(fd) || length == 0) return;
    pthread_mutex_lock(&lock);
    const long long k = fd_file[fd] - 1;
    if (k < 0) {
        pthread_mutex_unlock(&lock);
        return;
    }
    struct tracked_file* f = &files[k];
    ++stat_reads;
    uint64_t first = offset / PAGE, end = (offset + length + PAGE - 1) / PAGE;
    if (end > f->pages) end = f->pages;
    double seconds = 0;
    uint64_t p = first;
    while (p < end) {
        if (f->cached[p / 8] & (1u << (p % 8))) {
            ++p;
            continue;
        }
        const uint64_t run = p;
        while (p < end && !(f->cached[p / 8] & (1u << (p % 8)))) {
            f->cached[p / 8] |= (unsigned char)(1u << (p % 8));
            ++p;
        }
        if (head_file != k || head_page != run) {
            seconds += seek_s;
            ++stat_seeks;
        }
        seconds += (double)((p - run) * PAGE) / bytes_per_s;
        stat_bytes += (long long)((p - run) * PAGE);
        head_file = k;
        head_page = p;
    }
    charge(seconds); /* with the lock held: one request at a time */
    pthread_mutex_unlock(&lock);
}

static void forget(int fd, uint64_t offset, uint64_t length) {
    if (!tracked(fd)) return;
    pthread_mutex_lock(&lock);
    struct tracked_file* f = &files[fd_file[fd] - 1];
    const uint64_t first = offset / PAGE;
    uint64_t end = length == 0 ? f->pages : (offset + length) / PAGE;
    if (end > f->pages) end = f->pages;
    for (uint64_t p = first; p < end; ++p) f->cached[p / 8] &= (unsigned char)~(1u << (p % 8));
    pthread_mutex_unlock(&lock);
}

static uint64_t position(int fd) {
    const off_t at = lseek(fd, 0, SEEK_CUR);
    return at < 0 ? 0 : (uint64_t)at;
}

#define REAL(name)                     \
    static __typeof__(&name) real_##name; \
    if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

#define FORWARD_OPEN(name)                                                   \
    int name(const char* path, int flags, ...) {                             \
        REAL(name);                          \
        mode_t mode = 0;                                                     \
        if (flags & (O_CREAT | O_TMPFILE)) {                                 \
            va_list ap;                                                      \
            va_start(ap, flags);                                             \
            mode = va_arg(ap, mode_t);                                       \
            va_end(ap);                                                      \
        }                                                                    \
        const int fd = real_##name(path, flags, mode);                       \
        track(fd);                                                           \
        return fd;                                                           \
    }
#define FORWARD_OPENAT(name)                                                 \
    int name(int dir, const char* path, int flags, ...) {                    \
        REAL(name);                     \
        mode_t mode = 0;                                                     \
        if (flags & (O_CREAT | O_TMPFILE)) {                                 \
            va_list ap;                                                      \
            va_start(ap, flags);                                             \
            mode = va_arg(ap, mode_t);                                       \
            va_end(ap);                                                      \
        }                                                                    \
        const int fd = real_##name(dir, path, flags, mode);                  \
        track(fd);                                                           \
        return fd;                                                           \
    }
FORWARD_OPEN(open)
FORWARD_OPEN(open64)
FORWARD_OPENAT(openat)
FORWARD_OPENAT(openat64)

/* A duplicate of a tracked descriptor reads the same file (numpy's fromfile reads a dup). */
static void copy_tracking(int from, int to) {
    if (to < 0 || to >= MAX_FDS) return;
    fd_file[to] = from >= 0 && from < MAX_FDS ? fd_file[from] : 0;
}

int dup(int fd) {
    REAL(dup);
    const int copy = real_dup(fd);
    copy_tracking(fd, copy);
    return copy;
}

int dup2(int fd, int to) {
    REAL(dup2);
    const int copy = real_dup2(fd, to);
    if (copy >= 0) copy_tracking(fd, copy);
    return copy;
}

int dup3(int fd, int to, int flags) {
    REAL(dup3);
    const int copy = real_dup3(fd, to, flags);
    if (copy >= 0) copy_tracking(fd, copy);
    return copy;
}

int fcntl(int fd, int command, ...) {
    REAL(fcntl);
    va_list ap;
    va_start(ap, command);
    void* argument = va_arg(ap, void*); /* an int or a pointer: passed on as it came */
    va_end(ap);
    const int r = real_fcntl(fd, command, argument);
    if ((command == F_DUPFD || command == F_DUPFD_CLOEXEC) && r >= 0) copy_tracking(fd, r);
    return r;
}

int fcntl64(int fd, int command, ...) {
    REAL(fcntl64);
    va_list ap;
    va_start(ap, command);
    void* argument = va_arg(ap, void*);
    va_end(ap);
    const int r = real_fcntl64(fd, command, argument);
    if ((command == F_DUPFD || command == F_DUPFD_CLOEXEC) && r >= 0) copy_tracking(fd, r);
    return r;
}

int close(int fd) {
    REAL(close);
    if (fd >= 0 && fd < MAX_FDS) fd_file[fd] = 0;
    return real_close(fd);
}

ssize_t read(int fd, void* buffer, size_t count) {
    REAL(read);
    if (tracked(fd)) disk_read(fd, position(fd), count);
    return real_read(fd, buffer, count);
}

ssize_t pread(int fd, void* buffer, size_t count, off_t offset) {
    REAL(pread);
    disk_read(fd, (uint64_t)offset, count);
    return real_pread(fd, buffer, count, offset);
}

ssize_t pread64(int fd, void* buffer, size_t count, off_t offset) {
    REAL(pread64);
    disk_read(fd, (uint64_t)offset, count);
    return real_pread64(fd, buffer, count, offset);
}

static uint64_t total(const struct iovec* iov, int count) {
    uint64_t n = 0;
    for (int k = 0; k < count; ++k) n += iov[k].iov_len;
    return n;
}

ssize_t readv(int fd, const struct iovec* iov, int count) {
    REAL(readv);
    if (tracked(fd)) disk_read(fd, position(fd), total(iov, count));
    return real_readv(fd, iov, count);
}

ssize_t preadv(int fd, const struct iovec* iov, int count, off_t offset) {
    REAL(preadv);
    disk_read(fd, (uint64_t)offset, total(iov, count));
    return real_preadv(fd, iov, count, offset);
}

ssize_t preadv64(int fd, const struct iovec* iov, int count, off_t offset) {
    REAL(preadv64);
    disk_read(fd, (uint64_t)offset, total(iov, count));
    return real_preadv64(fd, iov, count, offset);
}

size_t fread(void* buffer, size_t size, size_t count, FILE* stream) {
    REAL(fread);
    const int fd = stream ? fileno(stream) : -1;
    if (tracked(fd)) {
        const off_t at = ftello(stream);
        disk_read(fd, at < 0 ? 0 : (uint64_t)at, (uint64_t)size * count);
    }
    return real_fread(buffer, size, count, stream);
}

static void advise(int fd, off_t offset, off_t length, int advice) {
    if (!tracked(fd)) return;
    if (advice == POSIX_FADV_WILLNEED) {
        uint64_t n = (uint64_t)length;
        if (n == 0) {
            struct stat st;
            n = fstat(fd, &st) == 0 && st.st_size > offset ? (uint64_t)(st.st_size - offset) : 0;
        }
        disk_read(fd, (uint64_t)offset, n);
    } else if (advice == POSIX_FADV_DONTNEED) {
        forget(fd, (uint64_t)offset, (uint64_t)length);
    }
}

int posix_fadvise(int fd, off_t offset, off_t length, int advice) {
    REAL(posix_fadvise);
    advise(fd, offset, length, advice);
    return real_posix_fadvise(fd, offset, length, advice);
}

int posix_fadvise64(int fd, off_t offset, off_t length, int advice) {
    REAL(posix_fadvise64);
    advise(fd, offset, length, advice);
    return real_posix_fadvise64(fd, offset, length, advice);
}

ssize_t readahead(int fd, off64_t offset, size_t count) {
    REAL(readahead);
    disk_read(fd, (uint64_t)offset, count);
    return real_readahead(fd, offset, count);
}

void* mmap(void* address, size_t length, int protection, int flags, int fd, off_t offset) {
    REAL(mmap);
    if (tracked(fd)) __atomic_add_fetch(&stat_mmaps, 1, __ATOMIC_RELAXED);
    return real_mmap(address, length, protection, flags, fd, offset);
}

void* mmap64(void* address, size_t length, int protection, int flags, int fd, off_t offset) {
    REAL(mmap64);
    if (tracked(fd)) __atomic_add_fetch(&stat_mmaps, 1, __ATOMIC_RELAXED);
    return real_mmap64(address, length, protection, flags, fd, offset);
}

void shardpack_slow_disk_stats(long long out[6]) {
    pthread_mutex_lock(&lock);
    long long cached = 0;
    for (size_t k = 0; k < file_count; ++k)
        for (uint64_t p = 0; p < files[k].pages; ++p) cached += (files[k].cached[p / 8] >> (p % 8)) & 1;
    out[0] = stat_reads;
    out[1] = stat_seeks;
    out[2] = stat_bytes;
    out[3] = stat_us;
    out[4] = stat_mmaps;
    out[5] = cached;
    pthread_mutex_unlock(&lock);
}

void shardpack_slow_disk_reset(void) {
    pthread_mutex_lock(&lock);
    stat_reads = stat_seeks = stat_bytes = stat_us = stat_mmaps = 0;
    for (size_t k = 0; k < file_count; ++k) memset(files[k].cached, 0, (size_t)(files[k].pages + 7) / 8);
    head_file = -1;
    pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void write_stats(void) {
    const char* path = getenv("SHARDPACK_SLOW_DISK_STATS");
    if (!path || !*path) return;
    long long s[6];
    shardpack_slow_disk_stats(s);
    FILE* out = fopen(path, "a");
    if (!out) return;
    fprintf(out,
            "{\"pid\": %ld, \"reads\": %lld, \"seeks\": %lld, \"bytes\": %lld, \"charged_us\": %lld, \"mmaps\": %lld, "
            "\"cached_pages\": %lld}\n",
            (long)getpid(), s[0], s[1], s[2], s[3], s[4], s[5]);
    fclose(out);
}
