// RFC 4180 CSV reading for the input lists and class files.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace shardpack {

struct csv_row {
    std::size_t line;                // 1-based physical line where the record starts
    std::vector<std::string> cells;  // unquoted, "" unescaped; never empty
};

// Parses a whole CSV text (RFC 4180): quoted fields may hold commas, "" escapes and CR, LF or
// CRLF newlines (kept verbatim); records end in CRLF, LF or a lone CR, or at the end of the
// text. A UTF-8 BOM at the start is dropped. Blank lines, and lines of only spaces and tabs,
// are skipped but counted, so line numbers stay those an editor shows.
// Throws input_error "SOURCE:LINE: reason" for an unterminated quoted field (LINE: where it
// opens), a quote inside an unquoted field, text after a closing quote, NUL bytes, and UTF-16.
std::vector<csv_row> parse_csv(std::string_view text, std::string_view source_name);

// The whole file's bytes. Throws input_error "cannot read PATH: reason".
std::string read_text_file(const std::string& path);

}  // namespace shardpack
