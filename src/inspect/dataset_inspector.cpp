#include "inspect/dataset_inspector.hpp"

#include <spdlog/spdlog.h>

#include <cstdio>
#include <sstream>

#include "errors.hpp"
#include "dataset/dataset_writer.hpp"
#include "io/output_folder.hpp"
#include "inspect/dataset_verifier.hpp"
#include "shardpack/reader.hpp"

namespace shardpack {
using detail::json;

namespace {
// A build's report.json: class counts and rejected rows, at most a few megabytes.
constexpr std::uint64_t max_report_bytes = std::uint64_t(64) << 20;
}  // namespace

namespace {
json describe(const std::string& dir, const dataset& ds);
}  // namespace

json inspect_dataset(const std::string& dir) {
    const dataset ds = dataset::open(dir);
    try {
        return describe(dir, ds);
    } catch (const shardpack::error& e) {  // a member the reader does not need, missing or mistyped
        throw shardpack::error(dir + "/manifest.json: " + e.what());  // the reader's type: a damaged dataset, exit 1
    }
}

namespace {
json describe(const std::string& dir, const dataset& ds) {
    const json& m = ds.manifest();
    json out = json::object();
    out.set("path", dir);
    out.set("format_version", m.at("format_version"));
    out.set("records", ds.size());
    out.set("content_hash", ds.content_hash());
    // The shards' header is authoritative; the manifest's copies are shown only where they
    // contradict it, as such.
    out.set("schema", schema_to_json(ds.shard(0).schema()));
    out.set("classes", classes_to_json(ds.shard(0).classes()));
    json contradictions = json::array();
    for (auto& c : schema_copy_contradictions(ds)) contradictions.push(std::move(c));
    if (!contradictions.as_array().empty()) out.set("manifest_contradictions", contradictions);
    std::uint64_t decoded = 0, stored = 0, bytes = 0;
    json shards = json::array();
    for (std::size_t k = 0; k < ds.shard_count(); ++k) {
        const auto& shard = ds.shard(k);
        std::uint64_t d = 0, s = 0, raw = 0;
        for (std::size_t i = 0; i < shard.record_count(); ++i) {
            const auto e = shard.entry(i);
            d += e.decoded_size;
            s += e.stored_size;
            raw += e.codec == detail::codec_raw;
        }
        json e = json::object();
        e.set("file", shard.name());
        e.set("records", shard.record_count());
        e.set("first_record", shard.header().first_record);
        e.set("bytes", shard.size());
        e.set("decoded_bytes", d);
        e.set("raw_records", raw);
        e.set("compression_ratio", s ? double(d) / double(s) : 1.0);
        shards.push(e);
        decoded += d;
        stored += s;
        bytes += shard.size();
    }
    out.set("bytes", bytes);
    out.set("decoded_bytes", decoded);
    out.set("compression_ratio", stored ? double(decoded) / double(stored) : 1.0);
    out.set("shards", shards);
    out.set("build", m.at("build"));
    out.set("tool", m.at("tool"));
    out.set("libraries", m.at("libraries"));
    // The build's report, when it describes this very dataset: per-class counts and rejected rows.
    try {
        // Our own file read back: bounded, a regular file, never through a link; a FIFO or a
        // huge file there is refused (and reported), not waited on or read whole.
        // (An s3:// dataset has none: push sends the shards and the manifest.)
        if (const auto text = dir.rfind("s3://", 0) == 0
                                  ? std::nullopt
                                  : output_folder::open(dir, false, true)->read_own_if_present("report.json", max_report_bytes)) {
            const json report = json::parse(*text);
            if (report.at("content_hash").as_string() == ds.content_hash()) {
                out.set("class_frequencies", report.at("class_frequencies"));
                out.set("rejected", report.at("skipped"));
                if (const json* w = report.find("warnings")) out.set("warnings", *w);
            }
        }
    } catch (const input_error& e) {
        spdlog::warn("{}; the class counts are left out", e.what());
    } catch (const std::exception&) {
        // not a report this tool wrote: the counts are left out
    }
    return out;
}
}  // namespace

namespace {
std::string human_bytes(std::uint64_t n) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = double(n);
    int u = 0;
    while (v >= 1024 && u < 4) { v /= 1024; ++u; }
    char buf[32];
    std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}
}  // namespace

