#include "dataset/dataset_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <set>
#include <string_view>
#include <algorithm>
#include <stdexcept>

#include "errors.hpp"
#include "dataset/dataset_names.hpp"
#include "dataset/folder_ledger.hpp"
#include "dataset/folder_ownership.hpp"
#include <spdlog/spdlog.h>

#include "io/input_file.hpp"
#include "io/output_file.hpp"
#include "shardpack/detail/hex.hpp"
#include "shardpack/detail/shard_table.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
using detail::json;
namespace fs = std::filesystem;

json schema_to_json(const detail::schema_record& s) {
    using namespace detail;
    json image = json::object();
    image.set("dtype", s.image_dtype_bytes == 2 ? "uint16" : "uint8");
    image.set("channels", unsigned(s.channels));
    image.set("channel_order", s.channel_order == order_code::gray ? "L" : s.channel_order == order_code::rgb ? "RGB"
                             : s.channel_order == order_code::rgba ? "RGBA" : "bands");
    image.set("height", s.fixed_height);
    image.set("width", s.fixed_width);
    json label = json::object();
    const char* layout = s.label_layout == layout_code::one_hot ? "one_hot"
                       : s.label_layout == layout_code::index ? "index" : "class_id";
    label.set("layout", layout);
    label.set("dtype", s.label_layout == layout_code::class_id ? "int32" : s.label_dtype_bytes == 2 ? "uint16" : "uint8");
    label.set("ignore_value", s.ignore_value);
    json out = json::object();
    out.set("task", s.task == task_code::segmentation ? "segmentation" : "classification");
    out.set("image", image);
    out.set("label", label);
    out.set("classes", s.class_count);
    if (!s.fields.empty()) {  // 1.5: the FIELDS section, for tools that read only the manifest
        json fields = json::array();
        for (const auto& f : s.fields) {
            json e = json::object();
            e.set("name", f.name);
            e.set("kind", field_kind_name(f.kind));
            if (has_vocabulary(f.kind)) {
                json names = json::array();
                for (const auto& v : f.vocabulary) names.push(json(v));
                e.set("names", names);
            }
            fields.push(e);
        }
        out.set("fields", fields);
    }
    return out;
}

json classes_to_json(const std::vector<detail::class_record>& classes) {
    json out = json::array();
    for (const auto& c : classes) {
        json e = json::object();
        e.set("name", c.name);
        if (c.has_color) e.set("color", json(json::array_t{json(unsigned(c.r)), json(unsigned(c.g)), json(unsigned(c.b))}));
        out.push(e);
    }
    return out;
}

namespace {

// Removes what an interrupted or killed build left: shards being written, half-written small
// files. Called under the output lock, so no other build is writing them. Only names of the
// forms a build gives its temporaries are touched.
void remove_stale_temporaries(const output_folder& folder) {
    for (const auto& name : folder.names())
        if (is_temporary_name(name)) folder.remove(name);
}

// Empties .partial/ of what a build put there: finished shards and their fingerprints.
// What a build leaves in .partial/: finished shards and their fingerprints for a resumed build,
// and, from a --on-error skip build that published nothing, its rejected.csv and report.json.
void clear_partial(const output_folder& partial) {
    for (const auto& name : partial.names())
        if (is_shard_name(name) || is_temporary_name(name) || name == dataset_writer::fingerprints_file ||
            name == "rejected.csv" || name == "report.json")
            partial.remove(name);
}

std::string read_first_line(const output_folder& folder, const std::string& name) {
    if (folder.kind_of(name) == output_folder::kind::missing) return {};
    try {
        input_file file(folder.fd(), folder.path(), name);
        char buf[512];
        const std::string text(buf, file.read(buf, sizeof buf));
        return text.substr(0, text.find('\n'));
    } catch (const input_error&) {
        return {};  // not ours to reuse (a link, a FIFO): the caller starts the file afresh
    }
}

// After the publish: a file that cannot be removed is left for the next build, not an error.
void remove_quietly(const output_folder& folder, const std::string& name) {
    try {
        folder.remove(name);
    } catch (const std::exception&) {
    }
}

// The ledger first: the shards about to be named and those of the current manifest, so
// that whatever moment a crash comes, every shard of ours in the folder stays listed and a
// later build can prove it its own. Returns the shards the current manifest names.
std::set<std::string> announce_shards(const output_folder& folder, const std::set<std::string>& named, folder_ledger& ledger) {
    std::set<std::string> current;  // named by the manifest in place now
    if (const auto m = read_manifest_summary(folder)) current.insert(m->shards.begin(), m->shards.end());
    ledger = folder_ledger::load(folder).value_or(folder_ledger{});
    ledger.retained.insert(current.begin(), current.end());
    ledger.pending.insert(named.begin(), named.end());
    ledger.store(folder);
    return current;
}

// Shards no manifest of the last two builds names (the new one and the one it replaced)
// go; the replaced manifest's others stay until the next build, for readers that read it.
void remove_unnamed_shards(const output_folder& folder, const output_folder& partial, const folder_ledger& ledger,
                           const std::set<std::string>& named, const std::set<std::string>& current) {
    for (const auto& set : {ledger.retained, ledger.pending})
        for (const auto& name : set)
            if (!named.count(name) && !current.count(name)) remove_quietly(folder, name);
    folder_ledger after;
    for (const auto& name : current)
        if (!named.count(name)) after.retained.insert(name);
    try {
        after.store(folder);
        clear_partial(partial);
        folder.remove_empty_folder(dataset_writer::partial_dir);
    } catch (const std::exception&) {
        // The dataset is published; what is left here the next build tidies.
    }
}

}  // namespace

