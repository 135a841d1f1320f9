#include "common/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <string_view>

#include "common/error.h"
#include "common/input_file.h"
#include "common/yaml_tree.h"

namespace evsim {

namespace {
// yaml-cpp 0.7 (Debian 12) loops forever on a ',' where a document's first node should start
// (",}", "&a ,", a line ', x' after '---'; found by fuzzing, tests/fuzz) and stops at a NUL byte.
// Neither is valid YAML, so they are refused before yaml-cpp sees them: control characters other
// than tab and line ends anywhere, and a line whose first token (after indentation, anchors and
// tags) is ',' outside flow collections, quotes, comments and block scalars, or a ',' right after
// a quoted value or a closed flow collection there.
std::optional<std::string> yamlHazard(const std::string& text) {
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
      return fmt::format("control character 0x{:02x} at byte {} is not allowed in YAML", c, i);
    }
  }
  int flow_depth = 0;
  char quote = 0;                // inside '...' or "..." (may span lines)
  int block_scalar_indent = -1;  // inside a | or > block: lines indented more than this
  int line_number = 0;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    ++line_number;
    size_t indent = line.find_first_not_of(" \t");
    if (block_scalar_indent >= 0) {
      if (indent == std::string_view::npos || static_cast<int>(indent) > block_scalar_indent) {
        start = end + 1;
        continue;
      }
      block_scalar_indent = -1;
    }
    size_t i = indent == std::string_view::npos ? line.size() : indent;
    // Whatever this scan thinks the context is (it is no YAML parser: fuzzing found three ways to
    // mislead it), a line that starts with ',' is refused, and so is a directive ('%' at column 0):
    // both are in every yaml-cpp loop found so far, and eventsim's files need neither.
    if (i < line.size() && line[i] == ',') {
      return fmt::format("line {}: ',' cannot start a node here", line_number);
    }
    if (!line.empty() && line[0] == '%') {
      return fmt::format("line {}: '%' (YAML directives) is not supported", line_number);
    }
    if (quote == 0 && flow_depth == 0) {
      // Skip anchors and tags that may precede a node, then look at the first token.
      while (i < line.size() && (line[i] == '&' || line[i] == '!')) {
        while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
        while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      }
      if (i < line.size() && line[i] == ',') {
        return fmt::format("line {}: ',' cannot start a node here", line_number);
      }
    }
    // Text right after a quoted value or a closed [ ] / { } outside any flow collection ("a",
    // [a],) spins yaml-cpp 0.7 too (found by fuzzing): never valid YAML, refused.
    bool after_closed = false;
    size_t closed_quote_at = std::string_view::npos;  // where the last quoted value ended
    // Inside a plain (unquoted) value, '[', '{' and quotes are text ("y - {typ" is one value, and
    // so is "signatur \"tes" in a flow mapping): without this a '{' there opened a phantom flow
    // collection, or a quote a phantom string, and hid a following line's leading ',' (yaml-cpp
    // loops found by fuzzing) from the check above.
    bool in_plain = false;
    for (size_t k = indent == std::string_view::npos ? line.size() : indent; k < line.size(); ++k) {
      const char c = line[k];
      if (quote != 0) {
        if (quote == '"' && c == '\\') {
          ++k;
        } else if (c == quote) {
          quote = 0;
          after_closed = flow_depth == 0;
          closed_quote_at = k;
        }
        continue;
      }
      // Only a ':' (it was a key) or a comment may follow there: "'a' s" then a line "?" spins
      // yaml-cpp as well (fuzzing). A quote right after one is the next quoted value ('it''s').
      if (flow_depth == 0 && after_closed &&
          std::string_view(" \t\r:#").find(c) == std::string_view::npos &&
          !((c == '"' || c == '\'') && closed_quote_at + 1 == k)) {
        return fmt::format("line {}: '{}' after a quoted value or a [ ] or {{ }} collection",
                           line_number, c);
      }
      if (c != ' ' && c != '\t') after_closed = false;
      const bool blank_next = k + 1 == line.size() || line[k + 1] == ' ' || line[k + 1] == '\t';
      if (in_plain) {
        // In a flow collection a plain value also ends at a flow indicator, which is then read.
        const bool flow_end =
            flow_depth > 0 && std::string_view(",[]{}").find(c) != std::string_view::npos;
        if (!flow_end) {
          if (c == ':' && blank_next) in_plain = false;  // "key: value": the key ends here
          if (c == '#' && (line[k - 1] == ' ' || line[k - 1] == '\t')) break;
          continue;
        }
        in_plain = false;
      }
      // A quote right after a closed one starts the next quoted value, as yaml-cpp reads 4 quotes.
      const bool token_start = k == 0 || line[k - 1] == ' ' || line[k - 1] == '\t' ||
                               line[k - 1] == '[' || line[k - 1] == '{' || line[k - 1] == ',' ||
                               closed_quote_at + 1 == k;
      if (c == '#' && (k == 0 || line[k - 1] == ' ' || line[k - 1] == '\t')) break;
      // A plain value starts with a character that is no indicator ("-1" and ":x" included).
      const bool indicator =
          std::string_view(" \t,[]{}#&*!|>'\"%@`").find(c) != std::string_view::npos ||
          ((c == '-' || c == '?' || c == ':') && blank_next);
      if (token_start && !indicator) {
        in_plain = true;
        continue;
      }
      if ((c == '"' || c == '\'') && token_start) quote = c;
      // eventsim's files never need anchors, aliases or tags, and yaml-cpp 0.7 loops forever on
      // several malformed ones ("&a ,", "!,X"): refused before parsing.
      const bool alias =
          c == '*' && k + 1 < line.size() && line[k + 1] != ' ' && line[k + 1] != '\t';
      if (token_start && quote == 0 && (c == '&' || c == '!' || alias)) {
        return fmt::format("line {}: '{}' (YAML anchors, aliases and tags) is not supported",
                           line_number, c);
      }
      if (c == '[' || c == '{') ++flow_depth;
      if ((c == ']' || c == '}') && flow_depth > 0) after_closed = --flow_depth == 0;
      // "key: |" or "key: >-" opens a block scalar: its lines are text, not YAML.
      if ((c == '|' || c == '>') && token_start && flow_depth == 0) {
        size_t rest = line.find_first_not_of("+-0123456789", k + 1);
        if (rest == std::string_view::npos ||
            line.substr(rest).find_first_not_of(" \t") == std::string_view::npos) {
          block_scalar_indent = static_cast<int>(indent == std::string_view::npos ? 0 : indent);
          break;
        }
      }
    }
    start = end + 1;
  }
  return std::nullopt;
}

