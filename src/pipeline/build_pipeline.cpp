#include "pipeline/build_pipeline.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include "errors.hpp"
#include "format/dataset_writer.hpp"
#include "format/output_file.hpp"
#include "format/output_lock.hpp"
#include "format/record_compressor.hpp"
#include "pipeline/file_loader.hpp"
#include "pipeline/library_versions.hpp"
#include "pipeline/previous_build.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "pipeline/sample_order.hpp"
#include "pipeline/sample_transformer.hpp"

namespace shardpack {
using detail::json;

std::atomic<int> build_interrupt_signal{0};

namespace {

const char* name_of(resize_mode m) {
    switch (m) {
        case resize_mode::none: return "none";
        case resize_mode::stretch: return "stretch";
        case resize_mode::shorter: return "shorter";
        case resize_mode::fit: return "fit";
    }
    return "?";
}
const char* name_of(crop_mode m) { return m == crop_mode::center ? "center" : m == crop_mode::topleft ? "topleft" : "none"; }
const char* name_of(resample_filter f) {
    return f == resample_filter::area ? "area" : f == resample_filter::bilinear ? "bilinear" : "lanczos";
}
const char* name_of(pixel_layout p) { return p == pixel_layout::gray ? "gray" : p == pixel_layout::rgb ? "rgb" : "rgba"; }

// A single status line on a terminal: rows done, rate, ETA. Updated at most 4 times a second.
class progress_line {
public:
    progress_line(bool enabled, std::size_t total) : enabled_(enabled), total_(total), start_(clock::now()), last_(start_) {}
    void update(std::size_t done) {
        if (!enabled_) return;
        const auto now = clock::now();
        if (done != total_ && now - last_ < std::chrono::milliseconds(250)) return;
        last_ = now;
        const double secs = std::chrono::duration<double>(now - start_).count();
        const double rate = secs > 0 ? double(done) / secs : 0;
        const double eta = rate > 0 ? double(total_ - done) / rate : 0;
        std::fprintf(stderr, "\r%zu/%zu rows  %.1f samples/s  ETA %d:%02d   ", done, total_, rate, int(eta) / 60, int(eta) % 60);
        std::fflush(stderr);
        shown_ = true;
    }
    ~progress_line() {
        if (shown_) std::fputc('\n', stderr);
    }

private:
    using clock = std::chrono::steady_clock;
    bool enabled_;
    std::size_t total_;
    clock::time_point start_, last_;
    bool shown_ = false;
};

std::vector<detail::class_record> to_records(const std::vector<class_entry>& classes) {
    std::vector<detail::class_record> out;
    for (const auto& c : classes) out.push_back({c.name, c.has_colour, c.r, c.g, c.b});
    return out;
}

std::string rejected_csv(const std::vector<rejected_row>& rows) {
    auto quote = [](const std::string& s) {
        std::string q = "\"";
        for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        return q + "\"";
    };
    std::string out = "line,image,label,reason\n";
    for (const auto& r : rows)
        out += std::to_string(r.csv_line) + "," + quote(r.image) + "," + quote(r.label) + "," + quote(r.reason) + "\n";
    return out;
}

json make_report(const build_options& o, const input_list& input, const build_totals& t, double seconds,
                 const json& manifest, unsigned threads, std::uint64_t shards_written, std::uint64_t shards_reused) {
    json r = json::object();
    r.set("dataset", o.out_dir);
    r.set("content_hash", manifest.at("content_hash"));
    r.set("rows", input.size());
    r.set("records", t.records);
    r.set("reused_records", t.reused);
    r.set("decoded_records", t.records - t.reused);
    r.set("shards_written", shards_written);
    r.set("shards_reused", shards_reused);
    r.set("skipped", t.rejected.size());
    json rejected = json::array();
    for (const auto& row : t.rejected) {
        json e = json::object();
        e.set("line", row.csv_line);
        e.set("image", row.image);
        e.set("label", row.label);
        e.set("reason", row.reason);
        rejected.push(e);
    }
    r.set("rejected", rejected);
    r.set("seconds", seconds);
    r.set("threads", threads);
    r.set("samples_per_second", seconds > 0 ? double(t.records) / seconds : 0.0);
    r.set("bytes_in", t.bytes_in);
    r.set("bytes_decoded", t.decoded_bytes);
    r.set("bytes_stored", t.stored_bytes);
    r.set("bytes_out", manifest_bytes(manifest));
    r.set("compression_ratio", t.stored_bytes ? double(t.decoded_bytes) / double(t.stored_bytes) : 1.0);
    const bool seg = input.task == task_kind::segmentation;
    std::uint64_t total = 0;
    for (auto c : t.class_counts) total += c;
    json freq = json::array();
    for (std::size_t c = 0; c < input.classes.size(); ++c) {
        json e = json::object();
        e.set("class", input.classes[c].name);
        e.set(seg ? "pixels" : "samples", t.class_counts[c]);
        e.set("fraction", total ? double(t.class_counts[c]) / double(total) : 0.0);
        freq.push(e);
    }
    r.set("class_frequencies", freq);
    if (seg) r.set("unknown_colour_pixels", t.unknown_pixels);
    return r;
}

// Everything besides a row's own files that shapes its record's bytes. A previous build's
// records are taken back only when this matches; shard size and order do not enter into it.
std::string record_options_digest(const build_options& o, const detail::schema_record& schema,
                                  const std::vector<detail::class_record>& classes, const json& libraries) {
    json d = json::object();
    d.set("color", name_of(o.color));
    d.set("size", std::to_string(o.geometry.width) + "x" + std::to_string(o.geometry.height));
    d.set("resize", name_of(o.geometry.resize));
    d.set("crop", name_of(o.geometry.crop));
    d.set("filter", name_of(o.geometry.filter));
    d.set("unknown_label", o.unknown_label == unknown_colour_policy::error ? "error" : "ignore");
    d.set("compression", compression_name(o.codec));
    d.set("level", o.level);
    d.set("band_rows", std::uint64_t(o.band_rows));
    d.set("tool", SHARDPACK_VERSION);
    d.set("libraries", libraries);
    std::string bytes = d.dump(-1);
    unsigned char s[detail::schema_payload_size];
    detail::encode_schema(schema, s);
    bytes.append(reinterpret_cast<const char*>(s), sizeof s);
    const auto c = detail::encode_classes(classes);
    bytes.append(reinterpret_cast<const char*>(c.data()), c.size());
    return hex64(XXH3_64bits(bytes.data(), bytes.size()));
}

}  // namespace

std::uint64_t manifest_bytes(const json& manifest) {
    std::uint64_t n = 0;
    for (const auto& s : manifest.at("shards").as_array()) n += s.at("bytes").as_u64();
    return n;
}

json effective_options_json(const build_options& o, task_kind task) {
    json b = json::object();
    b.set("task", task == task_kind::segmentation ? "seg" : "cls");
    b.set("color", name_of(o.color));
    if (o.geometry.width) b.set("size", std::to_string(o.geometry.width) + "x" + std::to_string(o.geometry.height));
    else b.set("size", nullptr);
    b.set("resize", name_of(o.geometry.resize));
    b.set("crop", name_of(o.geometry.crop));
    b.set("filter", name_of(o.geometry.filter));
    if (task == task_kind::segmentation) {
        b.set("label_layout", o.label_layout == label_layout_option::one_hot ? "onehot" : "index");
        b.set("unknown_label", o.unknown_label == unknown_colour_policy::error ? "error" : "ignore");
    }
    b.set("compression", compression_name(o.codec));
    b.set("level", o.level);
    if (uses_band_frames(o.codec)) {
        if (o.band_rows) b.set("band_rows", std::uint64_t(o.band_rows));
        else b.set("band_rows", "auto");
    }
    b.set("shard_size", o.shard_size);
    b.set("shuffle", o.shuffle);
    b.set("seed", o.seed);
    b.set("on_error", o.on_error == error_policy::fail ? "fail" : "skip");
    b.set("image_col", o.input.image_col);
    b.set("label_col", o.input.label_col);
    return b;
}

build_result run_build(const build_options& options) {
    const auto started = std::chrono::steady_clock::now();
    const input_list input = load_input_list(options.input);
    if (input.empty()) throw input_error(options.input.csv_path + ": the list has no rows");
    // Before anything is written: one build at a time per output folder.
    const output_lock lock(options.out_dir);

    const unsigned threads = options.threads ? options.threads : unsigned(tbb::info::default_concurrency());
    const detail::schema_record schema = make_schema(options, input.task, input.classes.size());

    dataset_writer_options wo;
    wo.out_dir = options.out_dir;
    wo.shard_size = options.shard_size;
    wo.schema = schema;
    wo.classes = to_records(input.classes);
    wo.uses_zstd = uses_record_frames(options.codec);
    wo.uses_bands = uses_band_frames(options.codec);
    wo.build = effective_options_json(options, input.task);
    wo.libraries = library_versions();
    wo.input_digest = hex64(input.csv_digest);
    wo.options_digest = record_options_digest(options, schema, wo.classes, wo.libraries);
    std::unique_ptr<previous_build> previous;
    if (!options.full) {
        previous = previous_build::load(options.out_dir, wo.options_digest);
        spdlog::debug("{} records of the previous build can be taken back", previous->size());
    }
    dataset_writer writer(wo);

    const std::vector<std::uint32_t> order = sample_order(input.size(), options.shuffle, options.seed);
    const std::size_t tokens = std::max<std::size_t>(4, std::size_t(threads) * 4);
    std::vector<sample_job> jobs(tokens);
    const file_loader loader(previous.get());
    const sample_transformer transformer(options, schema, input.classes);
    tbb::enumerable_thread_specific<transform_scratch> scratch;
    tbb::enumerable_thread_specific<record_compressor> compressors(options.codec, options.level, schema, options.band_rows);
    const std::string csv_name = std::filesystem::path(options.input.csv_path).filename().string();
    record_sink sink(writer, options, csv_name, input.classes.size());

    build_result result;
    {
        progress_line progress(options.progress, input.size());
        std::size_t next = 0;
        tbb::task_arena arena(static_cast<int>(threads));
        arena.execute([&] {
            tbb::parallel_pipeline(
                tokens,
                tbb::make_filter<void, sample_job*>(tbb::filter_mode::serial_in_order,
                    [&](tbb::flow_control& fc) -> sample_job* {
                        if (next == order.size() || build_interrupt_signal.load()) {
                            fc.stop();
                            return nullptr;
                        }
                        // At most `tokens` jobs are in flight and they retire in order, so
                        // the slot next % tokens is free again.
                        sample_job* job = &jobs[next % tokens];
                        job->reset(next, input, order[next]);
                        ++next;
                        return job;
                    }) &
                tbb::make_filter<sample_job*, sample_job*>(tbb::filter_mode::parallel,
                    [&](sample_job* job) { loader(*job); return job; }) &
                tbb::make_filter<sample_job*, sample_job*>(tbb::filter_mode::parallel,
                    [&](sample_job* job) { transformer(*job, scratch.local()); return job; }) &
                tbb::make_filter<sample_job*, sample_job*>(tbb::filter_mode::parallel,
                    [&](sample_job* job) {
                        if (job->ok() && !job->reuse) compressors.local().compress(job->decoded, job->stored);
                        return job;
                    }) &
                tbb::make_filter<sample_job*, void>(tbb::filter_mode::serial_in_order,
                    [&](sample_job* job) {
                        sink(*job);
                        progress.update(std::size_t(sink.totals().rows));
                    }));
        });
    }
    result.interrupted_by = build_interrupt_signal.load();
    if (result.interrupted_by) {
        writer.discard();
        return result;
    }
    if (sink.totals().records == 0)
        throw build_stopped("no row could be packed (" + std::to_string(sink.totals().rejected.size()) +
                            " rejected); nothing was published");

    result.manifest = writer.publish();
    previous.reset();  // unmaps the shards the new manifest no longer names
    result.totals = sink.totals();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    result.report = make_report(options, input, result.totals, result.seconds, result.manifest, threads,
                                writer.shards_written(), writer.shards_reused());
    const std::string report_text = result.report.dump();
    write_file_atomically(options.out_dir + "/report.json", report_text);
    if (!options.report_path.empty()) write_file_atomically(options.report_path, report_text);
    const std::string rejected_path = options.out_dir + "/rejected.csv";
    if (options.on_error == error_policy::skip) write_file_atomically(rejected_path, rejected_csv(result.totals.rejected));
    else std::filesystem::remove(rejected_path);  // a list from an earlier build would mislead
    return result;
}

}  // namespace shardpack
