#include "dataset/dataset_merger.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>

#include "errors.hpp"
#include "dataset/dataset_writer.hpp"
#include "dataset/input_fingerprints.hpp"
#include "dataset/manifest_file.hpp"
#include "io/input_file.hpp"
#include "io/output_file.hpp"
#include "dataset/folder_ownership.hpp"
#include "io/output_folder.hpp"
#include "io/output_lock.hpp"
#include "format/record_compressor.hpp"
#include "pipeline/partition.hpp"
#include "shardpack/detail/hex.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
using detail::json;
namespace fs = std::filesystem;

namespace {

bool same_folder(const std::string& a, const std::string& b) {
    std::error_code ec;
    return fs::equivalent(a, b, ec);
}

// The longest line of a part's rejected.csv (a CSV row's cells and the reason).
constexpr std::size_t max_rejected_line = std::size_t(1) << 20;

// What the merge needs to know about a part before opening its shards.
struct part_info {
    std::string path;
    std::shared_ptr<output_folder> folder;  // the part's folder, its files read through it
    std::uint64_t index = 0, count = 0, rows = 0, first_row = 0, part_rows = 0;
    std::string input_digest, options_digest, records_digest, fingerprints_digest, schema, classes;
    json build;
    json manifest;  // as read and checked here; the part's shards are opened from it, not from a second read
};

std::string text_of(const json& j) { return j.dump(-1); }

// Reads a part's manifest.json (a regular file, never through a link, bounded) and the members
// the merge checks; every refusal names the part, the file and the member.
part_info describe_part(const std::string& path) {
    part_info p;
    p.path = path;
    json m;
    const std::string manifest_path = path + "/" + manifest_file_name;
    try {
        p.folder = output_folder::open(path, false, true);  // the folder as named; inside it, no link is followed
        m = read_manifest(*p.folder);
    } catch (const input_error& e) {
        throw input_error(path + ": not a published dataset: " + e.what());
    } catch (const std::exception& e) {
        throw input_error(manifest_path + ": not a published dataset (" + e.what() + ")");
    }
    if (!m.is_object()) throw input_error(manifest_path + ": not a JSON object");
    const json* part = m.find("partition");
    if (!part || !part->is_object())
        throw input_error(path + ": not a part of a partitioned build (" + manifest_path + " has no \"partition\" object; build "
                          "parts with shardpack build --partition K/N)");
    const auto member = [&](const json& obj, const char* where, const char* name) -> const json& {
        const json* v = obj.find(name);
        if (!v) throw input_error(manifest_path + ": the member " + where + name + " is missing");
        return *v;
    };
    const auto number = [&](const json& obj, const char* where, const char* name) {
        const json& v = member(obj, where, name);
        if (!v.is_number()) throw input_error(manifest_path + ": the member " + where + name + " is not a number");
        return v.as_u64();
    };
    const auto text = [&](const json& obj, const char* where, const char* name) {
        const json& v = member(obj, where, name);
        if (!v.is_string()) throw input_error(manifest_path + ": the member " + where + name + " is not a string");
        return v.as_string();
    };
    try {
        p.index = number(*part, "partition.", "index");
        p.count = number(*part, "partition.", "count");
        p.rows = number(*part, "partition.", "rows");
        p.first_row = number(*part, "partition.", "first_row");
        p.part_rows = number(*part, "partition.", "part_rows");
        p.options_digest = text(*part, "partition.", "options_digest");
        p.records_digest = text(*part, "partition.", "records_digest");
        if (!part->find("fingerprints_digest"))
            throw input_error(manifest_path + ": the member partition.fingerprints_digest is missing (a part written by "
                              "shardpack before 1.1's fingerprint check; rebuild the part with this version)");
        p.fingerprints_digest = text(*part, "partition.", "fingerprints_digest");
        p.input_digest = text(m, "", "input_digest");
        p.schema = text_of(member(m, "", "schema"));
        p.classes = text_of(member(m, "", "classes"));
        p.build = member(m, "", "build");
        if (!p.build.is_object()) throw input_error(manifest_path + ": the member build is not an object");
        p.manifest = std::move(m);
    } catch (const input_error&) {
        throw;
    } catch (const std::exception& e) {
        throw input_error(manifest_path + ": " + e.what());
    }
    // The build options the merge takes from this part are those its digest covers: an edit
    // (build.shard_size, ...) shows as a mismatch.
    const std::string bytes = p.build.dump(-1) + "\n" + p.records_digest;
    if (detail::hex16(XXH3_64bits(bytes.data(), bytes.size())) != p.options_digest)
        throw input_error(manifest_path + ": the member build does not match partition.options_digest (the part's build "
                          "options were changed after it was built; rebuild the part)");
    return p;
}

std::string part_name(const part_info& p) {
    return p.path + " (part " + std::to_string(p.index) + " of " + std::to_string(p.count) + ")";
}

// Exactly the parts 0..N-1 of one build, each once. Returns them in part order.
std::vector<part_info> check_parts(std::vector<part_info> given) {
    if (given.empty()) throw usage_error("merge: no part given");
    const part_info& ref = given.front();
    for (const auto& p : given) {
        auto foreign = [&](const std::string& what) {
            return input_error(part_name(p) + " is not of the same build as " + part_name(ref) + ": " + what + " differs");
        };
        if (p.count != ref.count) throw foreign("the number of parts N");
        if (p.input_digest != ref.input_digest) throw foreign("the input list (input_digest " + p.input_digest + " vs " + ref.input_digest + ")");
        if (p.options_digest != ref.options_digest)
            throw foreign("the build options, tool or library versions (options_digest " + p.options_digest + " vs " + ref.options_digest + ")");
        if (p.records_digest != ref.records_digest) throw foreign("what shapes the records (records_digest)");
        if (p.rows != ref.rows) throw foreign("the number of rows in the list");
        if (p.schema != ref.schema) throw foreign("the schema");
        if (p.classes != ref.classes) throw foreign("the class table");
        if (p.index >= p.count) throw input_error(part_name(p) + ": the part number is out of range");
        const row_slice expect = partition_slice(p.rows, {p.index, p.count});
        if (p.first_row != expect.first || p.part_rows != expect.size)
            throw input_error(part_name(p) + ": holds rows " + std::to_string(p.first_row) + "+" + std::to_string(p.part_rows) +
                              ", but part " + std::to_string(p.index) + " of " + std::to_string(p.count) + " is rows " +
                              std::to_string(expect.first) + "+" + std::to_string(expect.size));
    }
    std::map<std::uint64_t, const part_info*> by_index;
    for (const auto& p : given) {
        const auto [it, inserted] = by_index.emplace(p.index, &p);
        if (!inserted)
            throw input_error("duplicate part: " + it->second->path + " and " + p.path + " are both part " + std::to_string(p.index) +
                              " of " + std::to_string(p.count));
    }
    std::vector<std::uint64_t> missing;
    for (std::uint64_t k = 0; k < ref.count && missing.size() < 20; ++k)
        if (!by_index.count(k)) missing.push_back(k);
    if (!missing.empty()) {
        std::string list;
        for (auto k : missing) list += (list.empty() ? "" : ", ") + std::to_string(k);
        throw input_error("missing part" + std::string(missing.size() > 1 ? "s " : " ") + list + " of " + std::to_string(ref.count) +
                          " (" + std::to_string(given.size()) + " given; a part whose build failed or was cancelled has no "
                          "manifest.json; rebuild it with --partition K/" + std::to_string(ref.count) + ")");
    }
    std::vector<part_info> ordered;
    for (const auto& [k, p] : by_index) ordered.push_back(*p);
    return ordered;
}

// The rejected rows a --on-error skip part lists (its rejected.csv after the header line), at
// most max_rows of them (a part rejects at most the build's rows); a line at a time.
std::vector<std::string> read_rejected(const part_info& p, std::uint64_t max_rows) {
    std::vector<std::string> rows;
    try {
        input_file rejected(p.folder->fd(), p.path, "rejected.csv");
        line_reader lines(rejected, max_rejected_line);
        std::string line;
        bool header = true;
        while (lines.next(line)) {
            if (!header) {
                if (rows.size() >= max_rows)
                    throw input_error(rejected.path() + ": lists more rejected rows than the build had rows (" +
                                      std::to_string(max_rows) + ")");
                rows.push_back(line);
            }
            header = false;
        }
    } catch (const input_error& e) {
        throw input_error(part_name(p) + ": " + e.what());
    }
    return rows;
}

bool skips_rows(const part_info& p) {
    const json* on_error = p.build.find("on_error");
    return on_error && on_error->is_string() && on_error->as_string() == "skip";
}

// What the merge trusts in a part beyond its manifest, checked before anything is written:
// its fingerprints.tsv has the digest the manifest names (an edited key or stamp is refused)
// and lists no group larger than the part's rows; its rejected.csv can be read.
void check_part_lists(const part_info& p) {
    const std::string list_path = p.path + "/" + dataset_writer::fingerprints_file;
    try {
        fingerprint_reader list(*p.folder, dataset_writer::fingerprints_file);
        fingerprint_group group;
        while (list.next(group, p.part_rows)) {
        }
        if (detail::hex16(list.body_digest()) != p.fingerprints_digest)
            throw input_error(list_path + " was changed after the part was built (its digest " + detail::hex16(list.body_digest()) +
                              " is not the manifest's partition.fingerprints_digest " + p.fingerprints_digest +
                              "); rebuild the part");
    } catch (const input_error& e) {
        throw input_error(part_name(p) + ": " + e.what() + " (the merge takes the records' keys and fingerprints from it)");
    }
    if (skips_rows(p)) read_rejected(p, p.rows);
}

std::vector<detail::class_record> classes_of(const detail::shard_file& s) { return s.classes(); }

}  // namespace

