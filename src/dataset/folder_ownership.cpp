#include "dataset/folder_ownership.hpp"

#include <unistd.h>

#include <sys/stat.h>

#include <filesystem>

#include "errors.hpp"
#include "dataset/dataset_names.hpp"
#include "dataset/folder_ledger.hpp"
#include "dataset/manifest_file.hpp"
#include "io/output_folder.hpp"
#include "shardpack/detail/format.hpp"
#include "shardpack/detail/json.hpp"
#include "shardpack/detail/shard_table.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
namespace fs = std::filesystem;

namespace {

std::string list_names(const std::vector<std::string>& names, std::size_t shown = 5) {
    std::string out;
    for (std::size_t i = 0; i < names.size() && i < shown; ++i) out += (i ? ", " : "") + names[i];
    if (names.size() > shown) out += " and " + std::to_string(names.size() - shown) + " more";
    return out;
}

std::string real_path_of(const std::string& path) {
    std::error_code ec;
    const fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
    return ec ? path : p.string();
}

// Whether `inner` is `outer` or lies below it (both canonical).
bool at_or_below(const std::string& inner, const std::string& outer) {
    if (inner == outer) return true;
    const std::string prefix = outer == "/" ? outer : outer + "/";
    return inner.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

std::optional<manifest_summary> read_manifest_summary(const output_folder& folder) {
    if (folder.kind_of(manifest_file_name) != output_folder::kind::file) return std::nullopt;
    manifest_summary s;
    try {
        const detail::json m = read_manifest(folder);
        if (!m.is_object()) return std::nullopt;
        const detail::json* format = m.find("format");
        s.is_shardpack = format && format->is_string() && format->as_string() == "shardpack";
        if (!s.is_shardpack) return s;
        if (const detail::json* v = m.find("format_version"); v && v->is_string()) s.version = v->as_string();
        const auto dot = s.version.find('.');
        if (dot != std::string::npos && dot > 0 && dot + 1 < s.version.size() &&
            s.version.find_first_not_of("0123456789.") == std::string::npos && s.version.find('.', dot + 1) == std::string::npos &&
            dot <= 5 && s.version.size() - dot - 1 <= 5) {
            const unsigned long major = std::stoul(s.version.substr(0, dot));
            const unsigned long minor = std::stoul(s.version.substr(dot + 1));
            s.version_known = major == detail::version_major && minor <= detail::version_minor_fields;
        }
        if (const detail::json* shards = m.find("shards"); shards && shards->is_array()) {
            for (const auto& e : shards->as_array()) {
                const detail::json* file = e.is_object() ? e.find("file") : nullptr;
                if (file && file->is_string() && is_shard_name(file->as_string())) s.shards.push_back(file->as_string());
            }
        }
        // Format 1.2: the shard table file, and the shards it lists (named by number and hash).
        if (const detail::json* t = m.find("shard_table"); t && t->is_object()) {
            const detail::json* file = t->find("file");
            if (file && file->is_string() && is_shard_table_name(file->as_string())) {
                s.shards.push_back(file->as_string());
                if (const auto bytes = folder.read_small(file->as_string(), detail::shard_table_max_bytes)) {
                    try {
                        const auto entries = detail::decode_shard_table(
                            reinterpret_cast<const unsigned char*>(bytes->data()), bytes->size());
                        for (std::size_t k = 0; k < entries.size(); ++k)
                            s.shards.push_back(detail::shard_file_name(k, entries[k].hash));
                    } catch (const std::exception&) {
                        // A damaged table: its shards stay listed only by the ledger.
                    }
                }
            }
        }
    } catch (const std::exception&) {
        return std::nullopt;  // not JSON: not a manifest shardpack can read
    }
    return s;
}

namespace {
void check_claim(output_claim& c, const std::string& dir, bool force, const std::vector<std::string>& inputs, bool force_offered);
}  // namespace

output_claim claim_output_folder(const std::string& given, bool force, const std::vector<std::string>& inputs, bool force_offered) {
    if (given.empty()) throw usage_error("--out: empty path");
    // "DIR/" would resolve a link at DIR: the checks below look at DIR itself.
    std::string dir = given;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    struct stat st {};
    output_claim c;
    if (::lstat(dir.c_str(), &st) == 0) {
        if (S_ISLNK(st.st_mode))
            throw usage_error("--out " + dir + " is a symbolic link; shardpack never writes through links: give the folder it "
                              "points to (" + real_path_of(dir) + ")");
        if (!S_ISDIR(st.st_mode)) throw usage_error("--out " + dir + " exists and is not a folder");
    } else {
        c.created = true;
    }
    c.folder = output_folder::open(dir, true);
    c.real_path = real_path_of(dir);
    try {
        check_claim(c, dir, force, inputs, force_offered);
    } catch (...) {
        // A refusal leaves nothing behind: the folder made for it goes (if still empty).
        if (c.created) {
            c.folder.reset();
            output_folder::remove_if_empty(dir);
        }
        throw;
    }
    return c;
}

namespace {
void check_claim(output_claim& c, const std::string& dir, bool force, const std::vector<std::string>& inputs, bool force_offered) {
    const output_folder& f = *c.folder;
    const std::vector<std::string> names = f.names();

    // The fixed names must be what shardpack makes there: a link, or a folder where a file
    // belongs, is nothing a build would write through or replace.
    std::vector<std::string> links, misplaced, foreign_owned;
    for (const auto& name : names) {
        if (!is_reserved_name(name)) continue;
        const auto k = f.kind_of(name);
        const auto want = name == ".partial" ? output_folder::kind::folder : output_folder::kind::file;
        if (k == output_folder::kind::link) links.push_back(name);
        else if (k != want) misplaced.push_back(name + " (" + f.kind_name(name) + ")");
        // A file a build replaces (manifest, report, ledger...) must be this user's: found here,
        // not after the shards are written.
        else if (const auto owner = f.owner_of(name); k == output_folder::kind::file && name != ".shardpack.lock" && owner &&
                                                     *owner != ::geteuid())
            foreign_owned.push_back(name + " (user " + std::to_string(*owner) + ")");
    }
    if (!foreign_owned.empty())
        throw usage_error(dir + ": " + list_names(foreign_owned, foreign_owned.size()) +
                          (foreign_owned.size() == 1 ? " belongs" : " belong") + " to another user; shardpack replaces only " +
                          "its own files. Run as that user or choose another --out");
    if (!links.empty())
        throw usage_error(dir + ": " + list_names(links, links.size()) + (links.size() == 1 ? " is a symbolic link" : " are symbolic links") +
                          "; shardpack never writes, truncates or removes through a link. Remove " +
                          (links.size() == 1 ? "it" : "them") + " or choose another --out");
    if (!misplaced.empty())
        throw usage_error(dir + ": " + list_names(misplaced, misplaced.size()) +
                          (misplaced.size() == 1 ? " is not" : " are not") +
                          " what shardpack writes there (a regular file; a folder for .partial); not touching it: move it away or "
                          "choose another --out");

    const auto ledger = folder_ledger::load(f);
    const auto manifest = read_manifest_summary(f);
    c.owned_before = ledger.has_value() || (manifest && manifest->is_shardpack);
    if (!c.owned_before) {
        std::vector<std::string> foreign, reserved;
        for (const auto& name : names) {
            // A lock file alone is what a first build leaves when killed before writing anything.
            if (name == ".shardpack.lock" && f.kind_of(name) == output_folder::kind::file) continue;
            foreign.push_back(name);
            if (is_reserved_name(name)) reserved.push_back(name);
        }
        if (!foreign.empty() && !force) {
            std::string inputs_here;
            for (const auto& in : inputs)
                if (!in.empty() && at_or_below(real_path_of(in), c.real_path)) inputs_here += (inputs_here.empty() ? "" : ", ") + in;
            throw usage_error("--out " + dir + " is not empty and holds no shardpack dataset: it holds " + list_names(foreign) +
                              (inputs_here.empty() ? "" : " (inputs among them: " + inputs_here + ")") +
                              ". shardpack writes only into an empty or missing folder, or one it wrote (marked by .shardpack, "
                              "or holding its manifest.json). Choose another --out" +
                              std::string(force_offered ? ", or pass --force to build beside these files (they are never "
                                                          "overwritten or removed)" : ""));
        }
        if (!reserved.empty())
            throw usage_error("--out " + dir + ": " + list_names(reserved, reserved.size()) +
                              (reserved.size() == 1 ? " was" : " were") +
                              " not written by shardpack, and a build would replace " + (reserved.size() == 1 ? "it" : "them") +
                              std::string(force_offered ? "; even with --force" : ";") +
                              " shardpack never overwrites or removes files that are not its own. Move " +
                              (reserved.size() == 1 ? "it" : "them") + " away or choose another --out");
    }
    if (manifest && manifest->is_shardpack && !manifest->version_known && !force)
        throw usage_error("--out " + dir + " holds a dataset of format version \"" + manifest->version +
                          "\", which this shardpack does not write (it writes " + std::to_string(detail::version_major) + "." +
                          std::to_string(detail::version_minor_wide_pixels) + ")" +
                          (force_offered ? "; it is not replaced without --force" : "; choose another --out"));
}
}  // namespace

bool may_be_dataset_file(const std::string& path) {
    const auto slash = path.find_last_of('/');
    const std::string_view name = slash == std::string::npos ? std::string_view(path) : std::string_view(path).substr(slash + 1);
    return is_dataset_file_name(name) || path.find(".partial") != std::string::npos;
}

void refuse_input_in_output(const output_claim& claim, const std::string& path, const std::string& what) {
    const std::string real = real_path_of(path);
    const fs::path p(real);
    const std::string parent = p.parent_path().string(), name = p.filename().string();
    const bool in_folder = parent == claim.real_path && is_dataset_file_name(name);
    const bool in_partial = at_or_below(real, (fs::path(claim.real_path) / ".partial").string());
    if (in_folder || in_partial)
        throw usage_error(what + " lies in the output folder " + claim.folder->path() + (in_partial ? " below .partial/" : "") +
                          " under a name a build writes or removes; it would be overwritten or deleted. Move it or choose "
                          "another --out");
}

}  // namespace shardpack