dataset_writer::dataset_writer(dataset_writer_options options) : opt_(std::move(options)) {
    if (opt_.shard_size < 4096) throw usage_error("--shard-size must be at least 4096 bytes");
    folder_ = opt_.folder ? opt_.folder : output_folder::open(opt_.out_dir, true);
    // The mark that this folder is shardpack's, before anything else is written into it.
    if (!folder_ledger::load(*folder_)) folder_ledger{}.store(*folder_);
    if (opt_.remove_leftovers) remove_stale_temporaries(*folder_);
    partial_ = folder_->subfolder(partial_dir, true);
    if (opt_.remove_leftovers) remove_stale_temporaries(*partial_);
    // Finished shards of an interrupted build with the same options stay, for reuse; any
    // others are of no use.
    const std::string header = format_fingerprint_header("partial", opt_.options_digest);
    if (read_first_line(*partial_, fingerprints_file) + "\n" != header) {
        clear_partial(*partial_);
        partial_->append_durably(fingerprints_file, {header});
    }
    header_length_ = build_shard_header(opt_.schema, opt_.classes, {}, opt_.extra_sections).size();
    if (header_length_ > detail::max_header_bytes)
        throw input_error("the class table makes a shard header of " + std::to_string(header_length_) +
                          " bytes, over the format's 64 MiB limit");
    extent_ = shard_extent(header_length_);
}

dataset_writer::~dataset_writer() {
    if (!published_) discard();
}

std::uint64_t dataset_writer::shards_reused() const {
    return std::uint64_t(std::count_if(done_.begin(), done_.end(), [](const published_shard& s) { return s.reused; }));
}

std::uint64_t dataset_writer::bytes() const {
    std::uint64_t n = 0;
    for (const auto& s : done_) n += s.bytes;
    return n;
}

std::uint64_t dataset_writer::shards_written() const { return done_.size() - shards_reused(); }

// Content-defined boundaries: a shard may end after a record once it holds a quarter of
// shard_size, with a probability proportional to the record's size (so shards average about
// three quarters of shard_size), decided by the record's key hash. The decision depends only on
// that record and the shard's fill, so after a changed record the boundaries fall back in step
// with the previous build's at the next cut. shard_size itself is a hard limit, applied before
// a record is added.
bool dataset_writer::cut_after(std::uint64_t stored_size, std::uint64_t key_hash) const {
    if (extent_.projected_size() < opt_.shard_size / 4) return false;
    // key_hash / 2^64 < stored_size / target, in integers.
    const std::uint64_t target = opt_.shard_size / 2;
    if (stored_size >= target) return true;
    return key_hash < stored_size * (UINT64_MAX / target);
}

