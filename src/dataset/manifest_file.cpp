#include "dataset/manifest_file.hpp"

#include "shardpack/reader.hpp"

namespace shardpack {

std::string read_manifest_text(const output_folder& folder) {
    return folder.read_own(manifest_file_name, detail::manifest_max_bytes);
}

detail::json parse_manifest(const std::string& text) { return detail::json::parse(text, detail::manifest_max_values); }

detail::json read_manifest(const output_folder& folder) { return parse_manifest(read_manifest_text(folder)); }

std::optional<detail::json> read_manifest_if_present(const output_folder& folder) {
    const auto text = folder.read_own_if_present(manifest_file_name, detail::manifest_max_bytes);
    if (!text) return std::nullopt;
    return parse_manifest(*text);
}

}  // namespace shardpack