std::vector<std::string> find_part_folders(const std::vector<std::string>& parts, const std::string& out_dir) {
    if (parts.size() != 1 || fs::exists(parts[0] + "/" + manifest_file_name)) return parts;
    std::error_code ec;
    if (!fs::is_directory(parts[0], ec)) throw input_error(parts[0] + ": no such folder");
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(parts[0], ec)) {
        if (!e.is_directory() || same_folder(e.path().string(), out_dir)) continue;
        const std::string name = e.path().filename().string();
        if (name.empty() || name[0] == '.') continue;
        // A part whose build never published has no manifest yet: the check for missing
        // parts names it by number.
        if (fs::exists(e.path() / manifest_file_name)) found.push_back(e.path().string());
    }
    if (found.empty()) throw input_error(parts[0] + ": holds no published part (no manifest.json in it or its subfolders)");
    std::sort(found.begin(), found.end());
    return found;
}

namespace {

bool inside(const std::string& inner, const std::string& outer) {
    return inner == outer || inner.compare(0, outer.size() + 1, outer + "/") == 0;
}

// Refuses an --out that is, holds or lies in a part; `out_real` is --out's real path.
void refuse_out_in_part(const merge_options& o, const std::vector<part_info>& parts, const std::string& out_real) {
    std::error_code ec;
    for (const auto& p : parts) {
        const std::string part_real = fs::weakly_canonical(fs::absolute(p.path), ec).string();
        if (inside(part_real, out_real) || inside(out_real, part_real))
            throw usage_error("--out " + o.out_dir + " is or holds the part " + part_name(p) +
                              "; merge into a folder of its own");
    }
}

// A lock per part keeps a rebuild of a part from changing it under the merge.
std::vector<std::unique_ptr<output_lock>> lock_parts(const std::vector<part_info>& parts) {
    if (rlimit lim{}; ::getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur < lim.rlim_max) {
        lim.rlim_cur = lim.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &lim);
    }
    std::vector<std::unique_ptr<output_lock>> part_locks;
    for (const auto& p : parts) part_locks.push_back(std::make_unique<output_lock>(p.path));
    return part_locks;
}

