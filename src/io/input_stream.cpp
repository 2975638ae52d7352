#include "io/input_stream.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "errors.hpp"

namespace shardpack {

std::size_t input_stream::read(void* buf, std::size_t n) {
    auto* p = static_cast<unsigned char*>(buf);
    std::size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(STDIN_FILENO, p + got, n - got);
        if (r == 0) break;
        if (r < 0) {
            if (errno == EINTR) continue;
            throw input_error(std::string("standard input: read error: ") + std::strerror(errno));
        }
        got += static_cast<std::size_t>(r);
    }
    return got;
}

}  // namespace shardpack
