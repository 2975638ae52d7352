// RFC 4180 CSV reading for the input lists and class files.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/input_file.hpp"  // text_file_reader, read_text_file

namespace shardpack {

struct csv_row {
    std::size_t line;                // 1-based physical line where the record starts
    std::vector<std::string> cells;  // unquoted, "" unescaped; never empty
};

// Reads CSV records one at a time, so that a caller keeping only part of each record (the
// input list, with millions of rows) never holds the whole file or all of its records.
// The rules are parse_csv's (below): parse_csv is this stream run to the end.
class csv_stream {
public:
    // Fills up to n bytes of buf and returns how many; 0 means the end of the text.
    using reader = std::function<std::size_t(char* buf, std::size_t n)>;

    // Over text already in memory; it is not copied and must outlive the stream.
    csv_stream(std::string_view text, std::string_view source_name);
    // Over text pulled from `read` in pieces; only the record being parsed is kept.
    csv_stream(reader read, std::string_view source_name);

    // The next record into `row` (its cells' storage is reused); false at the end of the text.
    // Throws input_error as parse_csv does, at the record where the problem is.
    bool next(csv_row& row);

private:
    std::string_view text_;  // the text from buffer_'s start (or all of it, in memory)
    std::string buffer_;     // streaming: the unparsed part of what `read_` gave
    reader read_;
    bool read_done_ = false;
    std::string source_;
    std::size_t pos_ = 0;
    std::size_t line_ = 1;
    bool started_ = false;  // the BOM check was done

    [[noreturn]] void fail(std::size_t line, const std::string& why) const;
    bool refill();
    bool has(std::size_t index);
    bool at_end() { return !has(pos_); }
    char peek() const { return text_[pos_]; }
    void take_newline();
    bool skip_blank_line();
    void read_record(csv_row& row);
    void plain_field(std::string& cell);
    void quoted_field(std::string& cell);
};

// Parses a whole CSV text (RFC 4180): quoted fields may hold commas, "" escapes and CR, LF or
// CRLF newlines (kept verbatim); records end in CRLF, LF or a lone CR, or at the end of the
// text. A UTF-8 BOM at the start is dropped. Blank lines, and lines of only spaces and tabs,
// are skipped but counted, so line numbers stay those an editor shows.
// Throws input_error "SOURCE:LINE: reason" for an unterminated quoted field (LINE: where it
// opens), a quote inside an unquoted field, text after a closing quote, NUL bytes, and UTF-16.
std::vector<csv_row> parse_csv(std::string_view text, std::string_view source_name);

// The other way: a cell as parse_csv reads it back. csv_quoted puts it in double quotes with each
// '"' doubled; csv_cell does so only when it holds a comma, a quote or a line break.
std::string csv_quoted(std::string_view cell);
std::string csv_cell(std::string_view cell);

}  // namespace shardpack
