#pragma once
// Strict YAML reading for configs and profile databases. Every access names the file and the key
// path, so a bad value produces one line: "configs/models/x.yaml: layers[1].count: -3: must be >
// 0". Unknown keys are errors (a typo must not fall back to a default silently).

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace evsim {

class YamlReader {
 public:
  // Parses `path`; throws InputError naming the file on a missing file or a syntax error.
  static YamlReader fromFile(const std::string& path);
  // Parses in-memory text; `origin` names it in errors.
  static YamlReader fromString(const std::string& text, const std::string& origin);
  // The same, but the items of the top-level sequence under `key` go to `on_item` one by one as
  // they are parsed (named "key[i]" in errors) and are not kept: the returned reader maps `key` to
  // an empty list. For long lists (profile databases), whose nodes would not fit in memory at once.
  using ItemSink = std::function<void(const YamlReader& item)>;
  static YamlReader fromStringStreaming(const std::string& text, const std::string& origin,
                                        const std::string& key, const ItemSink& on_item);

  YamlReader(YAML::Node node, std::string file, std::string path);

  bool has(const std::string& key) const;
  // Throws if the node has a key outside `allowed`.
  void allowOnly(std::initializer_list<std::string_view> allowed) const;

  YamlReader child(const std::string& key) const;               // required mapping/sequence
  std::vector<YamlReader> items(const std::string& key) const;  // required sequence
  std::vector<YamlReader> items() const;                        // this node as a sequence
  std::map<std::string, YamlReader> entries() const;            // this node as a mapping

  // Numbers are bounded where they are read (issue 17): an integer is at most `max` (by default
  // what an int holds, so narrowing to int is safe), a float finite and at most `max`; a value
  // outside is one InputError naming file, key, value and bound.
  static constexpr int64_t kMaxInt = 2147483647;  // INT_MAX
  static constexpr double kMaxDouble = 1e12;

  std::string str(const std::string& key) const;
  int64_t positiveInt(const std::string& key, int64_t max = kMaxInt) const;
  int64_t nonNegativeInt(const std::string& key, int64_t max = kMaxInt) const;
  double positiveDouble(const std::string& key, double max = kMaxDouble) const;
  double nonNegativeDouble(const std::string& key, double max = kMaxDouble) const;
  bool boolean(const std::string& key) const;

  // This node's own scalar value, as a number > 0.
  double asPositiveDouble() const;

  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }
  const YAML::Node& node() const { return node_; }

  // "file: path.key" for error messages.
  std::string where(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& message) const;

 private:
  YAML::Node scalar(const std::string& key) const;

  YAML::Node node_;
  std::string file_;
  std::string path_;
};

}  // namespace evsim
