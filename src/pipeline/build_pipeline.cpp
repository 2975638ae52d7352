#include "pipeline/build_pipeline.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <oneapi/tbb/enumerable_thread_specific.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_pipeline.h>
#include <oneapi/tbb/task_arena.h>

#include "errors.hpp"
#include "dataset/dataset_writer.hpp"
#include "dataset/folder_ownership.hpp"
#include "dataset/previous_build.hpp"
#include "format/record_compressor.hpp"
#include "io/output_file.hpp"
#include "io/output_folder.hpp"
#include "io/output_lock.hpp"
#include "pipeline/build_checks.hpp"
#include "pipeline/build_manifest.hpp"
#include "pipeline/build_report.hpp"
#include "pipeline/file_loader.hpp"
#include "pipeline/library_versions.hpp"
#include "pipeline/memory_budget.hpp"
#include "pipeline/option_names.hpp"
#include "pipeline/progress_line.hpp"
#include "pipeline/sample_stream.hpp"
#include "pipeline/sample_order.hpp"
#include "pipeline/sample_transformer.hpp"
#include "shardpack/detail/hex.hpp"

namespace shardpack {
using detail::json;

std::atomic<int> build_interrupt_signal{0};

namespace {

// The order in which the build takes the list's rows; a part (--partition) takes its slice
// of it, which `wo.partition` then describes.
std::vector<std::uint32_t> rows_in_order(const build_options& options, const input_list& input, dataset_writer_options& wo) {
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
    return order;
}

// What the pipeline's filters share: the jobs in flight (one per token), the stages, their
// per-thread buffers and the sink that hands records to the writer, made in this order.
struct build_stages {
    build_stages(const build_options& options, const detail::schema_record& schema, const input_list& input,
                 mask_value_kind mask_values, const memory_plan& memory, const previous_build* previous, dataset_writer& writer)
        : jobs(memory.rows_in_flight),
          loader(previous, memory.per_row),
          transformer(options, schema, input.classes, mask_values, colors_command_hint(options), memory.per_row,
                      &build_interrupt_signal),
          compressors(options.codec, options.level, schema, options.band_rows),
          sink(writer, options, input.classes.size()) {}
    std::vector<sample_job> jobs;
    const file_loader loader;
    const sample_transformer transformer;
    tbb::enumerable_thread_specific<transform_scratch> scratch;
    tbb::enumerable_thread_specific<record_compressor> compressors;
    record_sink sink;
};

// Takes every row (or streamed sample) through the filters: read in order, load, transform
// and compress in parallel, sink in order, at most memory.rows_in_flight at a time. A build
// stopped by a row under --on-error skip keeps its rejected rows (keep_failed_build).
void run_filters(const build_options& options, input_list& input, const std::vector<std::uint32_t>& order,
                 sample_stream* stream, const memory_plan& memory, build_stages& stages) {
    const bool streamed = stream != nullptr;
    const unsigned threads = memory.threads;
    const std::size_t tokens = memory.rows_in_flight;
    std::vector<sample_job>& jobs = stages.jobs;
    const file_loader& loader = stages.loader;
    const sample_transformer& transformer = stages.transformer;
    auto& scratch = stages.scratch;
    auto& compressors = stages.compressors;
    record_sink& sink = stages.sink;
    try {
        progress_line progress(options.progress, streamed ? stream->announced_total() : order.size());  // a part: its own rows
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
                            if ((!streamed && next == order.size()) || build_interrupt_signal.load()) {
                                fc.stop();
                                return nullptr;
                            }
                            // At most `tokens` jobs are in flight and they retire in order, so
                            // the slot next % tokens is free again.
                            sample_job* job = &jobs[next % tokens];
                            if (streamed) {
                                if (!stream->next(*job, next, memory.per_row)) {
                                    fc.stop();
                                    return nullptr;
                                }
                            } else {
                                job->reset(next, input, order[next]);
                            }
                            ++next;
                            return job;
                        }) &
                    tbb::make_filter<sample_job*, sample_job*>(tbb::filter_mode::parallel,
                        [&](sample_job* job) { loader(*job); return job; }) &
                    tbb::make_filter<sample_job*, sample_job*>(tbb::filter_mode::parallel,
                        [&](sample_job* job) { transformer(*job, scratch.local()); return job; }) &
                    tbb::make_filter<sample_job*, sample_job*>(tbb::filter_mode::parallel,
                        [&](sample_job* job) {
                            if (job->ok() && !job->reuse) compressors.local().compress(job->decoded, job->layout, job->stored);
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
        input.stream_rows = sink.totals().rows;
        throw keep_failed_build(options, input, sink.totals(), e.what());
    }
}

// Publishes the dataset (the previous build's mappings go once its manifest is replaced),
// writes report.json and rejected.csv, and logs what the build did.
void publish_build(const build_options& options, const input_list& input, dataset_writer& writer,
                   std::unique_ptr<previous_build>& previous, const record_sink& sink, unsigned threads, bool index_masks,
                   const output_folder& folder, std::chrono::steady_clock::time_point started, build_result& result) {
    const auto id_changes = class_id_changes(options.out_dir, input, !options.input.classes_path.empty());
    result.manifest = writer.publish();
    previous.reset();  // unmaps the shards the new manifest no longer names
    result.totals = sink.totals();
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    result.report = make_report(options, input, result.totals, result.seconds, result.manifest, threads,
                                writer.shards_written(), writer.shards_reused(), index_masks, writer.bytes(), id_changes);
    log_build_messages(options, input, result.totals, index_masks, id_changes);
    if (result.totals.boxes_clipped || result.totals.boxes_dropped)
        spdlog::warn("boxes: {} clipped and {} dropped by the build's geometry (cut at the image's or the record's edge; "
                     "dropped: empty, or nothing left inside the record), in the {} rows decoded by this build",
                     result.totals.boxes_clipped, result.totals.boxes_dropped, result.totals.records - result.totals.reused);
    write_report_files(folder, options, result.report, result.totals.rejected);
}

}  // namespace

build_result run_build(const build_options& options) {
    const auto started = std::chrono::steady_clock::now();
    // A sample stream (--samples -, the Python writer) gives its samples as they come: the list
    // holds the task and the classes only.
    const bool streamed = options.input.from_stream;
    input_list input = streamed ? load_stream_input(options.input) : load_input_list(options.input);
    if (input.empty() && !streamed) throw input_error(options.input.csv_path + ": the list has no rows");
    for (const auto& note : input.notes) spdlog::info("{}", note);
    for (const auto& warning : input.warnings) spdlog::warn("{}", warning);
    const mask_value_kind mask_values =
        input.task == task_kind::segmentation ? resolve_mask_values(options.mask, input.classes, options.input.classes_path) : mask_value_kind::color;
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
    std::unique_ptr<sample_stream> stream;
    if (streamed) stream = std::make_unique<sample_stream>(input.classes.size(), input.stream_fields.get());
    detail::schema_record schema = make_schema(
        options, input.task, input.classes.size(),
        resolve_stored_pixels(options, input, memory.per_row, streamed ? stream->first(memory.per_row) : nullptr));
    schema.fields = input.fields.declarations();
    if (schema.image_dtype_bytes == 2 || schema.channel_order == detail::order_code::bands)
        spdlog::info("images stored as {} {} (format 1.4)", schema.image_dtype_bytes == 2 ? "uint16" : "uint8",
                     schema.channel_order == detail::order_code::bands ? std::to_string(schema.channels) + " bands"
                                                                       : std::string(word_of(color_words, options.color)));
    check_fixed_record_size(schema, memory);

    dataset_writer_options wo;
    wo.out_dir = options.out_dir;
    wo.folder = claim.folder;
    wo.remove_leftovers = claim.owned_before;
    wo.shard_size = options.shard_size;
    wo.schema = schema;
    wo.classes = to_class_records(input.classes);
    wo.codec = shard_codec_for(options.codec, schema, options.band_rows);
    wo.build = manifest_build_json(options, input, mask_values);
    wo.libraries = library_versions();
    wo.input_digest = detail::hex16(input.csv_digest);
    wo.options_digest = record_options_digest(options, schema, wo.classes, wo.libraries, word_of(mask_values_words, mask_values),
                                             input.classes);
    std::unique_ptr<previous_build> previous;
    // A streamed sample has no file to compare (file_loader takes no record back for it): its
    // build does not read the previous one.
    if (!options.full && !streamed) {
        previous = previous_build::load(options.out_dir, wo.options_digest, memory.limit / 8);
        spdlog::debug("{} records of the previous build can be taken back", previous->size());
    }
    const std::vector<std::uint32_t> order = rows_in_order(options, input, wo);
    dataset_writer writer(wo);
    build_stages stages(options, schema, input, mask_values, memory, previous.get(), writer);
    const record_sink& sink = stages.sink;
    run_filters(options, input, order, stream.get(), memory, stages);

    build_result result;
    if (streamed) {
        input.stream_rows = sink.totals().rows;
        writer.set_input_digest(detail::hex16(stream->digest()));
        if (input.stream_fields)
            for (const auto& note : input.stream_fields->notes()) spdlog::info("{}", note);
    }
    result.interrupted_by = build_interrupt_signal.load();
    if (result.interrupted_by) {
        writer.discard();
        return result;
    }
    // A part may hold no record (fewer rows than parts, or all of its rows rejected); the merge
    // refuses a whole build without one.
    if (sink.totals().records == 0 && !options.partition) {
        input.stream_rows = sink.totals().rows;
        throw keep_failed_build(options, input, sink.totals(),
                                "no row could be packed (" + std::to_string(sink.totals().rejected.size()) +
                                    " rejected); nothing was published");
    }

    publish_build(options, input, writer, previous, sink, threads, index_masks, *claim.folder, started, result);
    return result;
}

}  // namespace shardpack
