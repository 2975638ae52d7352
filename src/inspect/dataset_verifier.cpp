#include "inspect/dataset_verifier.hpp"

#include <filesystem>
#include <set>

#include "dataset/dataset_names.hpp"
#include "dataset/dataset_writer.hpp"
#include "dataset/folder_ledger.hpp"
#include "shardpack/detail/hex.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
namespace fs = std::filesystem;

namespace {

// Label values must be what the writer can emit: one-hot pixels with at most one 1 and only
// 0/1 values; index values below the class count or the ignore value.
std::string label_problem(const sample& s, const schema_info& schema) {
    if (schema.task != task::segmentation) return {};
    if (schema.layout == label_layout::one_hot) {
        const auto lab = s.label();
        const std::size_t k = schema.class_count;
        for (std::size_t p = 0; p < lab.size() / k; ++p) {
            unsigned ones = 0;
            for (std::size_t c = 0; c < k; ++c) {
                const std::uint8_t v = lab[p * k + c];
                if (v > 1) return "one-hot value " + std::to_string(v) + " at pixel " + std::to_string(p);
                ones += v;
            }
            if (ones > 1) return "pixel " + std::to_string(p) + " is marked with " + std::to_string(ones) + " classes";
        }
        return {};
    }
    auto check = [&](auto view) -> std::string {
        for (std::size_t p = 0; p < view.size(); ++p)
            if (view[p] >= schema.class_count && view[p] != schema.ignore_value)
                return "class id " + std::to_string(view[p]) + " at pixel " + std::to_string(p) + " is out of range";
        return {};
    };
    return schema.label_value_bytes == 1 ? check(s.label()) : check(s.label_index16());
}

// The string member `key` of a manifest object, or null after reporting it missing or mistyped.
template <class Report>
const std::string* manifest_string(const detail::json& object, const char* key, const std::string& where, Report& problem) {
    const detail::json* v = object.find(key);
    if (!v || !v->is_string()) {
        problem(where + ": " + (v ? "\"" + std::string(key) + "\" is not a string" : "no \"" + std::string(key) + "\" member"));
        return nullptr;
    }
    return &v->as_string();
}

// Whether a file named shard-NNNNN-<16 hex digits>.spk holds bytes whose XXH3-64 is that hex.
bool names_its_own_hash(const std::string& path, const std::string& name) {
    const auto dash = name.rfind('-');
    const auto dot = name.rfind('.');
    if (dash == std::string::npos || dot == std::string::npos || dot - dash - 1 != 16) return false;
    try {
        const detail::mapped_file file(path);
        return detail::hex16(XXH3_64bits(file.data(), file.size())) == name.substr(dash + 1, 16);
    } catch (const std::exception&) {
        return false;
    }
}

// A JSON value as text for a message, cut short.
std::string brief(const detail::json& value) {
    const std::string text = value.dump(-1);
    return text.size() > 80 ? text.substr(0, 80) + "..." : text;
}

// Every member of `expected` must be in `actual` with the same value (members `actual` has
// beyond those are left alone: a newer writer may add some). Mismatches are reported by path.
template <class Report>
void compare_copy(const detail::json& expected, const detail::json* actual, const std::string& path, Report& report) {
    if (!actual) {
        report(path + " is missing");
        return;
    }
    if (expected.is_object()) {
        if (!actual->is_object()) {
            report(path + " is " + brief(*actual) + ", not an object");
            return;
        }
        for (const auto& [key, value] : expected.as_object()) compare_copy(value, actual->find(key), path + "." + key, report);
        return;
    }
    if (expected.is_array()) {
        if (!actual->is_array() || actual->as_array().size() != expected.as_array().size()) {
            report(path + " has " + (actual->is_array() ? std::to_string(actual->as_array().size()) + " entries" : brief(*actual)) +
                   ", the shards " + std::to_string(expected.as_array().size()));
            return;
        }
        for (std::size_t i = 0; i < expected.as_array().size(); ++i)
            compare_copy(expected.as_array()[i], &actual->as_array()[i], path + "[" + std::to_string(i) + "]", report);
        return;
    }
    const std::string want = expected.dump(-1), have = actual->dump(-1);
    if (want != have) report(path + " is " + brief(*actual) + ", the shards say " + want);
}

}  // namespace

std::vector<std::string> schema_copy_contradictions(const dataset& ds) {
    using detail::json;
    std::vector<std::string> out;
    auto report = [&](std::string what) {
        if (out.size() < 20) out.push_back("manifest.json: " + std::move(what));
    };
    const auto& shard = ds.shard(0);
    // Printed and parsed again, so that both sides went through the same JSON encoding.
    const json schema = json::parse(schema_to_json(shard.schema()).dump());
    const json classes = json::parse(classes_to_json(shard.classes()).dump());
    compare_copy(schema, ds.manifest().find("schema"), "schema", report);
    compare_copy(classes, ds.manifest().find("classes"), "classes", report);
    return out;
}

