// The versions of the libraries that shape a dataset's bytes, for the manifest.
#pragma once
#include "shardpack/detail/json.hpp"

namespace shardpack {
detail::json library_versions();
}
