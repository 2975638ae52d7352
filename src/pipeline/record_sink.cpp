#include "pipeline/record_sink.hpp"

#include "dataset/previous_build.hpp"

namespace shardpack {

record_sink::record_sink(dataset_writer& writer, const build_options& options, std::size_t classes)
    : writer_(writer), options_(options) {
    totals_.class_counts.assign(classes, 0);
    totals_.tolerance_counts.assign(classes, 0);
}

void record_sink::operator()(const sample_job& job) {
    ++totals_.rows;
    if (!job.ok()) {
        const std::string where = row_origin(options_.input, job.row.csv_line, job.row.key) + ": ";
        if (options_.on_error == error_policy::fail) throw build_stopped(where + job.error);
        totals_.rejected.push_back({job.row.csv_line, std::string(job.row.key), std::string(job.row.label_key), job.error});
        if (options_.max_errors && totals_.rejected.size() >= options_.max_errors)
            throw build_stopped("stopping after " + std::to_string(totals_.rejected.size()) +
                                " rejected rows (--max-errors); the last: " + where + job.error);
        return;
    }
    const record_fingerprint& fp = job.fingerprint;
    const record_view view = job.reuse ? job.reuse->view() : view_of(job.stored);
    writer_.add(view, job.key_hash, fp, job.reuse ? job.reuse->origin : record_origin{});
    ++totals_.records;
    totals_.reused += job.reuse != nullptr;
    totals_.bytes_in += fp.image.size + fp.label.size;
    totals_.decoded_bytes += view.decoded_size;
    totals_.stored_bytes += view.stored_size;
    totals_.unknown_pixels += fp.unknown_pixels;
    totals_.boxes_clipped += job.boxes_clipped;
    totals_.boxes_dropped += job.boxes_dropped;
    if (job.lost_bits && !job.reuse) {
        if (!totals_.lost_bits || job.row.csv_line < totals_.lost_bits_line) {
            totals_.lost_bits_example = std::string(job.row.key);
            totals_.lost_bits_line = job.row.csv_line;
        }
        ++totals_.lost_bits;
    }
    for (const auto& [c, n] : fp.class_counts)
        if (c < totals_.class_counts.size()) totals_.class_counts[c] += n;
    for (const auto& [c, n] : fp.tolerance_counts)
        if (c < totals_.tolerance_counts.size()) totals_.tolerance_counts[c] += n;
    for (const auto& u : fp.unknown_values)
        if (totals_.unknown_values.add(u.value, u.pixels, job.row.csv_line, u.x, u.y, build_totals::max_unknown_listed))
            totals_.unknown_examples[u.value] = std::string(job.row.label_key);
}

}  // namespace shardpack