namespace {
// The XXH3-64 of a whole shard. A shard that is not mapped (read from object storage) is read
// in windows of whole records, each window fetched at once (byte_source::prefetch, merged into
// large concurrent GETs), and each_record(local index) is called for the records of a window
// while its bytes are still in the source's buffers: verify fetches every byte once.
template <class F>
std::uint64_t hash_shard(const detail::shard_file& shard, F&& each_record) {
    if (shard.bytes()) return XXH3_64bits(shard.bytes(), shard.size());
    constexpr std::uint64_t window = std::uint64_t(64) << 20, piece = std::uint64_t(8) << 20;
    const byte_source& src = *shard.source();
    XXH3_state_t state;
    XXH3_64bits_reset(&state);
    std::vector<unsigned char> buffer;
    std::uint64_t pos = 0;
    auto hash_to = [&](std::uint64_t end) {
        std::vector<byte_range> ranges;
        for (std::uint64_t at = pos; at < end; at += piece) ranges.push_back({at, std::min(piece, end - at)});
        if (!ranges.empty()) src.prefetch(ranges.data(), ranges.size());
        while (pos < end) {
            const std::size_t n = static_cast<std::size_t>(std::min(piece, end - pos));
            buffer.resize(n);
            src.read_at(pos, n, buffer.data());
            XXH3_64bits_update(&state, buffer.data(), n);
            pos += n;
        }
    };
    const std::size_t count = shard.record_count();
    for (std::size_t i = 0; i < count;) {
        std::size_t j = i;
        std::uint64_t end = pos;
        do {
            const auto e = shard.entry(j++);
            end = e.offset + e.stored_size;
        } while (j < count && shard.entry(j).offset + shard.entry(j).stored_size - pos <= window);
        hash_to(end);
        for (std::size_t k = i; k < j; ++k) each_record(k);
        i = j;
    }
    hash_to(shard.size());
    return XXH3_64bits_digest(&state);
}

template <class Report>
void check_schema_copies(const dataset& ds, const std::string& dir, Report& problem) {
    for (const auto& c : schema_copy_contradictions(ds))
        problem(dir + ": " + c + " (the manifest's copy contradicts the shards' header)");
}

// The folder must hold exactly the shards the manifest names, besides those shardpack's
// ledger (.shardpack) lists: the previous manifest's, kept until the next build for readers
// that read it, and those a publish moved in before it was interrupted. Both are warnings.
// An s3:// dataset: the objects directly under its prefix, and the ledger `push` keeps there.
template <class Report>
void check_folder_listing(const dataset& ds, const std::string& dir, const storage& folder, const std::string& table_file,
                          verify_result& r, Report& problem) {
    std::set<std::string> names;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) names.insert(ds.shard_name(k));
    std::vector<std::pair<std::string, std::string>> entries;  // name, local path ("" remotely)
    folder_ledger ledger;
    const bool in_folder = dynamic_cast<const detail::local_storage*>(&folder) != nullptr;
    for (auto& name : folder.list_names()) {
        std::string path = in_folder ? dir + "/" + name : std::string();
        if (!in_folder && name == folder_ledger::file_name)  // the ledger push keeps beside the dataset
            ledger = folder_ledger::parse(folder.read_small_file(name, 64 << 20)).value_or(folder_ledger{});
        entries.push_back({std::move(name), std::move(path)});
    }
    if (in_folder) ledger = folder_ledger::load(dir).value_or(folder_ledger{});
    for (const auto& [name, path] : entries) {
        if (name.rfind("shard-", 0) == 0 && fs::path(name).extension() == ".spk" && !names.count(name)) {
            if (ledger.retained.count(name))
                r.warnings.push_back(dir + ": shard " + name +
                                     " is kept from the previous build for readers that opened its manifest; the next build removes it");
            else if (ledger.pending.count(name))
                r.warnings.push_back(dir + ": extra shard " + name +
                                     " is not named by the manifest (left by an interrupted build; the next build removes it)");
            // Unlisted: a build of an older shardpack killed just before its manifest rename
            // leaves shards whose bytes hash to their own names; the manifest's dataset is whole.
            // A shard whose name does not match its bytes came from somewhere else: damage.
            else if (path.empty())
                r.warnings.push_back(dir + ": extra shard " + name +
                                     " is named by neither the manifest nor the ledger; push leaves it alone");
            else if (names_its_own_hash(path, name))
                r.warnings.push_back(dir + ": extra shard " + name +
                                     " is not named by the manifest; its bytes match its name (an interrupted build?), but no "
                                     "ledger lists it, so no build removes it");
            else
                problem(dir + ": extra shard " + name + " is not named by the manifest, and its bytes do not hash to its name");
        } else if (is_shard_table_name(name) && name != table_file) {
            r.warnings.push_back(dir + ": shard table " + name + " is not named by the manifest" +
                                 (ledger.retained.count(name) || ledger.pending.count(name)
                                      ? " (kept from an earlier build; the next build removes it)"
                                      : " nor by the ledger; no build removes it"));
        } else if (is_temporary_name(name))
            r.warnings.push_back(dir + ": leftover temporary file " + name + " (an interrupted build)");
    }
}
}  // namespace

