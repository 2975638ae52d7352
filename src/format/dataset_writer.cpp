#include "format/dataset_writer.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

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

dataset_writer::dataset_writer(dataset_writer_options options) : opt_(std::move(options)) {
    std::error_code ec;
    fs::create_directories(opt_.out_dir, ec);
    if (ec) throw io_error("cannot create output folder " + opt_.out_dir + ": " + ec.message());
    if (opt_.shard_size < 4096) throw usage_error("--shard-size must be at least 4096 bytes");
}

dataset_writer::~dataset_writer() {
    if (!published_) discard();
}

std::string dataset_writer::temp_path(std::size_t shard) const {
    return opt_.out_dir + "/.tmp-" + std::to_string(::getpid()) + "-shard-" + std::to_string(shard) + ".spk";
}

void dataset_writer::start_shard() {
    const std::size_t number = done_.size();
    temp_paths_.push_back(temp_path(number));
    current_ = std::make_unique<shard_writer>(temp_paths_.back(), opt_.schema, opt_.classes,
                                              shard_identity{number, records_, opt_.uses_zstd}, opt_.extra_sections);
}

void dataset_writer::finish_shard() {
    published_shard s;
    s.records = current_->record_count();
    s.first_record = records_ - s.records;
    s.hash = current_->finish();
    s.bytes = current_->file_size();
    finished_bytes_ += s.bytes;
    char name[64];
    std::snprintf(name, sizeof name, "shard-%05zu-%s.spk", done_.size(), hex64(s.hash).c_str());
    s.file = name;
    done_.push_back(s);
    current_.reset();
}

void dataset_writer::add(const stored_record& record) {
    if (!current_) start_shard();
    // A shard holds at least one record, however large; otherwise it ends before the record
    // that would take it past shard_size.
    if (current_->record_count() > 0 && current_->projected_size_with(record) > opt_.shard_size) {
        finish_shard();
        start_shard();
    }
    current_->add(record);
    ++records_;
}

std::uint64_t dataset_writer::bytes_written() const {
    return finished_bytes_ + (current_ ? current_->projected_size() : 0);
}

json dataset_writer::publish() {
    if (!current_) start_shard();  // an empty dataset still has one shard, to carry the schema
    finish_shard();

    XXH3_state_t content;
    XXH3_64bits_reset(&content);
    json shards = json::array();
    std::set<std::string> keep;
    for (std::size_t k = 0; k < done_.size(); ++k) {
        const auto& s = done_[k];
        if (std::rename(temp_paths_[k].c_str(), (opt_.out_dir + "/" + s.file).c_str()) != 0)
            throw io_error("cannot rename " + temp_paths_[k] + " to " + s.file + ": " + std::strerror(errno));
        keep.insert(s.file);
        unsigned char h[8];
        detail::store_u64(h, s.hash);
        XXH3_64bits_update(&content, h, sizeof h);
        json e = json::object();
        e.set("file", s.file);
        e.set("records", s.records);
        e.set("first_record", s.first_record);
        e.set("bytes", s.bytes);
        e.set("xxh3", hex64(s.hash));
        shards.push(e);
    }
    temp_paths_.clear();
    sync_directory(opt_.out_dir);

    json m = json::object();
    m.set("format", "shardpack");
    m.set("format_version", std::to_string(detail::version_major) + "." + std::to_string(detail::version_minor));
    m.set("records", records_);
    m.set("content_hash", hex64(XXH3_64bits_digest(&content)));
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

    // The new dataset is in place; shards only the old manifest named can go.
    for (const auto& entry : fs::directory_iterator(opt_.out_dir)) {
        const std::string name = entry.path().filename().string();
        if (name.rfind("shard-", 0) == 0 && entry.path().extension() == ".spk" && !keep.count(name)) {
            std::error_code ec;
            fs::remove(entry.path(), ec);
        }
    }
    return m;
}

void dataset_writer::discard() {
    current_.reset();
    for (const auto& p : temp_paths_) std::remove(p.c_str());
    temp_paths_.clear();
}

}  // namespace shardpack