// yaml-cpp 0.7's parser is not used (yaml_tree.h: libyaml parses, yaml-cpp holds the nodes); the
// pre-scan above still refuses what eventsim's files never need, with a line naming it.
YamlReader parse(const std::string& text, const std::string& origin,
                 const std::string& streamed_key = {}, const YamlItemSink& sink = {}) {
  if (std::optional<std::string> hazard = yamlHazard(text)) {
    EVSIM_THROW(InputError, "{}: malformed YAML: {}", origin, *hazard);
  }
  std::vector<YAML::Node> documents = parseYamlDocuments(text, origin, streamed_key, sink);
  // A second document would be ignored silently: refuse it.
  if (documents.size() > 1) {
    EVSIM_THROW(InputError, "{}: {} YAML documents ('---'); one is expected", origin,
                documents.size());
  }
  if (documents.empty() || !documents[0].IsMap()) {
    EVSIM_THROW(InputError, "{}: top level must be a mapping of keys", origin);
  }
  return YamlReader(documents[0], origin, "");
}

// A mapping's key as text; a key that is itself a list or a mapping is an input error.
std::string keyText(const YamlReader& reader, const YAML::Node& key) {
  if (!key.IsScalar()) reader.fail("", "a key must be a single value, not a list or a mapping");
  return key.as<std::string>();
}
}  // namespace

YamlReader YamlReader::fromFile(const std::string& path) {
  return parse(readInputFile(path, "YAML input"), path);
}

YamlReader YamlReader::fromString(const std::string& text, const std::string& origin) {
  return parse(text, origin);
}

YamlReader YamlReader::fromStringStreaming(const std::string& text, const std::string& origin,
                                           const std::string& key, const ItemSink& on_item) {
  return parse(text, origin, key, [&](size_t index, const YAML::Node& node) {
    on_item(YamlReader(node, origin, fmt::format("{}[{}]", key, index)));
  });
}

YamlReader::YamlReader(YAML::Node node, std::string file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

std::string YamlReader::where(const std::string& key) const {
  std::string full = path_.empty() ? key : (key.empty() ? path_ : path_ + "." + key);
  return full.empty() ? file_ : file_ + ": " + full;
}

void YamlReader::fail(const std::string& key, const std::string& message) const {
  EVSIM_THROW(InputError, "{}", where(key) + ": " + message);
}

bool YamlReader::has(const std::string& key) const { return node_.IsMap() && node_[key]; }

void YamlReader::allowOnly(std::initializer_list<std::string_view> allowed) const {
  if (!node_.IsMap()) fail("", "must be a mapping");
  std::set<std::string> seen;
  for (const auto& kv : node_) {
    std::string key = keyText(*this, kv.first);
    // yaml-cpp keeps both entries of a repeated key and lookups see the first: refuse it.
    if (!seen.insert(key).second) fail(key, "duplicate key");
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(key, "unknown key (allowed: " + list + ")");
    }
  }
}