verify_result verify_dataset(const std::string& dir, std::size_t max_problems) {
    verify_result r;
    auto problem = [&](std::string what) {
        if (r.problems.size() < max_problems) r.problems.push_back(std::move(what));
    };
    dataset ds;
    open_options mapped;  // whole-file hashes read the mappings
    mapped.io = io_mode::mmap;
    try {
        // The folder's storage, kept to list the folder below: the local folder, or the one an
        // s3:// URL's opener makes (src/remote/ registers it), through the reader's interface.
        mapped = dataset::with_storage(dir, mapped);
        ds = dataset::open(dir, mapped);
    } catch (const std::exception& e) {
        problem(e.what());
        return r;
    }
    const auto& manifest = ds.manifest();
    const std::string table_file = ds.shard_table_file();  // format 1.2; the reader checked its hash

    check_folder_listing(ds, dir, *mapped.storage, table_file, r, problem);
    check_schema_copies(ds, dir, problem);

    // Whole-file hashes: these also cover the zero padding between records.
    std::vector<unsigned char> shard_hashes;
    read_context ctx;
    std::vector<char> record_checked(ds.size(), 0);
    auto check_record = [&](std::size_t i) {
        try {
            const sample s = ds.read(i, ctx);
            std::string why = label_problem(s, ds.schema());
            if (why.empty() && !ds.fields().empty()) {  // per-sample fields (1.5): their values decode
                try {
                    (void)s.fields();
                } catch (const shardpack::error& e) {
                    why = std::string("its fields: ") + e.what();
                }
            }
            if (!why.empty()) {
                std::size_t k = 0;
                while (k + 1 < ds.shard_count() && ds.shard_first_record(k + 1) <= i) ++k;
                problem(dir + ": " + ds.shard_name(k) + ": record " + std::to_string(i - ds.shard_first_record(k)) +
                        " (dataset index " + std::to_string(i) + "): " + why);
            }
        } catch (const std::exception& e) {
            problem(e.what());
        }
        record_checked[i] = 1;
        ++r.records_checked;
    };
    for (std::size_t k = 0; k < ds.shard_count(); ++k) {
        const auto& shard = ds.shard(k);
        shard.source()->advise(access_pattern::sequential);
        std::uint64_t h = 0;
        try {
            h = hash_shard(*shard, [&](std::size_t local) { check_record(std::size_t(shard.header().first_record) + local); });
        } catch (const std::exception& e) {
            problem(dir + ": " + shard.name() + ": cannot be read to the end: " + e.what());
        }
        // The reader does not use these members; a manifest without them is damage to report,
        // not a reason to stop checking the records.
        std::uint64_t listed_hash = 0;
        std::string why;
        if (ds.listed_shard_hash(k, listed_hash, &why)) {
            const std::string want = detail::hex16(listed_hash);
            if (h != listed_hash)
                problem(dir + ": " + shard.name() + ": file hash " + detail::hex16(h) + " differs from the " +
                        (table_file.empty() ? "manifest's " : "shard table's ") + want);
            if (shard.name() != detail::shard_file_name(k, listed_hash))
                problem(dir + ": " + shard.name() + ": name does not match its number and hash");
        } else {
            problem(dir + ": manifest.json: shard " + shard.name() + ": " + why);
        }
        shard_hashes.resize(shard_hashes.size() + 8);
        detail::store_u64(shard_hashes.data() + shard_hashes.size() - 8, h);
        r.bytes_checked += shard.size();
        ++r.shards_checked;
    }
    const std::string content_hash = detail::hex16(XXH3_64bits(shard_hashes.data(), shard_hashes.size()));
    if (const std::string* want = manifest_string(manifest, "content_hash", dir + ": manifest.json", problem))
        if (content_hash != *want) problem(dir + ": content hash " + content_hash + " differs from the manifest's " + *want);

    for (std::size_t i = 0; i < ds.size(); ++i)
        if (!record_checked[i]) check_record(i);  // mapped shards: after all hashes, as before
    return r;
}

}  // namespace shardpack
