// The packer's one reader of a dataset folder's manifest.json (the output folder's ownership,
// the class-id warning of a rebuild, a merge's parts, the local dataset that push uploads):
// read as one of the folder's own files (regular, never through a link, without blocking)
// and parsed within the bounds the reader (dataset::open) keeps, so no command accepts a
// manifest that the reader would refuse for its size and none parses one without a bound.
#pragma once
#include <optional>
#include <string>

#include "io/output_folder.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack {

// Throws input_error "cannot read DIR/manifest.json: reason" when it is missing, a link, not a
// regular file or over detail::manifest_max_bytes, and the JSON parser's error (its message says
// where) for text that is not JSON or holds more than detail::manifest_max_values values.
detail::json read_manifest(const output_folder& folder);

// The same, but nothing when the folder holds no manifest.json.
std::optional<detail::json> read_manifest_if_present(const output_folder& folder);

// The two steps of read_manifest, for a command that needs the file's exact bytes as well
// (push uploads them, and compares them before and after its verify): the text, read as
// read_manifest reads it, and its parse within the reader's bounds.
std::string read_manifest_text(const output_folder& folder);
detail::json parse_manifest(const std::string& text);

}  // namespace shardpack
