#include "common/strings.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>

#include "common/error.h"

namespace evsim {

std::string toLower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::vector<std::string> split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end - start));
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return parts;
}

std::string trim(std::string_view text) {
  size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(begin, end - begin + 1));
}

namespace {
int64_t parseOneInt(const std::string& text, std::string_view what, std::string_view whole) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty() || value < 0) {
    EVSIM_THROW(InputError, "{} '{}': '{}' is not a non-negative integer", what, whole, text);
  }
  return value;
}
}  // namespace

std::vector<int64_t> parseIntList(std::string_view text, std::string_view what) {
  std::vector<int64_t> values;
  for (const std::string& raw : split(text, ',')) {
    std::string item = trim(raw);
    size_t dash = item.find('-');
    if (dash == std::string::npos) {
      values.push_back(parseOneInt(item, what, text));
      continue;
    }
    int64_t first = parseOneInt(trim(item.substr(0, dash)), what, text);
    int64_t last = parseOneInt(trim(item.substr(dash + 1)), what, text);
    if (last < first) {
      EVSIM_THROW(InputError, "{} '{}': range '{}' ends before it starts", what, text, item);
    }
    // Bounded before it is expanded: "0-4000000000" took 54 s and 16.8 GB (issue 17).
    if (last - first >= kMaxListValues - static_cast<int64_t>(values.size())) {
      EVSIM_THROW(InputError, "{} '{}': more than {} values", what, text, kMaxListValues);
    }
    for (int64_t v = first; v <= last; ++v) values.push_back(v);
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

std::string formatBytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  return fmt::format("{:.2f} {}", bytes, units[unit]);
}

std::optional<double> parseNumber(std::string_view text) {
  double value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::optional<int64_t> parseInteger(std::string_view text) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string clipped(std::string_view text, size_t max) {
  if (text.size() <= max) return std::string(text);
  return fmt::format("{}... ({} bytes)", text.substr(0, max), text.size());
}

std::string utcNow() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace evsim
