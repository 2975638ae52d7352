#include "format/dataset_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <set>
#include <string_view>
#include <algorithm>

#include "errors.hpp"
#include "format/output_file.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
using detail::json;
namespace fs = std::filesystem;

std::string hex64(std::uint64_t value) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(value));
    return buf;
}

json schema_to_json(const detail::schema_record& s) {
    using namespace detail;
    json image = json::object();
    image.set("dtype", "uint8");
    image.set("channels", unsigned(s.channels));
    image.set("channel_order", s.channel_order == order_code::gray ? "L" : s.channel_order == order_code::rgb ? "RGB" : "RGBA");
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
    return out;
}

json classes_to_json(const std::vector<detail::class_record>& classes) {
    json out = json::array();
    for (const auto& c : classes) {
        json e = json::object();
        e.set("name", c.name);
        if (c.has_colour) e.set("color", json(json::array_t{json(unsigned(c.r)), json(unsigned(c.g)), json(unsigned(c.b))}));
        out.push(e);
    }
    return out;
}

namespace {

// Removes what an interrupted or killed build left: shards being written, half-written small
// files. Called under the output lock, so no other build is writing them.
void remove_stale_temporaries(const std::string& dir) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) return;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind(".tmp-", 0) == 0 || name.find(".tmp-") != std::string::npos) fs::remove(entry.path(), ec);
    }
}

std::string read_first_line(const std::string& path) {
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);
    return line;
}

// Appends the pieces one after the other (in pieces, so that a big text need not be copied
// into one string first).
void append_durably(const std::string& path, std::initializer_list<std::string_view> pieces) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) throw io_error("cannot open " + path + ": " + std::strerror(errno));
    for (const std::string_view text : pieces) {
        std::size_t done = 0;
        while (done < text.size()) {
            const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                const int err = errno;
                ::close(fd);
                throw io_error("cannot write " + path + ": " + std::strerror(err));
            }
            done += std::size_t(n);
        }
    }
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) throw io_error("cannot sync " + path + ": " + std::strerror(err));
}

}  // namespace

dataset_writer::dataset_writer(dataset_writer_options options)
    : opt_(std::move(options)), partial_(opt_.out_dir + "/" + partial_dir) {
    if (opt_.shard_size < 4096) throw usage_error("--shard-size must be at least 4096 bytes");
    std::error_code ec;
    fs::create_directories(partial_, ec);
    if (ec) throw io_error("cannot create " + partial_ + ": " + ec.message());
    remove_stale_temporaries(opt_.out_dir);
    remove_stale_temporaries(partial_);
    // Finished shards of an interrupted build with the same options stay, for reuse; any
    // others are of no use.
    const std::string list = partial_ + "/" + fingerprints_file;
    const std::string header = format_fingerprint_header("partial", opt_.options_digest);
    if (read_first_line(list) + "\n" != header) {
        for (const auto& entry : fs::directory_iterator(partial_)) fs::remove_all(entry.path(), ec);
        append_durably(list, {header});
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
    current_temp_ = opt_.out_dir + "/.tmp-" + std::to_string(::getpid()) + "-shard-" + std::to_string(number) + ".spk";
    const shard_identity id{number, records_ - extent_.count(), opt_.uses_zstd, opt_.uses_bands};
    current_ = std::make_unique<shard_writer>(current_temp_, opt_.schema, opt_.classes, id, opt_.extra_sections);
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
        if (adopt_->name().find(hex64(h)) != std::string::npos) {
            s.hash = h;
            s.bytes = adopt_->size();
            s.file = adopt_->name();
            s.path = adopt_path_;
            s.reused = true;
        }
    }
    if (!s.reused) {
        if (adopt_) write_pending();
        if (!current_) open_real_shard();
        s.hash = current_->finish();
        s.bytes = current_->file_size();
        char name[64];
        std::snprintf(name, sizeof name, "shard-%05zu-%s.spk", done_.size(), hex64(s.hash).c_str());
        s.file = name;
        s.path = partial_ + "/" + s.file;
        rename_durably(current_temp_, s.path);
        current_.reset();
        current_temp_.clear();
    }
    const std::string group_head = format_fingerprint_group_head(s.file, s.records);
    if (!s.reused) append_durably(partial_ + "/" + fingerprints_file, {group_head, fingerprint_lines_});
    // Every shard's fingerprints, for the published list; streamed to a file to keep memory flat.
    if (!all_fingerprints_) {
        all_fingerprints_path_ = opt_.out_dir + "/.tmp-" + std::to_string(::getpid()) + "-fingerprints.tsv";
        all_fingerprints_ = std::make_unique<output_file>(all_fingerprints_path_);
    }
    all_fingerprints_->write(group_head.data(), group_head.size());
    all_fingerprints_->write(fingerprint_lines_.data(), fingerprint_lines_.size());
    done_.push_back(s);
    adopt_ = nullptr;
    pending_.clear();
    fingerprint_lines_.clear();
    extent_ = shard_extent(header_length_);
}

