// Pipeline stage 2 (parallel): reads a sample's image and mask files into memory.
#pragma once
#include <string>
#include <vector>

#include "format/input_fingerprints.hpp"
#include "pipeline/sample_job.hpp"

namespace shardpack {

// Reads a whole file into `out` (reusing its capacity) and fills `stamp` (size, mtime, hash).
// Returns an empty string or the reason.
std::string read_file_into(const std::string& path, std::vector<std::uint8_t>& out, file_stamp* stamp = nullptr);

class previous_build;

// Also decides whether a row is unchanged since the previous build: same size and mtime (no
// read at all), or same content hash (read, but not decoded). Such a row's record is taken
// back, after its checksum is checked.
class file_loader {
public:
    explicit file_loader(const previous_build* previous = nullptr) : previous_(previous) {}
    void operator()(sample_job& job) const;

private:
    const previous_build* previous_;
}; 

}  // namespace shardpack