YamlReader YamlReader::child(const std::string& key) const {
  if (!has(key)) fail(key, "missing required key");
  return YamlReader(node_[key], file_, path_.empty() ? key : path_ + "." + key);
}

std::vector<YamlReader> YamlReader::items(const std::string& key) const {
  return child(key).items();
}

std::vector<YamlReader> YamlReader::items() const {
  if (!node_.IsSequence()) fail("", "must be a list");
  std::vector<YamlReader> out;
  for (size_t i = 0; i < node_.size(); ++i) {
    out.emplace_back(node_[i], file_, fmt::format("{}[{}]", path_, i));
  }
  return out;
}

std::map<std::string, YamlReader> YamlReader::entries() const {
  if (!node_.IsMap()) fail("", "must be a mapping");
  std::map<std::string, YamlReader> out;
  for (const auto& kv : node_) {
    std::string key = keyText(*this, kv.first);
    if (out.count(key)) fail(key, "duplicate key");
    out.emplace(key, YamlReader(kv.second, file_, path_.empty() ? key : path_ + "." + key));
  }
  return out;
}

YAML::Node YamlReader::scalar(const std::string& key) const {
  if (!has(key)) fail(key, "missing required key");
  YAML::Node value = node_[key];
  if (!value.IsScalar()) fail(key, "must be a single value");
  return value;
}

std::string YamlReader::str(const std::string& key) const {
  std::string value = scalar(key).as<std::string>();
  if (value.empty()) fail(key, "must not be empty");
  return value;
}

namespace {
// Integer value of `node`, or a failure naming the key.
int64_t readInt(const YamlReader& reader, const std::string& key, const YAML::Node& value) {
  try {
    return value.as<int64_t>();
  } catch (const YAML::Exception&) {
    reader.fail(key, "'" + value.as<std::string>() + "' is not an integer");
  }
}
double readDouble(const YamlReader& reader, const std::string& key, const YAML::Node& value) {
  double out = 0;
  try {
    out = value.as<double>();
  } catch (const YAML::Exception&) {
    reader.fail(key, "'" + value.as<std::string>() + "' is not a number");
  }
  if (!std::isfinite(out))
    reader.fail(key, "'" + value.as<std::string>() + "' is not a finite number");
  return out;
}
}  // namespace

int64_t YamlReader::nonNegativeInt(const std::string& key, int64_t max) const {
  int64_t out = readInt(*this, key, scalar(key));
  if (out < 0) fail(key, fmt::format("{}: must be >= 0", out));
  if (out > max) fail(key, fmt::format("{}: must be <= {}", out, max));
  return out;
}

int64_t YamlReader::positiveInt(const std::string& key, int64_t max) const {
  int64_t out = readInt(*this, key, scalar(key));
  if (out <= 0) fail(key, fmt::format("{}: must be > 0", out));
  if (out > max) fail(key, fmt::format("{}: must be <= {}", out, max));
  return out;
}

double YamlReader::nonNegativeDouble(const std::string& key, double max) const {
  double out = readDouble(*this, key, scalar(key));
  if (out < 0) fail(key, fmt::format("{}: must be >= 0", out));
  if (out > max) fail(key, fmt::format("{}: must be <= {:g}", out, max));
  return out;
}

double YamlReader::positiveDouble(const std::string& key, double max) const {
  double out = readDouble(*this, key, scalar(key));
  if (out <= 0) fail(key, fmt::format("{}: must be > 0", out));
  if (out > max) fail(key, fmt::format("{}: must be <= {:g}", out, max));
  return out;
}

double YamlReader::asPositiveDouble() const {
  if (!node_.IsScalar()) fail("", "must be a single value");
  double out = 0;
  try {
    out = node_.as<double>();
  } catch (const YAML::Exception&) {
    fail("", "'" + node_.as<std::string>() + "' is not a number");
  }
  if (!std::isfinite(out) || out <= 0) fail("", fmt::format("{}: must be > 0", out));
  return out;
}

bool YamlReader::boolean(const std::string& key) const {
  YAML::Node value = scalar(key);
  try {
    return value.as<bool>();
  } catch (const YAML::Exception&) {
    fail(key, "'" + value.as<std::string>() + "' is not true or false");
  }
}

}  // namespace evsim
