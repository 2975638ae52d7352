/* LD_PRELOAD shim for the test of libcurl's loading (tests/test_remote.cpp), set by
 * SHARDPACK_NO_LIBCURL:
 *   hide:   every dlopen of a library whose name starts with "libcurl" fails, as on a machine
 *           without libcurl, with dlerror() saying so; every other dlopen goes through;
 *   report: nothing is hidden (the report's own check);
 * and with either, when the process exits, a line on stderr says whether a libcurl was mapped
 * (linked, or opened some other way): "no_libcurl: libcurl was loaded: PATH". A command that
 * never uses remote storage must print none. Unset: the shim does nothing (a test opens it as a
 * library that has none of libcurl's functions). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int refused; /* dlerror() owes the refusal's message */

static const char* base_name(const char* path) {
    const char* slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

void* dlopen(const char* name, int flags) {
    static void* (*real)(const char*, int);
    if (!real) real = (void* (*)(const char*, int))dlsym(RTLD_NEXT, "dlopen");
    const char* mode = getenv("SHARDPACK_NO_LIBCURL");
    if (name && strncmp(base_name(name), "libcurl", 7) == 0 && mode && strcmp(mode, "hide") == 0) {
        refused = 1;
        return NULL;
    }
    return real(name, flags);
}

char* dlerror(void) {
    static char* (*real)(void);
    if (!real) real = (char* (*)(void))dlsym(RTLD_NEXT, "dlerror");
    if (refused) {
        refused = 0;
        return (char*)"no_libcurl: libcurl is hidden by the test";
    }
    return real();
}

static int report_libcurl(struct dl_phdr_info* info, size_t size, void* data) {
    (void)size, (void)data;
    if (info->dlpi_name && strncmp(base_name(info->dlpi_name), "libcurl", 7) == 0)
        fprintf(stderr, "no_libcurl: libcurl was loaded: %s\n", info->dlpi_name);
    return 0;
}

__attribute__((destructor)) static void check_at_exit(void) {
    if (getenv("SHARDPACK_NO_LIBCURL")) dl_iterate_phdr(report_libcurl, NULL);
}
