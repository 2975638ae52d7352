// libcurl, loaded when remote storage is first used (push, s3:// reads), not when a process
// starts: linked directly, libcurl and the 27 libraries it needs (TLS, Kerberos, LDAP, SSH,
// HTTP/2, ...) cost every shardpack command about 5 ms of CPU at start-up (`--version`: 7.4 ms
// linked, 2.2 not) and every `import shardpack` about 4, also the ones that never touch object
// storage (issue #22). s3_client.cpp calls
// libcurl only through this table; <curl/curl.h> still gives it the types and constants.
//
// The library is the one the build found (its soname, SHARDPACK_LIBCURL_SONAME, read from the
// library file at configure time: cmake/libcurl_soname.cmake), opened with dlopen once per
// process and, once loaded, never closed.
#pragma once
#include <curl/curl.h>

#include <string>

namespace shardpack::remote {

struct curl_functions {
    decltype(&::curl_global_init) global_init = nullptr;
    decltype(&::curl_easy_init) easy_init = nullptr;
    decltype(&::curl_easy_setopt) easy_setopt = nullptr;
    decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
    decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
    decltype(&::curl_easy_strerror) easy_strerror = nullptr;
    decltype(&::curl_slist_append) slist_append = nullptr;
    decltype(&::curl_slist_free_all) slist_free_all = nullptr;
    decltype(&::curl_multi_init) multi_init = nullptr;
    decltype(&::curl_multi_setopt) multi_setopt = nullptr;
    decltype(&::curl_multi_add_handle) multi_add_handle = nullptr;
    decltype(&::curl_multi_remove_handle) multi_remove_handle = nullptr;
    decltype(&::curl_multi_perform) multi_perform = nullptr;
    decltype(&::curl_multi_info_read) multi_info_read = nullptr;
    decltype(&::curl_multi_poll) multi_poll = nullptr;
    decltype(&::curl_multi_wakeup) multi_wakeup = nullptr;
    decltype(&::curl_multi_cleanup) multi_cleanup = nullptr;
    decltype(&::curl_share_init) share_init = nullptr;
    decltype(&::curl_share_setopt) share_setopt = nullptr;
    decltype(&::curl_share_cleanup) share_cleanup = nullptr;
};

// The soname the build found ("libcurl.so.4").
const char* libcurl_soname();

// libcurl's functions, curl_global_init done: loaded on the first call (thread-safe), the same
// table after. Throws shardpack::error naming the library and dlerror()'s reason when it cannot be
// opened or lacks a function (every later call throws the same).
const curl_functions& curl_library();

// Opens `soname` and looks up every function, without keeping it for curl_library() and without
// curl_global_init: what curl_library() does, for a test of its failures. Throws as above.
curl_functions load_curl_functions(const char* soname);

}  // namespace shardpack::remote
