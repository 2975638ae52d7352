// Pipeline stage 2 (parallel): reads a sample's image and mask files into memory.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dataset/input_fingerprints.hpp"
#include "decode/sniff.hpp"
#include "pipeline/sample_job.hpp"

namespace shardpack {

// Reads a whole image file into `out` (reusing its capacity) and fills `stamp` (size, mtime,
// hash). Returns an empty string or the reason. The file is opened without blocking and must be
// a regular file; its first bytes must be a PNG or JPEG signature (anything else is refused with
// the decoder's message before the rest is read) and it must be at most max_bytes long.
// note_as_input: remember it (io/input_file.hpp), so no write of this process replaces it.
// format: set to what the first bytes say (PNG or JPEG), which later steps take from here
// instead of sniffing the bytes again.
std::string read_file_into(const std::string& path, std::vector<std::uint8_t>& out, file_stamp* stamp = nullptr,
                           std::uint64_t max_bytes = UINT64_MAX, bool note_as_input = false, file_format* format = nullptr);

class previous_build;

// Also decides whether a row is unchanged since the previous build: same size and mtime (no
// read at all), or same content hash (read, but not decoded). Such a row's record is taken
// back, after its checksum is checked.
class file_loader {
public:
    // max_row_bytes: the memory one row may take (memory_plan::per_row); its files together
    // must fit in it.
    explicit file_loader(const previous_build* previous = nullptr, std::uint64_t max_row_bytes = UINT64_MAX)
        : previous_(previous), max_row_bytes_(max_row_bytes) {}
    void operator()(sample_job& job) const;

private:
    const previous_build* previous_;
    std::uint64_t max_row_bytes_;
}; 

}  // namespace shardpack