void dataset_writer::open_real_shard() {
    const std::size_t number = done_.size();
    current_temp_ = ".tmp-" + std::to_string(::getpid()) + "-shard-" + std::to_string(number) + ".spk";
    const shard_identity id{number, records_ - extent_.count(), opt_.codec};
    current_ = std::make_unique<shard_writer>(*folder_, current_temp_, opt_.schema, opt_.classes, id, opt_.extra_sections);
}

// The previous shard turned out not to be equal after all: write what was held back. The
// held records' bytes lie in that shard's mapping, which stays valid.
void dataset_writer::write_pending() {
    adopt_ = nullptr;
    open_real_shard();
    for (const auto& view : pending_) current_->add(view);
    pending_.clear();
}

void dataset_writer::add(const record_view& record, std::uint64_t key_hash, const record_fingerprint& fingerprint,
                         const record_origin& origin) {
    if (extent_.count() > 0 && extent_.projected_size_with(record.stored_size) > opt_.shard_size) finish_shard();
    const std::uint64_t local = extent_.count();
    if (local == 0 && origin.shard && origin.local == 0 && origin.shard->header().shard_number == done_.size() &&
        origin.shard->header().first_record == records_ && origin.shard->record_count() > 0) {
        adopt_ = origin.shard;
        adopt_in_partial_ = origin.path != folder_->path_of(origin.shard->name());
        adopt_path_ = origin.path;
    }
    if (adopt_ && origin.shard == adopt_ && origin.local == local && local < adopt_->record_count()) {
        pending_.push_back(record);
    } else {
        if (adopt_) write_pending();
        if (!current_) open_real_shard();
        current_->add(record);
    }
    extent_.add(record.stored_size);
    append_fingerprint_line(fingerprint_lines_, fingerprint);
    ++records_;
    if (cut_after(record.stored_size, key_hash)) finish_shard();
}

void dataset_writer::finish_shard() {
    published_shard s;
    s.records = extent_.count();
    s.first_record = records_ - s.records;
    if (adopt_ && s.records == adopt_->record_count()) {
        // Every record equal, in order, at the same place: the previous file is this shard,
        // provided its bytes still hash to its name.
        const std::uint64_t h = XXH3_64bits(adopt_->bytes(), adopt_->size());
        if (adopt_->name().find(detail::hex16(h)) != std::string::npos) {
            s.hash = h;
            s.index_hash = adopt_->index_checksum();
            s.bytes = adopt_->size();
            s.file = adopt_->name();
            s.in_partial = adopt_in_partial_;
            s.reused = true;
            if (opt_.adopt != dataset_writer_options::adopt_mode::move) bring_in(s);
        }
    }
    if (!s.reused) {
        if (adopt_) write_pending();
        if (!current_) open_real_shard();
        s.hash = current_->finish();
        s.index_hash = current_->index_checksum();
        s.bytes = current_->file_size();
        s.file = detail::shard_file_name(done_.size(), s.hash);
        s.in_partial = true;
        folder_->rename(current_temp_, *partial_, s.file);
        partial_->sync();
        current_.reset();
        current_temp_.clear();
    }
    const std::string group_head = format_fingerprint_group_head(s.file, s.records);
    if (!s.reused) partial_->append_durably(fingerprints_file, {group_head, fingerprint_lines_});
    // Every shard's fingerprints, for the published list; streamed to a file to keep memory flat.
    if (!all_fingerprints_) {
        all_fingerprints_name_ = ".tmp-" + std::to_string(::getpid()) + "-fingerprints.tsv";
        all_fingerprints_ = std::make_unique<output_file>(*folder_, all_fingerprints_name_);
    }
    all_fingerprints_->write(group_head.data(), group_head.size());
    all_fingerprints_->write(fingerprint_lines_.data(), fingerprint_lines_.size());
    done_.push_back(s);
    adopt_ = nullptr;
    pending_.clear();
    fingerprint_lines_.clear();
    extent_ = shard_extent(header_length_);
}

