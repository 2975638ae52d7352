#include "pipeline/library_versions.hpp"

#include <png.h>
#include <zstd.h>

#include <cstdio>
// jpeglib.h needs FILE and size_t declared first.
#include <jpeglib.h>
#include <oneapi/tbb/version.h>

#define SHARDPACK_STRINGIFY_(x) #x
#define SHARDPACK_STRINGIFY(x) SHARDPACK_STRINGIFY_(x)

namespace shardpack {

detail::json library_versions() {
    detail::json v = detail::json::object();
    v.set("zstd", ZSTD_versionString());
    v.set("libpng", png_get_libpng_ver(nullptr));
#ifdef LIBJPEG_TURBO_VERSION
    v.set("libjpeg-turbo", SHARDPACK_STRINGIFY(LIBJPEG_TURBO_VERSION));
#endif
    v.set("onetbb", TBB_runtime_version());
    return v;
}

}  // namespace shardpack