// The output folder is claimed as a build claims it: missing, empty or a shardpack dataset,
// never a link, and never one of the parts or a folder holding them.
std::shared_ptr<output_folder> claim_merge_output(const merge_options& o, const std::vector<part_info>& parts) {
    std::vector<std::string> part_paths;
    for (const auto& p : parts) part_paths.push_back(p.path);
    const output_claim claim = claim_output_folder(o.out_dir, false, part_paths, false);
    refuse_out_in_part(o, parts, claim.real_path);
    return claim.folder;
}

dataset open_part(const part_info& p) {
    try {
        open_options every_shard_mapped;  // the merge copies bytes straight from the mappings
        every_shard_mapped.io = io_mode::mmap;
        every_shard_mapped.max_open_shards = open_options::all_shards;
        return dataset::open_from_manifest(p.path, p.manifest, every_shard_mapped);
    } catch (const std::exception& e) {
        throw input_error(part_name(p) + ": " + e.what());
    }
}

// What a merge holds while it copies the parts' records. The writer is declared after the
// parts it may still point into, so that it goes first.
struct merge_run {
    merge_result r;
    std::deque<dataset> held;  // parts whose bytes the writer may still hold back (see copy_shard)
    std::unique_ptr<dataset_writer> writer;
    std::string reference_schema;  // part 0's, which every shard must match
    std::vector<detail::class_record> reference_classes;
    std::vector<std::string> rejected_lines;
    bool skip_mode = false;
};

