#include "dataset/input_fingerprints.hpp"

#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <filesystem>
#include <sstream>

#include "errors.hpp"
#include "io/output_folder.hpp"
#include "shardpack/detail/hex.hpp"

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

using class_counts = std::vector<std::pair<std::uint32_t, std::uint64_t>>;

// A field of per-class counts: "id:count" items separated by commas.
void append_counts(std::string& out, const class_counts& counts) {
    for (std::size_t i = 0; i < counts.size(); ++i) {
        if (i) out += ',';
        out += std::to_string(counts[i].first) + ":" + std::to_string(counts[i].second);
    }
}

bool parse_counts(const std::string& field, class_counts& counts) {
    std::istringstream items(field);
    std::string item;
    while (std::getline(items, item, ',')) {
        const auto colon = item.find(':');
        std::uint64_t id = 0, n = 0;
        if (colon == std::string::npos || !parse_u64(item.substr(0, colon), id) || !parse_u64(item.substr(colon + 1), n))
            return false;
        counts.emplace_back(static_cast<std::uint32_t>(id), n);
    }
    return true;
}

}  // namespace

std::string format_fingerprint_header(const std::string& content_hash, const std::string& options_digest) {
    return std::string(magic) + "\t1\t" + content_hash + "\t" + options_digest + "\n";
}

