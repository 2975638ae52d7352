#include "pipeline/build_pipeline.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include "errors.hpp"
#include "format/dataset_writer.hpp"
#include "format/folder_ownership.hpp"
#include "io/output_file.hpp"
#include "io/output_folder.hpp"
#include "io/output_lock.hpp"
#include "format/record_compressor.hpp"
#include "pipeline/file_loader.hpp"
#include "pipeline/option_names.hpp"
#include "pipeline/library_versions.hpp"
#include "pipeline/memory_budget.hpp"
#include "pipeline/previous_build.hpp"
#include "shardpack/detail/xxhash.hpp"
#include "pipeline/sample_order.hpp"
#include "pipeline/sample_transformer.hpp"
#include "pipeline/build_messages.hpp"

namespace shardpack {
using detail::json;

std::atomic<int> build_interrupt_signal{0};

namespace {


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
    for (const auto& c : classes) out.push_back({c.name, c.has_color, c.r, c.g, c.b});
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

// The report's "rejected" array: line, image, label and reason of every rejected row.
json rejected_rows_json(const std::vector<rejected_row>& rows) {
    json rejected = json::array();
    for (const auto& row : rows) {
        json e = json::object();
        e.set("line", row.csv_line);
        e.set("image", row.image);
        e.set("label", row.label);
        e.set("reason", row.reason);
        rejected.push(e);
    }
    return rejected;
}

json make_report(const build_options& o, const input_list& input, const build_totals& t, double seconds,
                 const json& manifest, unsigned threads, std::uint64_t shards_written, std::uint64_t shards_reused,
                 bool index_masks, std::uint64_t bytes_out) {
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
    r.set("rejected", rejected_rows_json(t.rejected));
    r.set("seconds", seconds);
    r.set("threads", threads);
    r.set("samples_per_second", seconds > 0 ? double(t.records) / seconds : 0.0);
    r.set("bytes_in", t.bytes_in);
    r.set("bytes_decoded", t.decoded_bytes);
    r.set("bytes_stored", t.stored_bytes);
    r.set("bytes_out", bytes_out);
    r.set("compression_ratio", t.stored_bytes ? double(t.decoded_bytes) / double(t.stored_bytes) : 1.0);
    const bool seg = input.task == task_kind::segmentation;
    std::uint64_t total = 0;
    for (auto c : t.class_counts) total += c;
    json freq = json::array();
    for (std::size_t c = 0; c < input.classes.size(); ++c) {
        json e = json::object();
        e.set("class", input.classes[c].name);
        e.set(seg ? "pixels" : "samples", t.class_counts[c]);
        if (seg) {
            const std::uint64_t tolerant = c < t.tolerance_counts.size() ? t.tolerance_counts[c] : 0;
            e.set("exact_pixels", t.class_counts[c] - std::min(tolerant, t.class_counts[c]));
            e.set("tolerance_pixels", tolerant);
        }
        e.set("fraction", total ? double(t.class_counts[c]) / double(total) : 0.0);
        freq.push(e);
    }
    r.set("class_frequencies", freq);
    if (seg) r.set("unknown_color_pixels", t.unknown_pixels);
    if (seg) r.set(index_masks ? "unknown_values" : "unknown_colors", unknown_values_json(t, index_masks));
    if (seg) r.set("unknown_pixels_counted", unknown_pixels_counted(o));
    json warnings = json::array();
    for (const auto& w : build_warnings(input, t, index_masks, o)) warnings.push(w);
    r.set("warnings", warnings);
    return r;
}

// Everything besides a row's own files that shapes its record's bytes. A previous build's
// records are taken back only when this matches; shard size and order do not enter into it.
std::string record_options_digest(const build_options& o, const detail::schema_record& schema,
                                  const std::vector<detail::class_record>& classes, const json& libraries,
                                  const char* mask_values, const std::vector<class_entry>& table) {
    json d = json::object();
    d.set("color", word_of(color_words, o.color));
    d.set("size", std::to_string(o.geometry.width) + "x" + std::to_string(o.geometry.height));
    d.set("resize", word_of(resize_words, o.geometry.resize));
    d.set("crop", word_of(crop_words, o.geometry.crop));
    d.set("filter", word_of(filter_words, o.geometry.filter));
    d.set("unknown_label", word_of(unknown_label_words, o.unknown_label));
    d.set("mask_values", mask_values);
    d.set("color_tolerance", o.color_tolerance);
    json ignored = json::array();
    for (auto v : o.ignore_values) ignored.push(unsigned(v));
    d.set("ignore_values", ignored);
    d.set("compression", word_of(compression_words, o.codec));
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
    for (const auto& e : table) bytes += std::to_string(e.value) + ",";  // index masks' values
    return hex64(XXH3_64bits(bytes.data(), bytes.size()));
}

// A fixed-size record (image and labels) must fit the format's 4 GiB record limit: refused
// before any row is read, as bad usage.
void check_fixed_record_size(const detail::schema_record& s, const memory_plan& memory) {
    if (s.fixed_width == 0) return;
    const std::uint64_t pixels = std::uint64_t(s.fixed_width) * s.fixed_height;
    const std::uint64_t label_bytes = s.label_layout == detail::layout_code::one_hot ? std::uint64_t(s.class_count)
                                    : s.label_layout == detail::layout_code::index ? s.label_dtype_bytes : 0;
    const std::uint64_t bytes = pixels * (s.channels + label_bytes);
    if (bytes >= detail::max_record_bytes)
        throw usage_error("--size " + std::to_string(s.fixed_width) + "x" + std::to_string(s.fixed_height) + ": each record would be " +
                          std::to_string(bytes) + " bytes (" + std::to_string(s.channels) + " image + " +
                          std::to_string(label_bytes) + " label bytes per pixel), over the format's 4 GiB record limit");
    if (2 * bytes > memory.per_row)  // the payload and its compressed copy
        throw usage_error("--size " + std::to_string(s.fixed_width) + "x" + std::to_string(s.fixed_height) + ": each record would be " +
                          format_bytes(bytes) + "; twice that does not fit in what a row may take, " + format_bytes(memory.per_row) +
                          " (--memory-limit " + format_bytes(memory.limit) + " over " + std::to_string(memory.threads) +
                          " threads and " + std::to_string(memory.rows_in_flight) + " rows in flight)");
}

// The build writes manifest.json, report.json, rejected.csv, ... and shards into the output
// folder and removes some of them: refuse when an input is one of those files, before anything
// is written. Only paths whose last component is such a name are looked at on disk.
void refuse_inputs_in_output(const output_claim& claim, const build_options& o, const input_list& input) {
    // --csv - (standard input) and --images have no list file to protect.
    if (!o.input.csv_path.empty() && o.input.csv_path != "-")
        refuse_input_in_output(claim, o.input.csv_path, "--csv " + o.input.csv_path);
    if (!o.input.classes_path.empty()) refuse_input_in_output(claim, o.input.classes_path, "--classes " + o.input.classes_path);
    if (!o.report_path.empty()) {
        refuse_input_in_output(claim, o.report_path, "--report " + o.report_path);
        std::error_code ec;
        for (const std::string& in : {o.input.csv_path, o.input.classes_path})
            if (!in.empty() && std::filesystem::equivalent(o.report_path, in, ec))
                throw usage_error("--report " + o.report_path + " is the input " + in + "; the report would overwrite it");
    }
    std::string path;
    for (std::size_t i = 0; i < input.size(); ++i) {
        input.image_path(i, path);
        if (may_be_dataset_file(path))
            refuse_input_in_output(claim, path, row_origin(o.input, input.row(i).csv_line, input.row(i).key) + ": image " + path);
        input.label_path(i, path);
        if (!path.empty() && may_be_dataset_file(path))
            refuse_input_in_output(claim, path, row_origin(o.input, input.row(i).csv_line, input.row(i).key) + ": mask " + path);
    }
}

}  // namespace

std::string partition_options_digest(const json& build, const std::string& record_options_digest) {
    const std::string bytes = build.dump(-1) + "\n" + record_options_digest;
    return hex64(XXH3_64bits(bytes.data(), bytes.size()));
}

json partition_json(const partition_spec& part, const row_slice& slice, std::uint64_t rows, const json& build,
                    const std::string& record_options_digest) {
    json p = json::object();
    p.set("index", part.index);
    p.set("count", part.count);
    p.set("rows", rows);
    p.set("first_row", slice.first);
    p.set("part_rows", slice.size);
    p.set("options_digest", partition_options_digest(build, record_options_digest));
    p.set("records_digest", record_options_digest);
    return p;
}

json effective_options_json(const build_options& o, task_kind task) {
    json b = json::object();
    b.set("task", word_of(task_words, task));
    b.set("color", word_of(color_words, o.color));
    if (o.geometry.width) b.set("size", std::to_string(o.geometry.width) + "x" + std::to_string(o.geometry.height));
    else b.set("size", nullptr);
    b.set("resize", word_of(resize_words, o.geometry.resize));
    b.set("crop", word_of(crop_words, o.geometry.crop));
    b.set("filter", word_of(filter_words, o.geometry.filter));
    if (task == task_kind::segmentation) {
        b.set("label_layout", word_of(label_layout_words, o.label_layout));
        b.set("unknown_label", word_of(unknown_label_words, o.unknown_label));
    }
    b.set("compression", word_of(compression_words, o.codec));
    b.set("level", o.level);
    if (uses_band_frames(o.codec)) {
        if (o.band_rows) b.set("band_rows", std::uint64_t(o.band_rows));
        else b.set("band_rows", "auto");
    }
    b.set("shard_size", o.shard_size);
    b.set("shuffle", o.shuffle);
    b.set("seed", o.seed);
    b.set("on_error", word_of(on_error_words, o.on_error));
    b.set("image_col", o.input.image_col);
    b.set("label_col", o.input.label_col);
    return b;
}

build_result run_build(const build_options& options) {
    const auto started = std::chrono::steady_clock::now();
    const input_list input = load_input_list(options.input);
    if (input.empty()) throw input_error(options.input.csv_path + ": the list has no rows");
    const mask_value_kind mask_values =
        input.task == task_kind::segmentation ? resolve_mask_values(options, input.classes) : mask_value_kind::color;
    const bool index_masks = mask_values == mask_value_kind::index;
    // Before anything is written: is the folder shardpack's to write (exit 2 if not), would the
    // build overwrite an input, then one build at a time per output folder.
    const output_claim claim = claim_output_folder(options.out_dir, options.force,
                                                   {options.input.csv_path, options.input.classes_path});
    refuse_inputs_in_output(claim, options, input);
    const output_lock lock(*claim.folder);

    const memory_plan memory = plan_memory(options.memory_limit ? options.memory_limit : default_memory_limit(),
                                           options.threads, unsigned(tbb::info::default_concurrency()));
    for (const auto& note : memory.notes) spdlog::warn("{}", note);
    spdlog::debug("memory limit {}: {} threads, {} rows in flight, {} per row", format_bytes(memory.limit), memory.threads,
                  memory.rows_in_flight, format_bytes(memory.per_row));
    const unsigned threads = memory.threads;
    const detail::schema_record schema = make_schema(options, input.task, input.classes.size());
    check_fixed_record_size(schema, memory);

    dataset_writer_options wo;
    wo.out_dir = options.out_dir;
    wo.folder = claim.folder;
    wo.remove_leftovers = claim.owned_before;
    wo.shard_size = options.shard_size;
    wo.schema = schema;
    wo.classes = to_records(input.classes);
    wo.uses_zstd = uses_record_frames(options.codec);
    wo.uses_bands = uses_band_frames(options.codec);
    wo.uses_region_bands = uses_region_bands(options.codec, schema, options.band_rows);
    wo.build = effective_options_json(options, input.task);
    wo.libraries = library_versions();
    wo.input_digest = hex64(input.csv_digest);
    const char* mask_values_name = word_of(mask_values_words, mask_values);
    if (input.task == task_kind::segmentation) {
        wo.build.set("mask_values", mask_values_name);
        if (!index_masks) wo.build.set("color_tolerance", options.color_tolerance);
        if (index_masks) {
            json ignored = json::array();
            for (auto v : options.ignore_values) ignored.push(unsigned(v));
            wo.build.set("ignore_values", ignored);
            json values = json::array();
            for (std::size_t c = 0; c < input.classes.size(); ++c)
                values.push(input.classes[c].value >= 0 ? unsigned(input.classes[c].value) : unsigned(c));
            wo.build.set("class_values", values);
        }
    }
    wo.options_digest = record_options_digest(options, schema, wo.classes, wo.libraries, mask_values_name, input.classes);
    std::unique_ptr<previous_build> previous;
    if (!options.full) {
        previous = previous_build::load(options.out_dir, wo.options_digest, memory.limit / 8);
        spdlog::debug("{} records of the previous build can be taken back", previous->size());
    }
    std::vector<std::uint32_t> order = sample_order(input.size(), options.shuffle, options.seed);
    if (options.partition) {
        // A slice of the one global order: the parts of a shuffled build are slices of the
        // same permutation, and `shardpack merge` puts them back in this order.
        const row_slice slice = partition_slice(order.size(), *options.partition);
        order.erase(order.begin() + std::ptrdiff_t(slice.first + slice.size), order.end());
        order.erase(order.begin(), order.begin() + std::ptrdiff_t(slice.first));
        order.shrink_to_fit();
        wo.partition = partition_json(*options.partition, slice, input.size(), wo.build, wo.options_digest);
        spdlog::debug("part {} of {}: rows {}..{} of the output order", options.partition->index, options.partition->count,
                      slice.first, slice.first + slice.size);
    }
    dataset_writer writer(wo);
    const std::size_t tokens = memory.rows_in_flight;
    std::vector<sample_job> jobs(tokens);
    const file_loader loader(previous.get(), memory.per_row);
    const sample_transformer transformer(options, schema, input.classes, mask_values, colors_command_hint(options),
                                         memory.per_row, &build_interrupt_signal);
    tbb::enumerable_thread_specific<transform_scratch> scratch;
    tbb::enumerable_thread_specific<record_compressor> compressors(options.codec, options.level, schema, options.band_rows);
    record_sink sink(writer, options, input.classes.size());

    build_result result;
    // With --on-error skip, a build that packs nothing, or that --max-errors stops, still leaves
    // its rejected rows and a report, beside the unpublished shards (the old dataset keeps its
    // own files), and says the commonest reasons.
    auto keep_failure = [&](const std::string& what) -> build_stopped {
        const build_totals& t = sink.totals();
        const std::string dir = options.out_dir + "/" + dataset_writer::partial_dir;
        json report = json::object();
        report.set("dataset", options.out_dir);
        report.set("published", false);
        report.set("error", what);
        report.set("rows", input.size());
        report.set("rows_seen", t.rows);
        report.set("records", t.records);
        report.set("skipped", t.rejected.size());
        report.set("common_reasons", common_reasons(t.rejected, 5));
        report.set("rejected", rejected_rows_json(t.rejected));
        std::string where;
        try {
            write_file_atomically(dir + "/rejected.csv", rejected_csv(t.rejected));
            write_file_atomically(dir + "/report.json", report.dump());
            where = " Rejected rows: " + dir + "/rejected.csv; report: " + dir + "/report.json";
            if (!options.report_path.empty()) {
                write_file_atomically(options.report_path, report.dump());
                where += " and " + options.report_path;
            }
            where += ".";
        } catch (const std::exception& e) {
            where = " (the rejected rows could not be written: " + std::string(e.what()) + ")";
        }
        return build_stopped(what + ". Most common reasons: " + common_reasons(t.rejected) + "." + where);
    };
    try {
        progress_line progress(options.progress, order.size());  // a part: its own rows
        std::size_t next = 0;
        // TBB's default allows one thread per core in all; --threads may ask for more (up to 4 x
        // the cores, for slow file systems), which it then really gets.
        const tbb::global_control allow(tbb::global_control::max_allowed_parallelism, threads);
        tbb::task_arena arena(static_cast<int>(threads));
        try {
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
        } catch (const std::exception&) {
            // A row stopped by the signal fails as "interrupted": the signal is the news.
            if (!build_interrupt_signal.load()) throw;
        }
    } catch (const build_stopped& e) {
        if (options.on_error != error_policy::skip || sink.totals().rejected.empty()) throw;
        throw keep_failure(e.what());
    }
    result.interrupted_by = build_interrupt_signal.load();
    if (result.interrupted_by) {
        writer.discard();
        return result;
    }
    // A part may hold no record (fewer rows than parts, or all of its rows rejected); the merge
    // refuses a whole build without one.
    if (sink.totals().records == 0 && !options.partition)
        throw keep_failure("no row could be packed (" + std::to_string(sink.totals().rejected.size()) +
                           " rejected); nothing was published");

    const auto id_changes = class_id_changes(options.out_dir, input, !options.input.classes_path.empty());
    result.manifest = writer.publish();
    previous.reset();  // unmaps the shards the new manifest no longer names
    result.totals = sink.totals();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    result.report = make_report(options, input, result.totals, result.seconds, result.manifest, threads,
                                writer.shards_written(), writer.shards_reused(), index_masks, writer.bytes());
    if (!id_changes.empty()) {
        json warnings = result.report.at("warnings");
        for (const auto& w : id_changes) warnings.push(w);
        result.report.set("warnings", warnings);
    }
    if (input.task == task_kind::classification)
        for (const auto& line : class_id_table(input, result.totals)) spdlog::info("{}", line);
    for (const auto& w : build_warnings(input, result.totals, index_masks, options)) spdlog::warn("{}", w);
    for (const auto& w : id_changes) spdlog::warn("{}", w);
    const std::string report_text = result.report.dump();
    claim.folder->write_atomically("report.json", report_text);
    if (!options.report_path.empty()) write_file_atomically(options.report_path, report_text);
    if (options.on_error == error_policy::skip) claim.folder->write_atomically("rejected.csv", rejected_csv(result.totals.rejected));
    else claim.folder->remove("rejected.csv");  // a list from an earlier build would mislead
    return result;
}

}  // namespace shardpack
