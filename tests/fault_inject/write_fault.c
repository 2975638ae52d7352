/* LD_PRELOAD shim for I/O failure tests: lets SHARDPACK_FAULT_BUDGET bytes be written to
 * regular files, then fails every further write to a regular file with SHARDPACK_FAULT_ERRNO
 * (default ENOSPC). Writes to terminals, pipes and /dev/null (the logs) pass untouched. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_long budget = -1;

static long remaining(void) {
    long b = atomic_load(&budget);
    if (b == -1) {
        const char* s = getenv("SHARDPACK_FAULT_BUDGET");
        b = s ? atol(s) : (long)1 << 62;
        atomic_store(&budget, b);
    }
    return b;
}

static int is_regular(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
}

static int fault_errno(void) {
    const char* s = getenv("SHARDPACK_FAULT_ERRNO");
    return s ? atoi(s) : ENOSPC;
}

ssize_t write(int fd, const void* buf, size_t count) {
    static ssize_t (*real_write)(int, const void*, size_t);
    if (!real_write) real_write = (ssize_t(*)(int, const void*, size_t))dlsym(RTLD_NEXT, "write");
    if (count > 0 && is_regular(fd)) {
        const long left = remaining();
        if (left <= 0) {
            errno = fault_errno();
            return -1;
        }
        if ((long)count > left) count = (size_t)left; /* a short write, as a filling disk gives */
        atomic_fetch_sub(&budget, (long)count);
    }
    return real_write(fd, buf, count);
}