json dataset_writer::publish() {
    if (extent_.count() > 0 || done_.empty()) finish_shard();  // an empty dataset still has one shard, for the schema

    std::vector<unsigned char> shard_hashes;  // the content hash covers these, in order
    json shards = json::array();
    std::set<std::string> keep;
    std::string fingerprint_groups;
    for (const auto& s : done_) {
        const std::string final_path = opt_.out_dir + "/" + s.file;
        if (s.path != final_path && std::rename(s.path.c_str(), final_path.c_str()) != 0)
            throw io_error("cannot move " + s.path + " to " + final_path + ": " + std::strerror(errno));
        keep.insert(s.file);
        shard_hashes.resize(shard_hashes.size() + 8);
        detail::store_u64(shard_hashes.data() + shard_hashes.size() - 8, s.hash);
        json e = json::object();
        e.set("file", s.file);
        e.set("records", s.records);
        e.set("first_record", s.first_record);
        e.set("bytes", s.bytes);
        e.set("xxh3", hex64(s.hash));
        shards.push(e);
    }
    sync_directory(opt_.out_dir);

    json m = json::object();
    m.set("format", "shardpack");
    m.set("format_version", std::to_string(detail::version_major) + "." +
                                std::to_string(opt_.uses_bands ? detail::version_minor : detail::version_minor_plain));
    m.set("records", records_);
    const std::string content_hash = hex64(XXH3_64bits(shard_hashes.data(), shard_hashes.size()));
    m.set("content_hash", content_hash);
    m.set("schema", schema_to_json(opt_.schema));
    m.set("classes", classes_to_json(opt_.classes));
    m.set("shards", shards);
    m.set("input_digest", opt_.input_digest);
    m.set("build", opt_.build);
    json tool = json::object();
    tool.set("name", "shardpack");
    tool.set("version", SHARDPACK_VERSION);
    m.set("tool", tool);
    m.set("libraries", opt_.libraries);
    write_file_atomically(opt_.out_dir + "/" + manifest_file_name, m.dump());
    published_ = true;

    // The new dataset is in place. Its fingerprints name it by content hash, so a crash before
    // this write leaves fingerprints a rebuild will see belong to another dataset and ignore.
    {
        const std::string header = format_fingerprint_header(content_hash, opt_.options_digest);
        const std::string final_path = opt_.out_dir + "/" + fingerprints_file;
        const std::string tmp = final_path + ".tmp-" + std::to_string(::getpid());
        all_fingerprints_->close();
        output_file out(tmp);
        out.write(header.data(), header.size());
        std::ifstream in(all_fingerprints_path_, std::ios::binary);
        std::vector<char> chunk(1 << 16);
        while (in.read(chunk.data(), std::streamsize(chunk.size())) || in.gcount() > 0)
            out.write(chunk.data(), std::size_t(in.gcount()));
        out.sync();
        out.close();
        rename_durably(tmp, final_path);
        all_fingerprints_.reset();
        std::remove(all_fingerprints_path_.c_str());
    }
    std::error_code ec;
    fs::remove_all(partial_, ec);
    for (const auto& entry : fs::directory_iterator(opt_.out_dir)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("shard-", 0) == 0 && entry.path().extension() == ".spk" && !keep.count(name)) fs::remove(entry.path(), ec);
    }
    return m;
}

void dataset_writer::discard() {
    current_.reset();
    all_fingerprints_.reset();
    if (!all_fingerprints_path_.empty()) std::remove(all_fingerprints_path_.c_str());
    if (!current_temp_.empty()) std::remove(current_temp_.c_str());
    current_temp_.clear();
}

}  // namespace shardpack
