// What the benchmark programs in tools/ share, written once: medians, wall-clock seconds,
// numbers printed for their JSON lines, the process's memory figures, and reading their options (each tool keeps its own
// usage text; a bad option calls it, which prints it and exits 2).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

namespace shardpack::bench {

using clock_type = std::chrono::steady_clock;

inline double seconds_between(clock_type::time_point from, clock_type::time_point to) {
    return std::chrono::duration<double>(to - from).count();
}

inline double seconds_since(clock_type::time_point t0) { return seconds_between(t0, clock_type::now()); }

// The median (the mean of the middle two for an even count); 0 for no values.
inline double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// `v` with `digits` decimals, for a JSON line.
inline std::string fixed(double v, int digits = 4) {
    char b[64];
    std::snprintf(b, sizeof b, "%.*f", digits, v);
    return b;
}

// A memory figure of this process from /proc/self/status, in KiB as the kernel gives it
// ("VmRSS": resident now; "VmHWM": the peak so far); -1 where it cannot be read.
inline long long process_status_kb(const char* field) {
    std::FILE* f = std::fopen("/proc/self/status", "r");
    if (!f) return -1;
    const std::size_t n = std::strlen(field);
    char line[256];
    long long kb = -1;
    while (std::fgets(line, sizeof line, f))
        if (std::strncmp(line, field, n) == 0 && line[n] == ':') {
            kb = std::strtoll(line + n + 1, nullptr, 10);
            break;
        }
    std::fclose(f);
    return kb;
}

// "a,b,c" -> {"a", "b", "c"}.
inline std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::size_t at = 0;
    while (at <= s.size()) {
        const std::size_t comma = std::min(s.find(',', at), s.size());
        out.push_back(s.substr(at, comma - at));
        at = comma + 1;
    }
    return out;
}

// The tool's usage: prints `why` and the usage text, then exits 2.
using usage_function = void (*)(const std::string& why);

// Walks argv once:
//   for (arg_walker args(argc, argv, usage); args.next();)
//       if (args.is("--passes")) passes = unsigned(args.uint_value(1, 100000));
//       else if (args.is_option()) args.fail("unknown option " + args.arg());
//       else folder = args.arg();
class arg_walker {
public:
    arg_walker(int argc, char** argv, usage_function usage, int first = 1)
        : argc_(argc), argv_(argv), usage_(usage), i_(first - 1) {}

    bool next() {
        if (++i_ >= argc_) return false;
        arg_ = argv_[i_];
        return true;
    }
    const std::string& arg() const { return arg_; }
    bool is(const char* option) const { return arg_ == option; }
    bool is_option() const { return !arg_.empty() && arg_[0] == '-'; }

    [[noreturn]] void fail(const std::string& why) const {
        usage_(why);
        std::exit(2);  // a usage function that returned
    }

    // The option's value: the next argument.
    std::string value() {
        if (i_ + 1 >= argc_) fail(arg_ + " needs a value");
        return argv_[++i_];
    }

    // The value as an integer in [min, max] (decimal digits only).
    std::uint64_t uint_value(std::uint64_t min, std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) {
        return parse_uint(arg_, value(), min, max);
    }
    std::uint64_t parse_uint(const std::string& what, const std::string& v, std::uint64_t min,
                             std::uint64_t max = std::numeric_limits<std::uint64_t>::max()) const {
        try {
            std::size_t used = 0;
            if (v.empty() || v[0] == '-' || v[0] == '+' || v[0] == ' ') throw std::invalid_argument(v);
            const unsigned long long n = std::stoull(v, &used);
            if (used != v.size() || n < min || n > max) throw std::invalid_argument(v);
            return n;
        } catch (const std::exception&) {
            const std::string range = max == std::numeric_limits<std::uint64_t>::max()
                                          ? ">= " + std::to_string(min)
                                          : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
            fail(what + " needs an integer " + range + ", not \"" + v + "\"");
        }
    }

    // The value as a number of seconds, above 0 and at most a day.
    double seconds_value() {
        const std::string v = value();
        try {
            std::size_t used = 0;
            const double d = std::stod(v, &used);
            if (used != v.size() || !(d > 0) || d > 86400) throw std::invalid_argument(v);
            return d;
        } catch (const std::exception&) {
            fail(arg_ + " needs a positive number of seconds, not \"" + v + "\"");
        }
    }

    // The value "on" or "off".
    bool on_off_value() {
        const std::string v = value();
        if (v == "on") return true;
        if (v == "off") return false;
        fail(arg_ + " is on or off, not \"" + v + "\"");
    }

private:
    int argc_;
    char** argv_;
    usage_function usage_;
    int i_;
    std::string arg_;
};

}  // namespace shardpack::bench
