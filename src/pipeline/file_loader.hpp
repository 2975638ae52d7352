// Pipeline stage 2 (parallel): reads a sample's image and mask files into memory.
#pragma once
#include <string>
#include <vector>

#include "pipeline/sample_job.hpp"

namespace shardpack {

// Reads a whole file into `out` (reusing its capacity). Returns an empty string or the reason.
std::string read_file_into(const std::string& path, std::vector<std::uint8_t>& out);

class file_loader {
public:
    void operator()(sample_job& job) const;
};

}  // namespace shardpack
