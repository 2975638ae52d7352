#include "pipeline/record_sink.hpp"

namespace shardpack {

record_sink::record_sink(dataset_writer& writer, const build_options& options, std::string csv_name, std::size_t classes)
    : writer_(writer), options_(options), csv_name_(std::move(csv_name)) {
    totals_.class_counts.assign(classes, 0);
}

void record_sink::operator()(const sample_job& job) {
    ++totals_.rows;
    if (!job.ok()) {
        const std::string where = csv_name_ + ":" + std::to_string(job.row->csv_line) + ": ";
        if (options_.on_error == error_policy::fail) throw build_stopped(where + job.error);
        totals_.rejected.push_back({job.row->csv_line, job.row->key, job.row->label_key, job.error});
        if (options_.max_errors && totals_.rejected.size() >= options_.max_errors)
            throw build_stopped("stopping after " + std::to_string(totals_.rejected.size()) +
                                " rejected rows (--max-errors); the last: " + where + job.error);
        return;
    }
    writer_.add(job.stored);
    ++totals_.records;
    totals_.bytes_in += job.image_file.size() + (job.row->label_path.empty() ? 0 : job.label_file.size());
    totals_.decoded_bytes += job.stored.decoded_size;
    totals_.stored_bytes += job.stored.bytes.size();
    totals_.unknown_pixels += job.unknown_pixels;
    for (std::size_t c = 0; c < job.class_counts.size() && c < totals_.class_counts.size(); ++c)
        totals_.class_counts[c] += job.class_counts[c];
}

}  // namespace shardpack
