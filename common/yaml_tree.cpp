#include "common/yaml_tree.h"

#include <yaml.h>

#include <string_view>

#include "common/error.h"

namespace evsim {

namespace {

// One libyaml event parser over `text`; `current()` is the last event read.
class EventReader {
 public:
  EventReader(const std::string& text, const std::string& origin) : origin_(origin) {
    if (!yaml_parser_initialize(&parser_)) EVSIM_THROW(Error, "libyaml: cannot create a parser");
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
    yaml_parser_set_encoding(&parser_, YAML_UTF8_ENCODING);
  }
  ~EventReader() {
    if (has_event_) yaml_event_delete(&event_);
    yaml_parser_delete(&parser_);
  }
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;

  const yaml_event_t& next() {
    if (has_event_) yaml_event_delete(&event_);
    has_event_ = false;
    if (!yaml_parser_parse(&parser_, &event_)) syntaxError();
    has_event_ = true;
    return event_;
  }
  const yaml_event_t& current() const { return event_; }

  [[noreturn]] void failAt(const yaml_mark_t& mark, std::string_view message) const {
    EVSIM_THROW(InputError, "{}:{}:{}: malformed YAML: {}", origin_, mark.line + 1, mark.column + 1,
                message);
  }

 private:
  [[noreturn]] void syntaxError() const {
    const std::string problem = parser_.problem != nullptr ? parser_.problem : "syntax error";
    if (parser_.error == YAML_READER_ERROR) {
      // Invalid UTF-8 or a character YAML does not allow: libyaml gives a byte offset.
      EVSIM_THROW(InputError, "{}: malformed YAML: {} at byte {}", origin_, problem,
                  parser_.problem_offset);
    }
    if (parser_.error == YAML_MEMORY_ERROR) {
      EVSIM_THROW(EnvironmentError, "{}: out of memory while parsing YAML", origin_);
    }
    const std::string context =
        parser_.context != nullptr ? fmt::format(" ({})", parser_.context) : "";
    failAt(parser_.problem_mark, problem + context);
  }

  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool has_event_ = false;
  const std::string& origin_;
};

// yaml-cpp reads an empty plain value and "~"/"null" as null; so does this.
bool isNullScalar(const yaml_event_t& e) {
  if (e.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
  const std::string_view v(reinterpret_cast<const char*>(e.data.scalar.value),
                           e.data.scalar.length);
  return v.empty() || v == "~" || v == "null" || v == "Null" || v == "NULL";
}

// Builds the node whose first event is `in.current()`; returns with its last event current.
YAML::Node build(EventReader& in, int depth) {
  const yaml_event_t& e = in.current();
  if (depth > kMaxYamlDepth) {
    in.failAt(e.start_mark, fmt::format("nested deeper than {} levels", kMaxYamlDepth));
  }
  switch (e.type) {
    case YAML_SCALAR_EVENT:
      if (isNullScalar(e)) return YAML::Node(YAML::NodeType::Null);
      return YAML::Node(
          std::string(reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length));
    case YAML_SEQUENCE_START_EVENT: {
      YAML::Node seq(YAML::NodeType::Sequence);
      while (in.next().type != YAML_SEQUENCE_END_EVENT) seq.push_back(build(in, depth + 1));
      return seq;
    }
    case YAML_MAPPING_START_EVENT: {
      YAML::Node map(YAML::NodeType::Map);
      while (in.next().type != YAML_MAPPING_END_EVENT) {
        YAML::Node key = build(in, depth + 1);
        in.next();
        // force_insert keeps a repeated key (YamlReader::allowOnly refuses it by name).
        map.force_insert(key, build(in, depth + 1));
      }
      return map;
    }
    case YAML_ALIAS_EVENT:
      in.failAt(e.start_mark, "YAML aliases are not supported");
    default:
      in.failAt(e.start_mark, "unexpected YAML event");
  }
}

// The first document's top-level mapping, with `streamed_key`'s sequence items sent to `sink`.
YAML::Node buildStreamedRoot(EventReader& in, const std::string& streamed_key,
                             const YamlItemSink& sink) {
  YAML::Node map(YAML::NodeType::Map);
  while (in.next().type != YAML_MAPPING_END_EVENT) {
    YAML::Node key = build(in, 1);
    const yaml_event_t& value = in.next();
    if (value.type == YAML_SEQUENCE_START_EVENT && key.IsScalar() && key.Scalar() == streamed_key) {
      size_t index = 0;
      while (in.next().type != YAML_SEQUENCE_END_EVENT) sink(index++, build(in, 2));
      map.force_insert(key, YAML::Node(YAML::NodeType::Sequence));
    } else {
      map.force_insert(key, build(in, 1));
    }
  }
  return map;
}

}  // namespace

std::vector<YAML::Node> parseYamlDocuments(const std::string& text, const std::string& origin,
                                           const std::string& streamed_key,
                                           const YamlItemSink& sink) {
  EventReader in(text, origin);
  std::vector<YAML::Node> documents;
  in.next();  // stream start
  while (in.next().type == YAML_DOCUMENT_START_EVENT) {
    in.next();
    const bool stream = documents.empty() && !streamed_key.empty() && sink &&
                        in.current().type == YAML_MAPPING_START_EVENT;
    documents.push_back(stream ? buildStreamedRoot(in, streamed_key, sink) : build(in, 0));
    in.next();  // document end
  }
  return documents;
}

}  // namespace evsim