// A shard taken over from another dataset (a merge's part): placed in .partial/ under its name
// by a hard link or a copy, never by moving or changing the source.
void dataset_writer::bring_in(published_shard& s) {
    partial_->remove(s.file);  // left by an interrupted run; same name, same bytes
    s.in_partial = true;
    if (opt_.adopt == dataset_writer_options::adopt_mode::link) {
        std::string why_not;
        if (partial_->link_like_copy(adopt_path_, adopt_->size(), s.file, why_not)) {
            ++shards_linked_;
            partial_->sync();
            return;
        }
        spdlog::debug("{}: copied, not linked: {}", adopt_path_, why_not);
    }
    // A copy of the bytes checked (the mapping whose hash gave the name), never of what the
    // path holds now.
    current_temp_ = ".tmp-" + std::to_string(::getpid()) + "-shard-" + std::to_string(done_.size()) + ".spk";
    {  // removed by discard() if the copy stops half way
        output_file out(*folder_, current_temp_);
        out.write(adopt_->bytes(), adopt_->size());
        out.sync();
        out.close();
    }
    folder_->rename(current_temp_, *partial_, s.file);
    partial_->sync();
    current_temp_.clear();
}

namespace {

// The shards publish() names and the bytes its content hash covers.
struct shard_list {
    std::vector<unsigned char> shard_hashes;  // the content hash covers these, in order
    json shards;                              // manifest.json's list (without a table)
    std::string table_bytes, table_name;      // the binary shard table (with one)
    std::set<std::string> named;              // by the new manifest
};

// The shard list: in manifest.json (1.0, 1.1), or, for more than shard_table_above shards,
// in a binary shard table the manifest names (1.2, spec 13.8): one place, never both.
shard_list list_shards(const std::vector<published_shard>& done, bool with_table) {
    std::vector<unsigned char> shard_hashes;
    json shards = json::array();
    std::vector<detail::shard_table_entry> table;
    std::set<std::string> named;
    for (const auto& s : done) {
        named.insert(s.file);
        shard_hashes.resize(shard_hashes.size() + 8);
        detail::store_u64(shard_hashes.data() + shard_hashes.size() - 8, s.hash);
        if (with_table) {
            if (s.file != detail::shard_file_name(table.size(), s.hash))
                throw std::logic_error("shard " + s.file + " is not named by its number and hash");
            table.push_back({s.records, s.bytes, s.hash, true, s.index_hash});
            continue;
        }
        json e = json::object();
        e.set("file", s.file);
        e.set("records", s.records);
        e.set("first_record", s.first_record);
        e.set("bytes", s.bytes);
        e.set("xxh3", detail::hex16(s.hash));
        e.set("index_xxh3", detail::hex16(s.index_hash));
        shards.push(e);
    }
    std::string table_bytes, table_name;
    if (with_table) {
        table_bytes = detail::encode_shard_table(table);
        table_name = detail::shard_table_file_name(XXH3_64bits(table_bytes.data(), table_bytes.size()));
        named.insert(table_name);
    }
    return {std::move(shard_hashes), std::move(shards), std::move(table_bytes), std::move(table_name), std::move(named)};
}

}  // namespace

json dataset_writer::publish() {
    if (extent_.count() > 0 || done_.empty()) finish_shard();  // an empty dataset still has one shard, for the schema

    const bool with_table = done_.size() > opt_.shard_table_above;
    const shard_list list = list_shards(done_, with_table);
    const std::vector<unsigned char>& shard_hashes = list.shard_hashes;
    const std::set<std::string>& named = list.named;
    folder_ledger ledger;
    const std::set<std::string> current = announce_shards(*folder_, named, ledger);

    for (const auto& s : done_)
        if (s.in_partial) partial_->rename(s.file, *folder_, s.file);
    folder_->sync();
    // The table under its content-addressed name (a new name: no reader of the current manifest
    // reads it), durable before the manifest that names it.
    if (with_table) folder_->write_atomically(list.table_name, list.table_bytes);

    // The fingerprints under a temporary name first, their digest for a part's manifest; the
    // rename after the manifest's (see below).
    const std::string content_hash = detail::hex16(XXH3_64bits(shard_hashes.data(), shard_hashes.size()));
    const std::string fingerprints_tmp = std::string(fingerprints_file) + ".tmp-" + std::to_string(::getpid());
    const std::uint64_t fingerprints_digest = write_fingerprints(content_hash, fingerprints_tmp);

    json m = manifest_json(content_hash, with_table, list.shards, list.table_name, list.table_bytes, fingerprints_digest);
    folder_->write_atomically(manifest_file_name, m.dump());
    published_ = true;

    // The new dataset is in place. Its fingerprints name it by content hash, so a crash before
    // this write leaves fingerprints a rebuild will see belong to another dataset and ignore.
    {
        folder_->rename(fingerprints_tmp, *folder_, fingerprints_file);
        folder_->sync();
        all_fingerprints_.reset();
        remove_quietly(*folder_, all_fingerprints_name_);
    }

    remove_unnamed_shards(*folder_, *partial_, ledger, named, current);
    return m;
}

