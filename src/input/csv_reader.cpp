#include "input/csv_reader.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "errors.hpp"
#include "input/text_util.hpp"

namespace shardpack {

namespace {
// How much a streaming csv_stream asks its reader for at a time. Parsed text before the
// current record is dropped once this much of it has piled up, so the buffer stays near two
// chunks (or one record, if a record is longer).
constexpr std::size_t chunk_size = std::size_t(1) << 16;
}  // namespace

csv_stream::csv_stream(std::string_view text, std::string_view source_name)
    : text_(text), read_done_(true), source_(source_name) {}

csv_stream::csv_stream(reader read, std::string_view source_name) : read_(std::move(read)), source_(source_name) {}

void csv_stream::fail(std::size_t line, const std::string& why) const {
    throw input_error(input_detail::where(source_, line) + why);
}

// Appends the reader's next chunk. Positions into text_ stay valid: only whole records before
// pos_ are ever dropped, and only between records (next()).
bool csv_stream::refill() {
    if (!read_ || read_done_) return false;
    const std::size_t old_size = buffer_.size();
    buffer_.resize(old_size + chunk_size);
    const std::size_t got = read_(buffer_.data() + old_size, chunk_size);
    buffer_.resize(old_size + got);
    text_ = buffer_;
    if (got == 0) read_done_ = true;
    return got != 0;
}

// Whether byte `index` of the text exists, pulling more text as needed.
bool csv_stream::has(std::size_t index) {
    while (index >= text_.size())
        if (!refill()) return false;
    return true;
}

bool csv_stream::next(csv_row& row) {
    if (!started_) {
        started_ = true;
        has(2);  // the first three bytes, where there are that many
        if (text_.substr(0, 3) == "\xEF\xBB\xBF") pos_ = 3;
        else if (text_.substr(0, 2) == "\xFF\xFE" || text_.substr(0, 2) == "\xFE\xFF")
            fail(1, "the file is UTF-16 text; save it as UTF-8");
    }
    for (;;) {
        if (read_ && pos_ >= chunk_size) {
            buffer_.erase(0, pos_);
            text_ = buffer_;
            pos_ = 0;
        }
        if (at_end()) return false;
        if (skip_blank_line()) continue;
        read_record(row);
        return true;
    }
}

// Consumes CRLF, LF or a lone CR at pos_ (there must be one) and counts the line.
void csv_stream::take_newline() {
    if (text_[pos_] == '\r' && has(pos_ + 1) && text_[pos_ + 1] == '\n') ++pos_;
    ++pos_;
    ++line_;
}

bool csv_stream::skip_blank_line() {
    std::size_t p = pos_;
    while (has(p) && (text_[p] == ' ' || text_[p] == '\t')) ++p;
    if (has(p) && text_[p] != '\r' && text_[p] != '\n') return false;
    pos_ = p;
    if (!at_end()) take_newline();
    return true;
}

void csv_stream::read_record(csv_row& row) {
    row.line = line_;
    std::size_t count = 0;
    for (;;) {
        if (count == row.cells.size()) row.cells.emplace_back();
        std::string& cell = row.cells[count++];
        if (!at_end() && peek() == '"') quoted_field(cell);
        else plain_field(cell);
        if (at_end()) break;
        if (peek() == ',') {
            ++pos_;  // a comma at the very end still opens an (empty) last field
            continue;
        }
        take_newline();
        break;
    }
    row.cells.resize(count);
}

void csv_stream::plain_field(std::string& cell) {
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
    cell.assign(text_.substr(start, pos_ - start));
}

void csv_stream::quoted_field(std::string& cell) {
    const std::size_t open_line = line_;
    ++pos_;
    cell.clear();
    for (;;) {
        if (at_end()) fail(open_line, "unterminated quoted field starting here");
        const char c = peek();
        if (c == '"') {
            if (has(pos_ + 1) && text_[pos_ + 1] == '"') {
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
        // Copy the run up to the next special character (or what is read so far) in one go.
        std::size_t end = pos_ + 1;
        while (end < text_.size() && text_[end] != '"' && text_[end] != '\r' && text_[end] != '\n' &&
               text_[end] != '\0')
            ++end;
        cell.append(text_.substr(pos_, end - pos_));
        pos_ = end;
    }
    if (!at_end() && peek() != ',' && peek() != '\r' && peek() != '\n')
        fail(line_, "unexpected character after closing quote; a quoted field must end at a comma or line end");
}

std::vector<csv_row> parse_csv(std::string_view text, std::string_view source_name) {
    csv_stream stream(text, source_name);
    std::vector<csv_row> rows;
    csv_row row{};
    while (stream.next(row)) rows.push_back(std::move(row));
    return rows;
}

std::string csv_quoted(std::string_view cell) {
    std::string q = "\"";
    for (char c : cell) q += c == '"' ? std::string("\"\"") : std::string(1, c);
    return q + "\"";
}

std::string csv_cell(std::string_view cell) {
    return cell.find_first_of(",\"\n\r") == std::string_view::npos ? std::string(cell) : csv_quoted(cell);
}

}  // namespace shardpack
