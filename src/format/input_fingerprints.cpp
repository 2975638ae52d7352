#include "format/input_fingerprints.hpp"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

namespace shardpack {

namespace {

constexpr const char* magic = "#shardpack-fingerprints";

std::string escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '\\': out += "\\\\"; break;
            case '\t': out += "\\t"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            default: out += c;
        }
    }
    return out;
}

bool unescape(const std::string& s, std::string& out) {
    out.clear();
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\') { out += s[i]; continue; }
        if (++i == s.size()) return false;
        switch (s[i]) {
            case '\\': out += '\\'; break;
            case 't': out += '\t'; break;
            case 'n': out += '\n'; break;
            case 'r': out += '\r'; break;
            default: return false;
        }
    }
    return true;
}

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> cells;
    std::size_t start = 0;
    while (true) {
        const std::size_t tab = line.find('\t', start);
        cells.push_back(line.substr(start, tab == std::string::npos ? std::string::npos : tab - start));
        if (tab == std::string::npos) return cells;
        start = tab + 1;
    }
}

bool parse_u64(const std::string& s, std::uint64_t& v, int base = 10) {
    if (s.empty()) return false;
    try {
        std::size_t used = 0;
        v = std::stoull(s, &used, base);
        return used == s.size();
    } catch (...) {
        return false;
    }
}

bool parse_i64(const std::string& s, std::int64_t& v) {
    if (s.empty()) return false;
    try {
        std::size_t used = 0;
        v = std::stoll(s, &used);
        return used == s.size();
    } catch (...) {
        return false;
    }
}

std::string hex(std::uint64_t v) {
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
}

}  // namespace

std::string format_fingerprint_header(const std::string& content_hash, const std::string& options_digest) {
    return std::string(magic) + "\t1\t" + content_hash + "\t" + options_digest + "\n";
}

void append_fingerprint_line(std::string& out, const record_fingerprint& r) {
    out += escape(r.key) + "\t" + escape(r.label_key) + "\t" + std::to_string(r.image.size) + "\t" +
           std::to_string(r.image.mtime_ns) + "\t" + hex(r.image.hash) + "\t" + std::to_string(r.label.size) + "\t" +
           std::to_string(r.label.mtime_ns) + "\t" + hex(r.label.hash) + "\t" + std::to_string(r.class_id) + "\t" +
           std::to_string(r.unknown_pixels) + "\t";
    for (std::size_t i = 0; i < r.class_counts.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(r.class_counts[i].first) + ":" + std::to_string(r.class_counts[i].second);
    }
    // Two more fields only when there is something in them: lines of exact builds stay as they were.
    if (!r.tolerance_counts.empty() || !r.unknown_values.empty()) {
        out += "\t";
        for (std::size_t i = 0; i < r.tolerance_counts.size(); ++i) {
            if (i) out += ',';
            out += std::to_string(r.tolerance_counts[i].first) + ":" + std::to_string(r.tolerance_counts[i].second);
        }
        out += "\t";
        for (std::size_t i = 0; i < r.unknown_values.size(); ++i) {
            const auto& u = r.unknown_values[i];
            if (i) out += ',';
            out += std::to_string(u.value) + ":" + std::to_string(u.pixels) + ":" + std::to_string(u.x) + ":" + std::to_string(u.y);
        }
    }
    out += "\n";
}

std::string format_fingerprint_group_head(const std::string& shard, std::uint64_t count) {
    return "#shard\t" + shard + "\t" + std::to_string(count) + "\n";
}

std::string format_fingerprint_group(const fingerprint_group& g) {
    std::string out = format_fingerprint_group_head(g.shard, g.records.size());
    for (const auto& r : g.records) append_fingerprint_line(out, r);
    return out;
}

