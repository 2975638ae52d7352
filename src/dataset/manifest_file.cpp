#include "dataset/manifest_file.hpp"

#include "shardpack/reader.hpp"

namespace shardpack {

detail::json read_manifest(const output_folder& folder) {
    return detail::json::parse(folder.read_own(manifest_file_name, detail::manifest_max_bytes), detail::manifest_max_values);
}

std::optional<detail::json> read_manifest_if_present(const output_folder& folder) {
    const auto text = folder.read_own_if_present(manifest_file_name, detail::manifest_max_bytes);
    if (!text) return std::nullopt;
    return detail::json::parse(*text, detail::manifest_max_values);
}

}  // namespace shardpack
