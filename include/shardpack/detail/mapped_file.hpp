// A read-only memory mapping of a whole file: the mmap byte source of storage.hpp, under the
// name the tools use for a file they hash or copy whole.
#pragma once
#include "storage.hpp"

namespace shardpack::detail {

using mapped_file = mmap_source;

}  // namespace shardpack::detail