// Takes the build options and the reference schema and classes from the first part, and
// makes the writer unless the merge only checks.
void start_merge(const merge_options& o, const part_info& p, const dataset& ds, std::shared_ptr<output_folder> out_folder,
                 merge_run& run) {
    const detail::shard_file& first = *ds.shard(0);
    dataset_writer_options wo;
    wo.out_dir = o.out_dir;
    wo.folder = std::move(out_folder);
    // The build options are the part's `build` object whose digest describe_part checked.
    const std::string manifest_path = p.path + "/" + manifest_file_name;
    const auto member = [&](const json& obj, const char* name) -> const json& {
        const json* v = obj.find(name);
        if (!v) throw input_error(part_name(p) + ": " + manifest_path + ": the member " + name + " is missing");
        return *v;
    };
    try {
        wo.shard_size = member(p.build, "shard_size").as_u64();
        const std::string& c = member(p.build, "compression").as_string();  // the feature bits, from its codec
        const record_codec codec = c == "none" ? record_codec::none : c == "auto" ? record_codec::automatic
                                 : c == "zstd-record" ? record_codec::zstd_record : record_codec::zstd;
        wo.codec = codec == record_codec::zstd_record ? shard_codec::zstd_record
                 : uses_band_frames(codec)             ? shard_codec::zstd_bands
                                                       : shard_codec::raw;
        wo.libraries = member(ds.manifest(), "libraries");
        run.skip_mode = member(p.build, "on_error").as_string() == "skip";
    } catch (const input_error&) {
        throw;
    } catch (const std::exception& e) {
        throw input_error(part_name(p) + ": " + manifest_path + ": the member build: " + e.what());
    }
    if (wo.shard_size < 4096)
        throw input_error(part_name(p) + ": " + manifest_path + ": build.shard_size " + std::to_string(wo.shard_size) +
                          " is below the 4096 bytes a shard needs");
    wo.schema = first.schema();
    // Format 1.3 where the parts' shards use per-region band heights (codec 3).
    if (wo.codec == shard_codec::zstd_bands && (first.header().required_features & detail::feature_region_bands))
        wo.codec = shard_codec::zstd_region_bands;
    wo.classes = classes_of(first);
    wo.build = p.build;
    wo.input_digest = p.input_digest;
    wo.options_digest = p.records_digest;
    wo.adopt = o.copy ? dataset_writer_options::adopt_mode::copy : dataset_writer_options::adopt_mode::link;
    run.reference_schema = first.schema_bytes();
    run.reference_classes = first.classes();
    if (!o.check_only) run.writer = std::make_unique<dataset_writer>(std::move(wo));
}

void check_shard_tables(const part_info& p, const dataset& ds, const merge_run& run) {
    for (std::size_t k = 0; k < ds.shard_count(); ++k) {
        const auto& s = ds.shard(k);
        const auto& c = s.classes();
        const auto& ref = run.reference_classes;
        bool same_classes = c.size() == ref.size();
        for (std::size_t i = 0; same_classes && i < c.size(); ++i)
            same_classes = c[i].name == ref[i].name && c[i].has_color == ref[i].has_color &&
                           c[i].r == ref[i].r && c[i].g == ref[i].g && c[i].b == ref[i].b;
        if (s.schema_bytes() != run.reference_schema || !same_classes)
            throw input_error(part_name(p) + ": " + s.name() + ": its schema or class table differs from part 0's shards");
    }
}

// The records' keys (which place shard boundaries) and input fingerprints, read a shard's
// group at a time; the part's manifest carries their digest.
std::unique_ptr<fingerprint_reader> open_fingerprints(const part_info& p, const dataset& ds, const std::string& list_path) {
    std::unique_ptr<fingerprint_reader> list;
    try {
        list = std::make_unique<fingerprint_reader>(*p.folder, dataset_writer::fingerprints_file);
    } catch (const input_error& e) {
        throw input_error(part_name(p) + ": " + e.what() + " (the merge takes the records' keys from it)");
    }
    if (list->content_hash() != ds.content_hash() || list->options_digest() != p.records_digest)
        throw input_error(part_name(p) + ": " + list_path + " describes another dataset (its header names content hash " +
                          list->content_hash() + " and options " + list->options_digest() + ")");
    return list;
}

