#include "remote/curl_library.hpp"

#include <dlfcn.h>

#include "shardpack/detail/error.hpp"

#ifndef SHARDPACK_LIBCURL_SONAME
#error "SHARDPACK_LIBCURL_SONAME (the soname of the libcurl found at configure time) is not defined"
#endif

namespace shardpack::remote {

namespace {

std::string dl_reason() {
    const char* why = ::dlerror();
    return why ? why : "no reason given";
}

template <class Function>
void look_up(void* library, const char* soname, const char* name, Function& out) {
    ::dlerror();  // clear an earlier error: a null symbol is not one by itself
    void* address = ::dlsym(library, name);
    if (!address) {
        const std::string why = dl_reason();
        ::dlclose(library);
        throw error(std::string("libcurl: ") + soname + " has no " + name + " (" + why +
                    "): remote storage (push, s3:// URLs) needs libcurl 7.75 or later");
    }
    out = reinterpret_cast<Function>(address);
}

struct loaded_library {
    curl_functions functions;
    std::string failure;  // not empty: why libcurl cannot be used (thrown at every use)

    loaded_library() {
        try {
            functions = load_curl_functions(libcurl_soname());
            const CURLcode code = functions.global_init(CURL_GLOBAL_DEFAULT);
            if (code != CURLE_OK)
                failure = std::string("libcurl: curl_global_init failed: ") + functions.easy_strerror(code);
        } catch (const error& e) {
            failure = e.what();
        }
    }
};

}  // namespace

const char* libcurl_soname() { return SHARDPACK_LIBCURL_SONAME; }

curl_functions load_curl_functions(const char* soname) {
    // RTLD_LOCAL: libcurl's symbols (and its libraries') stay out of the process's namespace.
    // Kept open once loaded: the engine's thread and curl's own state live as long as the process.
    void* library = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!library)
        throw error(std::string("libcurl: cannot load ") + soname + " (" + dl_reason() +
                    "): remote storage (push, s3:// URLs) needs the libcurl this program was built with");
    curl_functions f;
    look_up(library, soname, "curl_global_init", f.global_init);
    look_up(library, soname, "curl_easy_init", f.easy_init);
    look_up(library, soname, "curl_easy_setopt", f.easy_setopt);
    look_up(library, soname, "curl_easy_getinfo", f.easy_getinfo);
    look_up(library, soname, "curl_easy_cleanup", f.easy_cleanup);
    look_up(library, soname, "curl_easy_strerror", f.easy_strerror);
    look_up(library, soname, "curl_slist_append", f.slist_append);
    look_up(library, soname, "curl_slist_free_all", f.slist_free_all);
    look_up(library, soname, "curl_multi_init", f.multi_init);
    look_up(library, soname, "curl_multi_setopt", f.multi_setopt);
    look_up(library, soname, "curl_multi_add_handle", f.multi_add_handle);
    look_up(library, soname, "curl_multi_remove_handle", f.multi_remove_handle);
    look_up(library, soname, "curl_multi_perform", f.multi_perform);
    look_up(library, soname, "curl_multi_info_read", f.multi_info_read);
    look_up(library, soname, "curl_multi_poll", f.multi_poll);
    look_up(library, soname, "curl_multi_wakeup", f.multi_wakeup);
    look_up(library, soname, "curl_multi_cleanup", f.multi_cleanup);
    look_up(library, soname, "curl_share_init", f.share_init);
    look_up(library, soname, "curl_share_setopt", f.share_setopt);
    look_up(library, soname, "curl_share_cleanup", f.share_cleanup);
    return f;
}

const curl_functions& curl_library() {
    static const loaded_library library;  // C++11 statics: initialised once, thread-safe
    if (!library.failure.empty()) throw error(library.failure);
    return library.functions;
}

}  // namespace shardpack::remote
