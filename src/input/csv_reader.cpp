#include "input/csv_reader.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include "errors.hpp"
#include "input/text_util.hpp"

namespace shardpack {

namespace {

using input_detail::where;

// One pass over the text, keeping the physical line number as it goes.
class csv_parser {
public:
    csv_parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

    std::vector<csv_row> run() {
        if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
        else if (text_.substr(0, 2) == "\xFF\xFE" || text_.substr(0, 2) == "\xFE\xFF")
            fail(1, "the file is UTF-16 text; save it as UTF-8");
        std::vector<csv_row> rows;
        while (pos_ < text_.size()) {
            if (skip_blank_line()) continue;
            rows.push_back(read_record());
        }
        return rows;
    }

private:
    std::string_view text_;
    std::string_view source_;
    std::size_t pos_ = 0;
    std::size_t line_ = 1;

    [[noreturn]] void fail(std::size_t line, const std::string& why) const {
        throw input_error(where(source_, line) + why);
    }

    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return text_[pos_]; }

    // Consumes CRLF, LF or a lone CR at pos_ (there must be one) and counts the line.
    void take_newline() {
        if (text_[pos_] == '\r' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '\n') ++pos_;
        ++pos_;
        ++line_;
    }

    bool skip_blank_line() {
        std::size_t p = pos_;
        while (p < text_.size() && (text_[p] == ' ' || text_[p] == '\t')) ++p;
        if (p < text_.size() && text_[p] != '\r' && text_[p] != '\n') return false;
        pos_ = p;
        if (!at_end()) take_newline();
        return true;
    }

    csv_row read_record() {
        csv_row row{line_, {}};
        for (;;) {
            row.cells.push_back(!at_end() && peek() == '"' ? quoted_field() : plain_field());
            if (at_end()) break;
            if (peek() == ',') {
                ++pos_;  // a comma at the very end still opens an (empty) last field
                continue;
            }
            take_newline();
            break;
        }
        return row;
    }

    std::string plain_field() {
        const std::size_t start = pos_;
        while (!at_end()) {
            const char c = peek();
            if (c == ',' || c == '\r' || c == '\n') break;
            if (c == '"')
                fail(line_, "unexpected character '\"' in an unquoted field; quote the whole field and double the "
                            "quotes inside it (\"a \"\"b\"\" c\")");
            if (c == '\0') fail(line_, "NUL byte in the text; is this a binary file?");
            ++pos_;
        }
        return std::string(text_.substr(start, pos_ - start));
    }

    std::string quoted_field() {
        const std::size_t open_line = line_;
        ++pos_;
        std::string cell;
        for (;;) {
            if (at_end()) fail(open_line, "unterminated quoted field starting here");
            const char c = peek();
            if (c == '"') {
                if (pos_ + 1 < text_.size() && text_[pos_ + 1] == '"') {
                    cell += '"';
                    pos_ += 2;
                    continue;
                }
                ++pos_;
                break;
            }
            if (c == '\0') fail(line_, "NUL byte in the text; is this a binary file?");
            if (c == '\r' || c == '\n') {
                const std::size_t from = pos_;
                take_newline();
                cell.append(text_.substr(from, pos_ - from));
                continue;
            }
            // Copy the run up to the next special character in one go.
            std::size_t end = pos_ + 1;
            while (end < text_.size() && text_[end] != '"' && text_[end] != '\r' && text_[end] != '\n' &&
                   text_[end] != '\0')
                ++end;
            cell.append(text_.substr(pos_, end - pos_));
            pos_ = end;
        }
        if (!at_end() && peek() != ',' && peek() != '\r' && peek() != '\n')
            fail(line_, "unexpected character after closing quote; a quoted field must end at a comma or line end");
        return cell;
    }
};

}  // namespace

std::vector<csv_row> parse_csv(std::string_view text, std::string_view source_name) {
    return csv_parser(text, source_name).run();
}

std::string read_text_file(const std::string& path) {
    struct closer {
        void operator()(std::FILE* f) const { std::fclose(f); }
    };
    std::unique_ptr<std::FILE, closer> f(std::fopen(path.c_str(), "rb"));
    if (!f) throw input_error("cannot read " + path + ": " + std::strerror(errno));
    std::string out;
    char buf[1 << 16];
    for (;;) {
        errno = 0;
        const std::size_t n = std::fread(buf, 1, sizeof buf, f.get());
        const int read_errno = errno;
        // A folder opens fine on Linux and fails on the first read (EISDIR).
        if (std::ferror(f.get())) throw input_error("cannot read " + path + ": " + std::strerror(read_errno));
        out.append(buf, n);
        if (n < sizeof buf) return out;
    }
}

}  // namespace shardpack
