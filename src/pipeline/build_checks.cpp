#include "pipeline/build_checks.hpp"

#include <filesystem>

#include "errors.hpp"
#include "dataset/dataset_names.hpp"

namespace shardpack {

void check_fixed_record_size(const detail::schema_record& s, const memory_plan& memory) {
    if (s.fixed_width == 0) return;
    const std::uint64_t pixels = std::uint64_t(s.fixed_width) * s.fixed_height;
    const std::uint64_t label_bytes = detail::label_bytes_for(s, 1);  // per pixel
    const std::uint64_t image_bytes = std::uint64_t(s.channels) * s.image_dtype_bytes;  // per pixel
    const std::uint64_t bytes = pixels * (image_bytes + label_bytes);
    if (bytes >= detail::max_record_bytes)
        throw usage_error("--size " + std::to_string(s.fixed_width) + "x" + std::to_string(s.fixed_height) + ": each record would be " +
                          std::to_string(bytes) + " bytes (" + std::to_string(image_bytes) + " image + " +
                          std::to_string(label_bytes) + " label bytes per pixel), over the format's 4 GiB record limit");
    if (2 * bytes > memory.per_row)  // the payload and its compressed copy
        throw usage_error("--size " + std::to_string(s.fixed_width) + "x" + std::to_string(s.fixed_height) + ": each record would be " +
                          format_bytes(bytes) + "; twice that does not fit in what a row may take, " + format_bytes(memory.per_row) +
                          " (--memory-limit " + format_bytes(memory.limit) + " over " + std::to_string(memory.threads) +
                          " threads and " + std::to_string(memory.rows_in_flight) + " rows in flight)");
}

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

}  // namespace shardpack