void append_fingerprint_line(std::string& out, const record_fingerprint& r) {
    out += escape(r.key) + "\t" + escape(r.label_key) + "\t" + std::to_string(r.image.size) + "\t" +
           std::to_string(r.image.mtime_ns) + "\t" + detail::hex16(r.image.hash) + "\t" + std::to_string(r.label.size) + "\t" +
           std::to_string(r.label.mtime_ns) + "\t" + detail::hex16(r.label.hash) + "\t" + std::to_string(r.class_id) + "\t" +
           std::to_string(r.unknown_pixels) + "\t";
    append_counts(out, r.class_counts);
    // Two more fields only when there is something in them (or a third follows): lines of exact
    // builds without --field stay as they were.
    if (!r.tolerance_counts.empty() || !r.unknown_values.empty() || r.fields_hash) {
        out += "\t";
        append_counts(out, r.tolerance_counts);
        out += "\t";
        for (std::size_t i = 0; i < r.unknown_values.size(); ++i) {
            const auto& u = r.unknown_values[i];
            if (i) out += ',';
            out += std::to_string(u.value) + ":" + std::to_string(u.pixels) + ":" + std::to_string(u.x) + ":" + std::to_string(u.y);
        }
    }
    if (r.fields_hash) out += "\t" + detail::hex16(r.fields_hash);
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

namespace {
// One record's line, split at its tabs.
bool parse_record_line(const std::vector<std::string>& cells, record_fingerprint& out) {
    if (cells.size() != 11 && cells.size() != 13 && cells.size() != 14) return false;
    record_fingerprint r;
    std::int64_t cid = 0;
    if (!unescape(cells[0], r.key) || !unescape(cells[1], r.label_key) || !parse_u64(cells[2], r.image.size) ||
        !parse_i64(cells[3], r.image.mtime_ns) || !parse_u64(cells[4], r.image.hash, 16) ||
        !parse_u64(cells[5], r.label.size) || !parse_i64(cells[6], r.label.mtime_ns) ||
        !parse_u64(cells[7], r.label.hash, 16) || !parse_i64(cells[8], cid) || !parse_u64(cells[9], r.unknown_pixels))
        return false;
    r.class_id = static_cast<std::int32_t>(cid);
    if (!parse_counts(cells[10], r.class_counts)) return false;
    if (cells.size() == 14 && (!parse_u64(cells[13], r.fields_hash, 16) || r.fields_hash == 0)) return false;
    if (cells.size() >= 13) {
        if (!parse_counts(cells[11], r.tolerance_counts)) return false;
        if (!cells[12].empty()) {
            std::istringstream values(cells[12]);
            std::string item;
            while (std::getline(values, item, ',')) {
                std::uint64_t parts[4] = {};
                std::size_t start = 0;
                for (int k = 0; k < 4; ++k) {
                    const std::size_t end = k < 3 ? item.find(':', start) : item.size();
                    if (end == std::string::npos || !parse_u64(item.substr(start, end - start), parts[k])) return false;
                    start = end + 1;
                }
                if (parts[0] > 0xFFFFFFu || parts[2] > 0xFFFFFFFFu || parts[3] > 0xFFFFFFFFu) return false;
                r.unknown_values.push_back({static_cast<std::uint32_t>(parts[0]), parts[1],
                                            static_cast<std::uint32_t>(parts[2]), static_cast<std::uint32_t>(parts[3])});
            }
        }
    }
    out = std::move(r);
    return true;
}
}  // namespace

fingerprint_reader::fingerprint_reader(const output_folder& folder, const std::string& name)
    : file_(folder.fd(), folder.path(), name), lines_(file_, max_fingerprint_line), state_(XXH3_createState()) {
    // The destructor does not run when the constructor throws: free the hash state here then.
    try {
        if (state_ == nullptr) throw std::bad_alloc();
        XXH3_64bits_reset(state_);
        std::string line;
        if (!lines_.next(line)) throw input_error(file_.path() + ": empty, not a fingerprint list");
        const auto head = split_tabs(line);
        if (head.size() != 4 || head[0] != magic || head[1] != "1")
            throw input_error(file_.path() + ":1: not the header of a shardpack fingerprint list (version 1)");
        content_hash_ = head[2];
        options_digest_ = head[3];
    } catch (...) {
        XXH3_freeState(state_);
        throw;
    }
}

fingerprint_reader::~fingerprint_reader() { XXH3_freeState(state_); }

bool fingerprint_reader::next(fingerprint_group& group, std::uint64_t max_records) {
    std::string line;
    const auto where = [&] { return file_.path() + ":" + std::to_string(lines_.line_number()) + ": "; };
    if (!lines_.next(line)) return false;
    XXH3_64bits_update(state_, line.data(), line.size());
    XXH3_64bits_update(state_, "\n", 1);
    auto cells = split_tabs(line);
    std::uint64_t count = 0;
    if (cells[0] != "#shard" || cells.size() != 3 || !parse_u64(cells[2], count))
        throw input_error(where() + "expected a \"#shard NAME COUNT\" line");
    group.shard = cells[1];
    group.records.clear();
    if (count > max_records)
        throw input_error(where() + "lists " + std::to_string(count) + " records for " + group.shard + ", which holds " +
                          std::to_string(max_records));
    for (std::uint64_t k = 0; k < count; ++k) {
        if (!lines_.next(line)) throw input_error(where() + "the group of " + group.shard + " ends after " + std::to_string(k) + " of its " + std::to_string(count) + " records");
        XXH3_64bits_update(state_, line.data(), line.size());
        XXH3_64bits_update(state_, "\n", 1);
        record_fingerprint r;
        if (!parse_record_line(split_tabs(line), r)) throw input_error(where() + "not a record's fingerprint line");
        group.records.push_back(std::move(r));
    }
    return true;
}

std::uint64_t fingerprint_reader::body_digest() const { return XXH3_64bits_digest(state_); }

std::optional<fingerprint_file> load_fingerprints(const output_folder& folder, const std::string& name, std::uint64_t max_bytes) {
    if (folder.kind_of(name) == output_folder::kind::missing) return std::nullopt;
    try {
        fingerprint_reader reader(folder, name);
        if (reader.size() > max_bytes) {
            spdlog::warn("{}: {} bytes, more than the {} the memory budget allows for it; nothing is reused from it",
                         folder.path_of(name), reader.size(), max_bytes);
            return std::nullopt;
        }
        fingerprint_file f;
        f.content_hash = reader.content_hash();
        f.options_digest = reader.options_digest();
        fingerprint_group group;
        while (reader.next(group)) f.groups.push_back(std::move(group));
        return f;
    } catch (const input_error& e) {
        spdlog::debug("{}", e.what());
        return std::nullopt;
    }
}

std::optional<fingerprint_file> load_fingerprints(const std::string& path) {
    const std::filesystem::path p(path);
    try {
        const auto folder = output_folder::open(p.has_parent_path() ? p.parent_path().string() : ".", false, true);
        return load_fingerprints(*folder, p.filename().string(), ~std::uint64_t(0));
    } catch (const std::exception&) {
        return std::nullopt;
    }
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
