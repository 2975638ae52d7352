// shardpack::error, the one exception type the reader throws.
#pragma once
#include <stdexcept>
#include <string>

namespace shardpack {

// Thrown for every failure of the reader: a missing or unreadable file, a damaged or
// unsupported shard, a bad argument. what() names the dataset, shard and record where known.
class error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

}  // namespace shardpack