std::optional<fingerprint_file> load_fingerprints(const std::string& path) {
    // Only a regular file: a FIFO left in the folder must not hang the build.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    fingerprint_file f;
    std::string line;
    if (!std::getline(in, line)) return std::nullopt;
    auto head = split_tabs(line);
    if (head.size() != 4 || head[0] != magic || head[1] != "1") return std::nullopt;
    f.content_hash = head[2];
    f.options_digest = head[3];
    std::size_t expected = 0;
    while (std::getline(in, line)) {
        auto cells = split_tabs(line);
        if (cells[0] == "#shard") {
            std::uint64_t n = 0;
            if (cells.size() != 3 || !parse_u64(cells[2], n) || expected != 0) return std::nullopt;
            f.groups.push_back({cells[1], {}});
            expected = n;
            continue;
        }
        if (f.groups.empty() || expected == 0 || (cells.size() != 11 && cells.size() != 13)) return std::nullopt;
        record_fingerprint r;
        std::uint64_t class_id = 0;
        std::int64_t cid = 0;
        if (!unescape(cells[0], r.key) || !unescape(cells[1], r.label_key) || !parse_u64(cells[2], r.image.size) ||
            !parse_i64(cells[3], r.image.mtime_ns) || !parse_u64(cells[4], r.image.hash, 16) ||
            !parse_u64(cells[5], r.label.size) || !parse_i64(cells[6], r.label.mtime_ns) ||
            !parse_u64(cells[7], r.label.hash, 16) || !parse_i64(cells[8], cid) || !parse_u64(cells[9], r.unknown_pixels))
            return std::nullopt;
        (void)class_id;
        r.class_id = static_cast<std::int32_t>(cid);
        if (!cells[10].empty()) {
            std::istringstream counts(cells[10]);
            std::string item;
            while (std::getline(counts, item, ',')) {
                const auto colon = item.find(':');
                std::uint64_t id = 0, n = 0;
                if (colon == std::string::npos || !parse_u64(item.substr(0, colon), id) || !parse_u64(item.substr(colon + 1), n))
                    return std::nullopt;
                r.class_counts.emplace_back(static_cast<std::uint32_t>(id), n);
            }
        }
        if (cells.size() == 13) {
            if (!cells[11].empty()) {
                std::istringstream counts(cells[11]);
                std::string item;
                while (std::getline(counts, item, ',')) {
                    const auto colon = item.find(':');
                    std::uint64_t id = 0, n = 0;
                    if (colon == std::string::npos || !parse_u64(item.substr(0, colon), id) ||
                        !parse_u64(item.substr(colon + 1), n))
                        return std::nullopt;
                    r.tolerance_counts.emplace_back(static_cast<std::uint32_t>(id), n);
                }
            }
            if (!cells[12].empty()) {
                std::istringstream values(cells[12]);
                std::string item;
                while (std::getline(values, item, ',')) {
                    std::uint64_t parts[4] = {};
                    std::size_t start = 0;
                    for (int k = 0; k < 4; ++k) {
                        const std::size_t end = k < 3 ? item.find(':', start) : item.size();
                        if (end == std::string::npos || !parse_u64(item.substr(start, end - start), parts[k])) return std::nullopt;
                        start = end + 1;
                    }
                    if (parts[0] > 0xFFFFFFu || parts[2] > 0xFFFFFFFFu || parts[3] > 0xFFFFFFFFu) return std::nullopt;
                    r.unknown_values.push_back({static_cast<std::uint32_t>(parts[0]), parts[1],
                                                static_cast<std::uint32_t>(parts[2]), static_cast<std::uint32_t>(parts[3])});
                }
            }
        }
        f.groups.back().records.push_back(std::move(r));
        --expected;
    }
    if (expected != 0) return std::nullopt;  // a group cut short: the file was being written
    return f;
}

std::optional<file_stamp> stat_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    file_stamp s;
    s.size = static_cast<std::uint64_t>(st.st_size);
    s.mtime_ns = std::int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
    return s;
}

}  // namespace shardpack
