// Standard input read as a stream of bytes, whatever it is (a pipe is the point): the sample
// stream of `shardpack build --samples -` (pipeline/sample_stream.hpp), which the Python writer
// feeds. No file is opened here.
#pragma once
#include <cstddef>

namespace shardpack {

class input_stream {
public:
    // Up to n bytes into buf, retrying short reads and EINTR; fewer only at the end of the
    // stream. Throws input_error "standard input: reason" on a read error.
    std::size_t read(void* buf, std::size_t n);
};

}  // namespace shardpack
