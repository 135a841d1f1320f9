#pragma once
// Small string helpers shared by config parsing and the command-line tools.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace evsim {

std::string toLower(std::string_view text);
std::vector<std::string> split(std::string_view text, char separator);
std::string trim(std::string_view text);
// `text` for an error message: whole up to `max` characters, else its start and "... (N bytes)" —
// a user's 200 MB line must not be echoed back whole.
std::string clipped(std::string_view text, size_t max = 80);

// At most this many values from one list (a rank selection of 4M ranks is already far beyond any
// cluster simulated).
inline constexpr int64_t kMaxListValues = int64_t{1} << 22;
// Parses a list of integers and inclusive ranges, "0-15,1024", into sorted unique values.
// Throws InputError naming `what` (e.g. "--ranks") on malformed text or more than kMaxListValues.
std::vector<int64_t> parseIntList(std::string_view text, std::string_view what);
// The whole of `text` as a number (from_chars: no locale, no hex, no trailing text), or nullopt.
std::optional<double> parseNumber(std::string_view text);
std::optional<int64_t> parseInteger(std::string_view text);

// Human-readable byte count: "1.50 GiB".
std::string formatBytes(double bytes);

// The current time as ISO 8601 UTC text, "2026-11-25T21:50:38Z": the date a profile records.
std::string utcNow();

}  // namespace evsim
