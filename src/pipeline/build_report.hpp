// What a build tells its user: report.json and rejected.csv (of a published build, and of one
// that stopped), warnings about classes that ended up empty and about mask values the class
// table lacks, the unknown values as report JSON, the most common reasons rows were rejected,
// and the command that lists every color of the input.
#pragma once
#include <string>
#include <vector>

#include "input/input_list.hpp"
#include "pipeline/build_options.hpp"
#include "pipeline/record_sink.hpp"
#include "errors.hpp"
#include "io/output_folder.hpp"
#include "shardpack/detail/json.hpp"

namespace shardpack {

// "shardpack colors --csv LIST --classes DICT" with the --root and --label-col the build was given.
std::string colors_command_hint(const build_options& options);

// One line each: every class with 0 pixels (segmentation) or 0 samples (classification); and,
// when pixels were mapped to the ignore value as unknown, each unknown color or value with its
// pixel and file counts, an example and (colors) the nearest class, saying which pixels were
// counted (unknown_pixels_counted).
std::vector<std::string> build_warnings(const input_list& input, const build_totals& totals, bool index_masks,
                                        const build_options& options);

// What the build's unknown-pixel counts cover, for its messages and report: without --size the
// whole masks, as `shardpack colors` counts them (then both give the same counts and examples);
// with --size the pixels of the records, after resizing and cropping, so `colors`, which counts
// whole masks, gives other counts and may give another first pixel.
std::string unknown_pixels_counted(const build_options& options);

// Classification: the id -> name -> count table, one line per class, for the log.
std::vector<std::string> class_id_table(const input_list& input, const build_totals& totals);

// Classification without --classes: when the dataset folder already holds a classification
// dataset whose class names differ from this list's (fewer names, or the same names at other
// ids), a warning per difference that says which ids moved. Read before publishing.
std::vector<std::string> class_id_changes(const std::string& out_dir, const input_list& input, bool classes_given);

// The report's unknown_colors / unknown_values array, most pixels first.
detail::json unknown_values_json(const build_totals& totals, bool index_masks);

// "12 x unknown color (N,N,N) at pixel (N,N) ...; 3 x cannot open: No such file or directory":
// the `top` most common reasons, counted with file names and numbers taken out.
std::string common_reasons(const std::vector<rejected_row>& rows, std::size_t top = 3);

// rejected.csv: line, image, label and reason of every rejected row (fields quoted).
std::string rejected_csv(const std::vector<rejected_row>& rows);

// report.json of a published build: its counts, sizes, speed, class frequencies, unknown
// colors or values, and warnings.
// `class_id_changes` (below) joins the warnings.
detail::json make_report(const build_options& options, const input_list& input, const build_totals& totals, double seconds,
                         const detail::json& manifest, unsigned threads, std::uint64_t shards_written,
                         std::uint64_t shards_reused, bool index_masks, std::uint64_t bytes_out,
                         const std::vector<std::string>& class_id_changes);

// The log of a published build: the class id table (classification), then every warning.
void log_build_messages(const build_options& options, const input_list& input, const build_totals& totals, bool index_masks,
                        const std::vector<std::string>& class_id_changes);

// report.json into the dataset folder (and at --report); rejected.csv with --on-error skip,
// else an earlier build's rejected.csv removed (it would mislead).
void write_report_files(const output_folder& folder, const build_options& options, const detail::json& report,
                        const std::vector<rejected_row>& rejected);

// With --on-error skip, a build that packs nothing, or that --max-errors stops, still leaves
// its rejected rows and a report ("published": false) in .partial/ and at --report, beside the
// unpublished shards (the old dataset keeps its own files). Returns the error to throw: the
// commonest reasons and where those files are.
build_stopped keep_failed_build(const build_options& options, const input_list& input, const build_totals& totals,
                                const std::string& what);

}  // namespace shardpack
