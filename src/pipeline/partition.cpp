#include "pipeline/partition.hpp"

#include <cstdlib>

#include "errors.hpp"

namespace shardpack {

row_slice partition_slice(std::uint64_t rows, const partition_spec& part) {
    const std::uint64_t base = rows / part.count, extra = rows % part.count;
    row_slice s;
    s.first = part.index * base + (part.index < extra ? part.index : extra);
    s.size = base + (part.index < extra ? 1 : 0);
    return s;
}

namespace {

// A decimal number with nothing around it, or nothing.
std::optional<std::uint64_t> parse_count(const std::string& text) {
    if (text.empty() || text.size() > 18) return std::nullopt;
    std::uint64_t v = 0;
    for (char c : text) {
        if (c < '0' || c > '9') return std::nullopt;
        v = v * 10 + std::uint64_t(c - '0');
    }
    return v;
}

void check_range(const partition_spec& p, const std::string& where) {
    if (p.count == 0) throw usage_error(where + ": the number of parts N must be at least 1");
    if (p.index >= p.count)
        throw usage_error(where + ": part " + std::to_string(p.index) + " is out of range for " + std::to_string(p.count) +
                          " parts (0 <= K < N)");
}

}  // namespace

partition_spec parse_partition(const std::string& text, const env_lookup& lookup) {
    if (text != "slurm") {
        const auto slash = text.find('/');
        const auto k = slash == std::string::npos ? std::nullopt : parse_count(text.substr(0, slash));
        const auto n = slash == std::string::npos ? std::nullopt : parse_count(text.substr(slash + 1));
        if (!k || !n) throw usage_error("--partition '" + text + "': expected K/N (e.g. 3/16) or slurm");
        const partition_spec p{*k, *n};
        check_range(p, "--partition " + text);
        return p;
    }
    const env_lookup get = lookup ? lookup : env_lookup([](const char* name) { return std::getenv(name); });
    auto value = [&](const char* name, bool required) -> std::optional<std::uint64_t> {
        const char* v = get(name);
        if (!v || !*v) {
            if (required)
                throw usage_error(std::string("--partition slurm: ") + name +
                                  " is not set: run this inside a Slurm job array (sbatch --array=0-N-1), or give --partition K/N");
            return std::nullopt;
        }
        const auto n = parse_count(v);
        if (!n) throw usage_error(std::string("--partition slurm: ") + name + "='" + v + "' is not a non-negative integer");
        return n;
    };
    const std::uint64_t id = *value("SLURM_ARRAY_TASK_ID", true);
    const std::uint64_t count = *value("SLURM_ARRAY_TASK_COUNT", true);
    const auto min_given = value("SLURM_ARRAY_TASK_MIN", false);
    const std::uint64_t min = min_given.value_or(0);
    const auto max = value("SLURM_ARRAY_TASK_MAX", false);
    const auto step = value("SLURM_ARRAY_TASK_STEP", false);
    const auto ids = [&] {
        return "SLURM_ARRAY_TASK_ID " + std::to_string(id) + ", SLURM_ARRAY_TASK_MIN " +
               (min_given ? std::to_string(min) : std::string("unset (0)")) + ", SLURM_ARRAY_TASK_MAX " +
               (max ? std::to_string(*max) : std::string("unset")) + ", SLURM_ARRAY_TASK_COUNT " + std::to_string(count);
    };
    // Variables that contradict each other are not a job array Slurm made (a script that set
    // some of them, or a copy from another job): no part is guessed from them.
    const std::string not_one_array = " (" + ids() + "): these are not the variables of one job array";
    if (max && *max < min)
        throw usage_error("--partition slurm: SLURM_ARRAY_TASK_MAX " + std::to_string(*max) + " is below SLURM_ARRAY_TASK_MIN " +
                          std::to_string(min) + not_one_array);
    if (id < min)
        throw usage_error("--partition slurm: SLURM_ARRAY_TASK_ID " + std::to_string(id) + " is below SLURM_ARRAY_TASK_MIN " +
                          std::to_string(min) + not_one_array);
    if (max && id > *max)
        throw usage_error("--partition slurm: SLURM_ARRAY_TASK_ID " + std::to_string(id) + " is above SLURM_ARRAY_TASK_MAX " +
                          std::to_string(*max) + not_one_array);
    if (step && *step != 1)
        throw usage_error("--partition slurm: the job array has a step of " + std::to_string(*step) +
                          " (SLURM_ARRAY_TASK_STEP); parts need consecutive task ids, e.g. --array=0-" +
                          std::to_string(count ? count - 1 : 0));
    if (max && *max - min + 1 < count)  // (*max - min + 1 cannot wrap: ids are below 10^18)
        throw usage_error("--partition slurm: SLURM_ARRAY_TASK_COUNT " + std::to_string(count) + " is more than the " +
                          std::to_string(*max - min + 1) + " ids " + std::to_string(min) + ".." + std::to_string(*max) +
                          not_one_array);
    if (max && *max - min + 1 != count)
        throw usage_error("--partition slurm: task ids " + std::to_string(min) + ".." + std::to_string(*max) + " are not " +
                          std::to_string(count) + " consecutive ids (SLURM_ARRAY_TASK_COUNT): an array with holes "
                          "(e.g. --array=0,2,5) cannot name the parts; use a range such as --array=0-" +
                          std::to_string(count ? count - 1 : 0));
    const partition_spec p{id - min, count};
    check_range(p, "--partition slurm (SLURM_ARRAY_TASK_ID " + std::to_string(id) + ", SLURM_ARRAY_TASK_MIN " +
                       std::to_string(min) + ", SLURM_ARRAY_TASK_COUNT " + std::to_string(count) + ")");
    return p;
}

}  // namespace shardpack
