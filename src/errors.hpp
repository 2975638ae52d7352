// Error types of the packer. Every message is meant for a person: it names the file, the CSV
// line where there is one, and the reason.
#pragma once
#include <stdexcept>
#include <string>

namespace shardpack {

// Bad input data: a file that cannot be decoded, a CSV line that cannot be parsed, a color
// that is not in the class dictionary. The CLI exits 1 on it.
struct input_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A decoder's complaint about one file's bytes. The caller adds the file name and CSV line.
struct decode_error : input_error {
    using input_error::input_error;
};

// An I/O failure on the output side (ENOSPC, EIO, read-only folder). The CLI exits 1 on it.
struct io_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Bad options or option combinations. The CLI exits 2 on it.
struct usage_error : std::runtime_error {
    using std::runtime_error::runtime_error;
};

}  // namespace shardpack