// Every finished shard's group of fingerprints.tsv, under `temp_name` after the header that
// names the dataset; returns the digest of what follows the header.
std::uint64_t dataset_writer::write_fingerprints(const std::string& content_hash, const std::string& temp_name) {
    const std::string header = format_fingerprint_header(content_hash, opt_.options_digest);
    all_fingerprints_->close();
    folder_->remove(temp_name);
    output_file out(*folder_, temp_name);
    out.write(header.data(), header.size());
    input_file in(folder_->fd(), folder_->path(), all_fingerprints_name_);
    XXH3_state_t* state = XXH3_createState();
    XXH3_64bits_reset(state);
    std::vector<char> chunk(1 << 16);
    while (const std::size_t n = in.read(chunk.data(), chunk.size())) {
        XXH3_64bits_update(state, chunk.data(), n);
        out.write(chunk.data(), n);
    }
    const std::uint64_t digest = XXH3_64bits_digest(state);
    XXH3_freeState(state);
    out.sync();
    out.close();
    return digest;
}

json dataset_writer::manifest_json(const std::string& content_hash, bool with_table, const json& shards,
                                   const std::string& table_name, const std::string& table_bytes,
                                   std::uint64_t fingerprints_digest) const {
    json m = json::object();
    m.set("format", "shardpack");
    m.set("format_version", std::to_string(detail::version_major) + "." +
                                std::to_string(!opt_.schema.fields.empty() ? detail::version_minor_fields
                                               : detail::uses_wide_pixels(opt_.schema) ? detail::version_minor_wide_pixels
                                               : opt_.codec == shard_codec::zstd_region_bands ? detail::version_minor_region_bands
                                               : with_table       ? detail::version_minor_shard_table
                                               : opt_.codec == shard_codec::zstd_bands ? detail::version_minor
                                                                 : detail::version_minor_plain));
    m.set("records", records_);
    m.set("content_hash", content_hash);
    m.set("schema", schema_to_json(opt_.schema));
    m.set("classes", classes_to_json(opt_.classes));
    if (with_table) {
        json t = json::object();
        t.set("file", table_name);
        t.set("bytes", std::uint64_t(table_bytes.size()));
        t.set("xxh3", detail::hex16(XXH3_64bits(table_bytes.data(), table_bytes.size())));
        m.set("shard_table", t);
    } else {
        m.set("shards", shards);
    }
    m.set("input_digest", opt_.input_digest);
    m.set("build", opt_.build);
    json tool = json::object();
    tool.set("name", "shardpack");
    tool.set("version", SHARDPACK_VERSION);
    m.set("tool", tool);
    m.set("libraries", opt_.libraries);
    if (!opt_.partition.is_null()) {
        json partition = opt_.partition;
        partition.set("fingerprints_digest", detail::hex16(fingerprints_digest));  // what merge checks the part's list by
        m.set("partition", partition);
    }
    return m;
}

void dataset_writer::discard() {
    current_.reset();
    all_fingerprints_.reset();
    if (!all_fingerprints_name_.empty()) remove_quietly(*folder_, all_fingerprints_name_);
    all_fingerprints_name_.clear();
    if (!current_temp_.empty()) remove_quietly(*folder_, current_temp_);
    current_temp_.clear();
}

}  // namespace shardpack
