/* LD_PRELOAD shim that makes a reader slow, as on a network file system: every open of a file
 * whose name ends in ".spk" (a shard) first sleeps SHARDPACK_SLOW_OPEN_US microseconds. Used to
 * widen the moment between a reader's reading manifest.json and its opening the shards it names,
 * where a rebuild publishing meanwhile could remove them. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void maybe_wait(const char* path) {
    const size_t n = path ? strlen(path) : 0;
    if (n < 4 || strcmp(path + n - 4, ".spk") != 0) return;
    const char* s = getenv("SHARDPACK_SLOW_OPEN_US");
    if (s) usleep((useconds_t)atol(s));
}

#define FORWARD_OPEN(name)                                                           \
    int name(const char* path, int flags, ...) {                                     \
        static int (*real)(const char*, int, ...);                                   \
        if (!real) real = (int (*)(const char*, int, ...))dlsym(RTLD_NEXT, #name);   \
        mode_t mode = 0;                                                             \
        if (flags & (O_CREAT | O_TMPFILE)) {                                         \
            va_list ap;                                                              \
            va_start(ap, flags);                                                     \
            mode = va_arg(ap, mode_t);                                               \
            va_end(ap);                                                              \
        }                                                                            \
        maybe_wait(path);                                                            \
        return real(path, flags, mode);                                              \
    }
#define FORWARD_OPENAT(name)                                                         \
    int name(int dir, const char* path, int flags, ...) {                            \
        static int (*real)(int, const char*, int, ...);                              \
        if (!real) real = (int (*)(int, const char*, int, ...))dlsym(RTLD_NEXT, #name); \
        mode_t mode = 0;                                                             \
        if (flags & (O_CREAT | O_TMPFILE)) {                                         \
            va_list ap;                                                              \
            va_start(ap, flags);                                                     \
            mode = va_arg(ap, mode_t);                                               \
            va_end(ap);                                                              \
        }                                                                            \
        maybe_wait(path);                                                            \
        return real(dir, path, flags, mode);                                         \
    }

FORWARD_OPEN(open)
FORWARD_OPEN(open64)
FORWARD_OPENAT(openat)
FORWARD_OPENAT(openat64)