std::string format_inspection(const json& in) {
    std::string out;
    char line[512];
    const json& schema = in.at("schema");
    const json& image = schema.at("image");
    const json& label = schema.at("label");
    std::snprintf(line, sizeof line, "dataset      %s\nformat       shardpack %s\nrecords      %llu\n", in.at("path").as_string().c_str(),
                  in.at("format_version").as_string().c_str(), static_cast<unsigned long long>(in.at("records").as_u64()));
    out += line;
    if (const json* bad = in.find("manifest_contradictions")) {
        out += "WARNING      manifest.json's copy of the schema or classes contradicts the shards (shown below: the shards'):\n";
        for (const auto& c : bad->as_array()) out += "             " + c.as_string() + "\n";
    }
    const std::uint64_t h = image.at("height").as_u64(), w = image.at("width").as_u64();
    const std::string order = image.at("channel_order").as_string() == "bands"
                                  ? std::to_string(image.at("channels").as_u64()) + " bands"
                                  : image.at("channel_order").as_string();
    std::snprintf(line, sizeof line, "task         %s\nimage        %s %s, %s\nlabel        %s (%s)\n",
                  schema.at("task").as_string().c_str(), order.c_str(), image.at("dtype").as_string().c_str(),
                  h ? (std::to_string(w) + "x" + std::to_string(h)).c_str() : "size varies",
                  label.at("layout").as_string().c_str(), label.at("dtype").as_string().c_str());
    out += line;
    std::snprintf(line, sizeof line, "size         %s on disk, %s decoded, ratio %.2f\ncontent hash %s\n",
                  human_bytes(in.at("bytes").as_u64()).c_str(), human_bytes(in.at("decoded_bytes").as_u64()).c_str(),
                  in.at("compression_ratio").as_double(), in.at("content_hash").as_string().c_str());
    out += line;
    const auto& classes = in.at("classes").as_array();
    std::snprintf(line, sizeof line, "classes      %zu\n", classes.size());
    out += line;
    const json* freq = in.find("class_frequencies");
    const bool counted = freq && freq->is_array() && freq->as_array().size() == classes.size();
    for (std::size_t c = 0; c < classes.size(); ++c) {
        std::string color;
        if (const json* col = classes[c].find("color")) {
            // From the manifest, which the reader does not check: any shape may come here.
            const auto& a = col->as_array();
            if (a.size() != 3)
                throw error("manifest.json: the color of class " + std::to_string(c) + " has " + std::to_string(a.size()) +
                            " values, not 3");
            color = "(" + std::to_string(a[0].as_u64()) + "," + std::to_string(a[1].as_u64()) + "," + std::to_string(a[2].as_u64()) + ")";
        }
        std::string count;
        if (counted) {
            const json& f = freq->as_array()[c];
            const json* n = f.find("pixels") ? f.find("pixels") : f.find("samples");
            if (n && n->is_number() && f.find("fraction") && f.at("fraction").is_number()) {
                char text[96];
                std::snprintf(text, sizeof text, "%llu %s (%.1f%%)", static_cast<unsigned long long>(n->as_u64()),
                              f.find("pixels") ? "pixels" : "samples", 100.0 * f.at("fraction").as_double());
                count = text;
            }
        }
        std::snprintf(line, sizeof line, "  %5zu  %-24s %-16s %s\n", c, classes[c].at("name").as_string().c_str(), color.c_str(),
                      count.c_str());
        out += line;
    }
    if (const json* rejected = in.find("rejected"); rejected && rejected->is_number())
        out += "rejected     " + std::to_string(rejected->as_u64()) + " row(s) (rejected.csv)\n";
    if (const json* notes = in.find("warnings"); notes && notes->is_array())
        for (const auto& item : notes->as_array())
            if (item.is_string()) out += "warning      " + item.as_string() + "\n";
    if (const json* b = in.find("build"); b && b->is_object() && !b->as_object().empty()) {
        out += "build       ";
        for (const auto& [k, v] : b->as_object()) out += " " + k + "=" + v.dump(-1);
        out += "\n";
    }
    std::snprintf(line, sizeof line, "\n%-32s %10s %12s %12s %8s %6s\n", "shard", "records", "first", "bytes", "ratio", "raw");
    out += line;
    for (const auto& s : in.at("shards").as_array()) {
        std::snprintf(line, sizeof line, "%-32s %10llu %12llu %12s %8.2f %6llu\n", s.at("file").as_string().c_str(),
                      static_cast<unsigned long long>(s.at("records").as_u64()),
                      static_cast<unsigned long long>(s.at("first_record").as_u64()), human_bytes(s.at("bytes").as_u64()).c_str(),
                      s.at("compression_ratio").as_double(), static_cast<unsigned long long>(s.at("raw_records").as_u64()));
        out += line;
    }
    return out;
}

}  // namespace shardpack
