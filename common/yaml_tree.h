#pragma once
// YAML text -> yaml-cpp nodes, parsed by libyaml (issue 33, item 2). yaml-cpp 0.7's own parser
// loops forever on some malformed input (found by fuzzing), which a wall-clock watchdog used to
// cut off: a 58 MB profile was then refused or not depending on the machine's load. libyaml's
// parser is one forward pass over the text with no retries, so the work is bounded by the input
// (at most 64 MiB, common/input_file.h) and the verdict on an input is the same under any load.
// yaml-cpp stays the node API that YamlReader reads.

#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <functional>
#include <string>

namespace evsim {

// Nesting deeper than this is refused (the tree is built and freed recursively; eventsim's files
// nest a few levels).
inline constexpr int kMaxYamlDepth = 64;

// Called with each item of the streamed sequence (its index and node) as soon as it is parsed.
using YamlItemSink = std::function<void(size_t index, const YAML::Node& item)>;

// Parses every document of `text`. When `streamed_key` is not empty and the first document's top
// level maps it to a sequence, that sequence's items go to `sink` one by one and are not kept (the
// returned node maps the key to an empty sequence): a profile of 400,000 entries is never held as
// yaml-cpp nodes at once. Throws InputError "origin:line:col: malformed YAML: ..." on a syntax
// error, and on aliases or nesting deeper than kMaxYamlDepth.
std::vector<YAML::Node> parseYamlDocuments(const std::string& text, const std::string& origin,
                                           const std::string& streamed_key = {},
                                           const YamlItemSink& sink = {});

}  // namespace evsim