// The group of fingerprints that belongs to shard k, checked against the shard.
void read_shard_group(const part_info& p, fingerprint_reader& list, const std::string& list_path,
                      const detail::shard_file& shard, std::size_t k, fingerprint_group& group) {
    try {
        if (!list.next(group, shard.record_count()))
            throw input_error(list_path + ": ends before the group of " + shard.name());
    } catch (const input_error& e) {
        throw input_error(part_name(p) + ": " + e.what());
    }
    if (group.shard != shard.name() || group.records.size() != shard.record_count())
        throw input_error(part_name(p) + ": " + list_path + ": the group of shard " + std::to_string(k) + " is " +
                          group.shard + " with " + std::to_string(group.records.size()) + " records, but the manifest "
                          "names " + shard.name() + " with " + std::to_string(shard.record_count()));
}

// What verify checks beyond the records: every byte, padding included.
void check_shard_bytes(const part_info& p, const detail::shard_file& shard, merge_result& r) {
    const std::string hash = detail::hex16(XXH3_64bits(shard.bytes(), shard.size()));
    if (shard.name().find(hash) == std::string::npos)
        throw input_error(part_name(p) + ": " + shard.name() + ": its bytes hash to " + hash +
                          ", not to its name (damaged part; rebuild it)");
    ++r.shards;
    r.bytes += shard.size();
}

// Checks each record of a shard and hands it to the writer. Returns false when a stop signal
// came (the writer's files are then discarded). `added` says whether this part gave a record yet.
bool copy_shard(const merge_options& o, const part_info& p, const detail::shard_file& shard, const fingerprint_group& group,
                merge_run& run, bool& added) {
    const std::string shard_path = p.path + "/" + shard.name();
    for (std::size_t i = 0; i < shard.record_count(); ++i) {
        if (o.stop && o.stop->load()) {
            if (run.writer) run.writer->discard();
            run.r.interrupted_by = o.stop->load();
            return false;
        }
        const detail::index_entry e = shard.entry(i);
        const unsigned char* bytes = shard.bytes() + e.offset;
        if (XXH3_64bits(bytes, std::size_t(e.stored_size)) != e.checksum)
            throw input_error(part_name(p) + ": " + shard.name() + ": record " + std::to_string(i) +
                              ": the stored bytes do not match their checksum (damaged part; rebuild it)");
        const record_fingerprint& fp = group.records[i];
        const record_view view{bytes, e.stored_size, e.decoded_size, e.checksum, e.codec};
        if (run.writer) run.writer->add(view, XXH3_64bits(fp.key.data(), fp.key.size()), fp, record_origin{&shard, i, shard_path});
        if (!added) {
            // The writer held back the previous parts' last records only until a record
            // of another shard came: their mappings may go now.
            run.held.clear();
            added = true;
        }
        ++run.r.records;
    }
    return true;
}

// The part's fingerprints.tsv ends with its last shard's group and still has the digest the
// manifest names.
void finish_fingerprints(const part_info& p, fingerprint_reader& list, const std::string& list_path, fingerprint_group& group) {
    try {
        if (list.next(group)) throw input_error(list_path + ": lists more shards than the manifest names");
    } catch (const input_error& e) {
        throw input_error(part_name(p) + ": " + e.what());
    }
    if (detail::hex16(list.body_digest()) != p.fingerprints_digest)
        throw input_error(part_name(p) + ": " + list_path + " was changed after the part was built (its digest " +
                          detail::hex16(list.body_digest()) + " is not the manifest's partition.fingerprints_digest " +
                          p.fingerprints_digest + "); rebuild the part");
}

// Copies (or, with --check, checks) every record of one part. Returns false when a stop
// signal came.
bool merge_part(const merge_options& o, const part_info& p, const dataset& ds, merge_run& run) {
    const std::string list_path = p.path + "/" + dataset_writer::fingerprints_file;
    const std::unique_ptr<fingerprint_reader> list = open_fingerprints(p, ds, list_path);
    fingerprint_group group;
    bool added = false;
    for (std::size_t k = 0; k < ds.shard_count(); ++k) {
        const detail::shard_file& shard = *ds.shard(k);
        read_shard_group(p, *list, list_path, shard, k, group);
        if (o.check_only) check_shard_bytes(p, shard, run.r);
        if (!copy_shard(o, p, shard, group, run, added)) return false;
    }
    finish_fingerprints(p, *list, list_path, group);
    return true;
}

double seconds_since(std::chrono::steady_clock::time_point started) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

json check_report(const merge_run& run) {
    json report = json::object();
    report.set("checked_parts", run.r.parts);
    report.set("records", run.r.records);
    report.set("skipped", std::uint64_t(run.rejected_lines.size()));
    report.set("shards", run.r.shards);
    report.set("bytes", run.r.bytes);
    report.set("seconds", run.r.seconds);
    return report;
}

