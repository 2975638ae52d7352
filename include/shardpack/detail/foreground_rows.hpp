// crop_position::foreground's per-record foreground counts per row, kept by the dataset handle
// once counted, so that later epochs choose a record's window from them without decompressing
// or scanning its whole label (only the window's rows, as a uniform crop). The counts are exact,
// so the windows are the same whether they come from here or from a fresh scan.
// Part of reader.hpp (through dataset_state.hpp): include <shardpack/reader.hpp>, not this file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace shardpack::detail {

class foreground_rows {
public:
    using counts = std::shared_ptr<const std::vector<std::uint32_t>>;
    // At most this many bytes of counts (4 a row: 4.3 KB for a 1080-row record); records beyond
    // are counted again at each read.
    static constexpr std::size_t max_bytes = std::size_t(64) << 20;

    counts find(std::size_t index, const std::vector<std::uint32_t>& background) const {
        std::lock_guard<std::mutex> lock(m_);
        if (background != background_) return nullptr;
        const auto it = rows_.find(index);
        return it == rows_.end() ? nullptr : it->second;
    }
    void keep(std::size_t index, const std::vector<std::uint32_t>& background, counts c) const {
        std::lock_guard<std::mutex> lock(m_);
        if (background != background_) {  // counts for one set of background classes at a time
            rows_.clear();
            bytes_ = 0;
            background_ = background;
        }
        const std::size_t b = c->size() * sizeof(std::uint32_t) + 64;
        if (bytes_ + b > max_bytes) return;
        if (rows_.emplace(index, std::move(c)).second) bytes_ += b;
    }

private:
    mutable std::mutex m_;
    mutable std::vector<std::uint32_t> background_;
    mutable std::unordered_map<std::size_t, counts> rows_;
    mutable std::size_t bytes_ = 0;
};

}  // namespace shardpack::detail
