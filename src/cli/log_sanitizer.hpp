// Log lines are for people and for line-based tools (cron mail, grep, journald): a file name
// holding a newline must not forge a second log line, a terminal escape must not reach the
// terminal, and a 4000-byte path must not bury the message. The CLI's logger formats every
// message through sanitize_log_text.
#pragma once
#include <memory>
#include <spdlog/formatter.h>
#include <string>
#include <string_view>

namespace shardpack {

// Longest run of non-blank bytes (a path, mostly) kept whole in a log line; longer runs keep
// their first and last log_token_keep bytes around a note of how much was cut.
inline constexpr std::size_t log_token_max = 240;
inline constexpr std::size_t log_token_keep = 100;

// Control characters become \n, \r, \t or \xNN; bytes that are not valid UTF-8 become \xNN;
// over-long tokens are cut as above. Valid UTF-8 text is otherwise unchanged.
std::string sanitize_log_text(std::string_view text);

// A spdlog formatter that sanitizes the message, then applies `pattern`.
std::unique_ptr<spdlog::formatter> make_sanitizing_formatter(const std::string& pattern);

}  // namespace shardpack