json merge_report(const merge_options& o, const std::vector<part_info>& parts, const merge_run& run) {
    const merge_result& r = run.r;
    json report = json::object();
    report.set("dataset", o.out_dir);
    report.set("content_hash", r.manifest.at("content_hash"));
    report.set("merged_parts", r.parts);
    json sources = json::array();
    for (const auto& p : parts) sources.push(p.path);
    report.set("part_folders", sources);
    report.set("rows", parts.front().rows);
    report.set("records", r.records);
    report.set("skipped", std::uint64_t(run.rejected_lines.size()));
    report.set("shards", r.shards);
    report.set("shards_linked", r.shards_linked);
    report.set("shards_copied", r.shards_copied);
    report.set("shards_written", r.shards_written);
    report.set("bytes_out", r.bytes);
    report.set("seconds", r.seconds);
    return report;
}

// Publishes the merged dataset, then writes its report.json and rejected.csv.
void publish_merge(const merge_options& o, const std::vector<part_info>& parts, output_folder& out_folder, merge_run& run,
                   std::chrono::steady_clock::time_point started) {
    merge_result& r = run.r;
    if (r.records == 0) {
        run.writer->discard();
        throw input_error("no part holds a record (" + std::to_string(run.rejected_lines.size()) +
                          " rows rejected); nothing was published");
    }
    r.manifest = run.writer->publish();
    run.held.clear();
    r.shards = run.writer->shards().size();
    r.shards_linked = run.writer->shards_linked();
    r.shards_copied = run.writer->shards_reused() - run.writer->shards_linked();
    r.shards_written = run.writer->shards_written();
    r.bytes = run.writer->bytes();
    r.seconds = seconds_since(started);
    r.report = merge_report(o, parts, run);
    out_folder.write_atomically("report.json", r.report.dump());
    if (run.skip_mode) {
        std::string text = "line,image,label,reason\n";
        for (const auto& line : run.rejected_lines) text += line + "\n";
        out_folder.write_atomically("rejected.csv", text);
    } else if (out_folder.kind_of("rejected.csv") == output_folder::kind::file) {
        out_folder.remove("rejected.csv");  // an earlier build's, not this dataset's
    }
}

}  // namespace

merge_result merge_parts(const merge_options& o) {
    const auto started = std::chrono::steady_clock::now();
    const std::vector<std::string> folders = find_part_folders(o.parts, o.out_dir);
    for (const auto& f : folders)
        if (same_folder(f, o.out_dir)) throw usage_error("merge: the output folder " + o.out_dir + " is also a part");
    std::vector<part_info> described;
    for (const auto& f : folders) described.push_back(describe_part(f));
    const std::vector<part_info> parts = check_parts(std::move(described));

    // An --out that is, holds or lies in a part is refused before anything is locked or made.
    if (!o.check_only) {
        std::error_code ec;
        refuse_out_in_part(o, parts, fs::weakly_canonical(fs::absolute(o.out_dir), ec).string());
    }
    const std::vector<std::unique_ptr<output_lock>> part_locks = lock_parts(parts);
    // Each part's lists, before anything is written: fingerprints.tsv as its manifest's digest
    // says, rejected.csv readable. Both a line at a time, never through a link.
    for (const auto& p : parts) check_part_lists(p);

    std::unique_ptr<output_lock> lock;
    std::shared_ptr<output_folder> out_folder;
    if (!o.check_only) {
        out_folder = claim_merge_output(o, parts);
        lock = std::make_unique<output_lock>(*out_folder);
    }

    merge_run run;
    run.r.parts = parts.size();
    for (const auto& p : parts) {
        dataset ds = open_part(p);
        if (&p == &parts.front()) start_merge(o, p, ds, out_folder, run);
        check_shard_tables(p, ds, run);
        if (!merge_part(o, p, ds, run)) return std::move(run.r);
        run.held.push_back(std::move(ds));
        if (run.skip_mode) {
            const std::uint64_t rows = parts.front().rows;
            for (auto& row : read_rejected(p, rows - std::min<std::uint64_t>(run.rejected_lines.size(), rows)))
                run.rejected_lines.push_back(std::move(row));
        }
    }
    if (o.check_only) {
        run.r.seconds = seconds_since(started);
        run.r.report = check_report(run);
        return std::move(run.r);
    }
    publish_merge(o, parts, *out_folder, run, started);
    return std::move(run.r);
}

}  // namespace shardpack
