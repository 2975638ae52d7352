// Dataset totals of mask values (colors packed 0xRRGGBB, or index-mask values): pixels, files,
// and an example, the earliest row in list order that holds the value with the first pixel there.
// One code path for `shardpack colors` (every value of the whole masks) and `build` (the values
// its records map to the ignore value), so that where both look at the same pixels (a build
// without --size) they report the same counts and the same example.
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>
#include <unordered_map>

namespace shardpack {

struct value_total {
    std::uint64_t pixels = 0, files = 0;
    std::size_t row = std::numeric_limits<std::size_t>::max();  // the example's row (list order)
    std::uint32_t x = 0, y = 0;                                  // its first pixel holding the value
};

class value_totals {
public:
    // One file's count of `value`: `row` orders the files as the list does (a row index or a
    // CSV line; both grow in list order), (x, y) is the file's first pixel holding it. A value
    // not seen before is dropped once max_values are held (the caller says so). Returns true
    // when this file became the value's example.
    bool add(std::uint32_t value, std::uint64_t pixels, std::size_t row, std::uint32_t x, std::uint32_t y,
             std::size_t max_values = std::numeric_limits<std::size_t>::max()) {
        auto it = values_.find(value);
        if (it == values_.end()) {
            if (values_.size() >= max_values) return false;
            it = values_.emplace(value, value_total{}).first;
        }
        value_total& t = it->second;
        t.pixels += pixels;
        t.files += 1;
        if (row >= t.row) return false;
        t.row = row;
        t.x = x;
        t.y = y;
        return true;
    }
    // Adds another set of totals (per-thread totals into one).
    void merge(const value_totals& other) {
        for (const auto& [value, o] : other.values_) {
            value_total& t = values_[value];
            t.pixels += o.pixels;
            t.files += o.files;
            if (o.row < t.row) {
                t.row = o.row;
                t.x = o.x;
                t.y = o.y;
            }
        }
    }
    const std::unordered_map<std::uint32_t, value_total>& values() const { return values_; }
    std::size_t size() const { return values_.size(); }

private:
    std::unordered_map<std::uint32_t, value_total> values_;
};

}  // namespace shardpack
