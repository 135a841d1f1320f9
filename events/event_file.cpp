#include "events/event_file.h"

#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "common/error.h"
#include "common/yaml_reader.h"

namespace evsim {

std::string_view scopeName(const Placement& placement) {
  return placement.interNode() ? "inter" : "intra";
}

std::string eventsFileYaml(const EventTable& table, int64_t op_executions,
                           const std::vector<std::pair<std::string, std::string>>& source) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "eventsim_events" << YAML::Value << kEventsFileVersion;
  out << YAML::Key << "source" << YAML::Value << YAML::Flow << YAML::BeginMap;
  for (const auto& [key, value] : source) out << YAML::Key << key << YAML::Value << value;
  out << YAML::EndMap;
  out << YAML::Key << "op_executions" << YAML::Value << op_executions;
  out << YAML::Key << "unique_events" << YAML::Value << table.size();
  out << YAML::Key << "events" << YAML::Value << YAML::BeginSeq;
  for (const UniqueEvent& u : table.events()) {
    const Event& e = u.event;
    out << YAML::BeginMap;
    out << YAML::Key << "signature" << YAML::Value << YAML::DoubleQuoted << u.signature;
    out << YAML::Key << "kind" << YAML::Value << std::string(eventKindName(e.kind));
    out << YAML::Key << "op" << YAML::Value << e.op;
    out << YAML::Key << "count" << YAML::Value << u.count;
    if (e.kind == EventKind::kCompute) {
      out << YAML::Key << "flops" << YAML::Value << static_cast<int64_t>(e.flops);
      out << YAML::Key << "bytes" << YAML::Value << e.memory_bytes;
    } else {
      out << YAML::Key << "bytes" << YAML::Value << e.message_bytes;
      out << YAML::Key << "group_size" << YAML::Value << e.placement.group_size;
      out << YAML::Key << "scope" << YAML::Value << std::string(scopeName(e.placement));
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

namespace {
std::vector<UniqueEvent> readEventsFile(const YamlReader& root);
}  // namespace

std::vector<UniqueEvent> loadEventsFile(const std::string& path) {
  return readEventsFile(YamlReader::fromFile(path));
}

std::vector<UniqueEvent> parseEventsFile(const std::string& text, const std::string& origin) {
  return readEventsFile(YamlReader::fromString(text, origin));
}

namespace {
std::vector<UniqueEvent> readEventsFile(const YamlReader& root) {
  root.allowOnly({"eventsim_events", "source", "op_executions", "unique_events", "events"});
  if (root.nonNegativeInt("eventsim_events") != kEventsFileVersion) {
    root.fail("eventsim_events",
              fmt::format("version {} not supported (this build reads {})",
                          root.nonNegativeInt("eventsim_events"), kEventsFileVersion));
  }
  std::vector<UniqueEvent> events;
  // A signature listed twice (a hand-edited or concatenated file) was merged without a word;
  // refused as the profile database refuses it.
  std::set<std::string> seen;
  for (const YamlReader& item : root.items("events")) {
    item.allowOnly({"signature", "kind", "op", "count", "flops", "bytes", "group_size", "scope"});
    UniqueEvent u;
    u.signature = item.str("signature");
    u.event = parseEventSignature(u.signature, item.where("signature"));
    u.signature = u.event.signature();  // normalised spelling
    if (!seen.insert(u.signature).second) {
      item.fail("signature", fmt::format("'{}' appears twice", u.signature));
    }
    if (item.has("kind") && item.str("kind") != eventKindName(u.event.kind)) {
      item.fail("kind", fmt::format("'{}' contradicts the signature's kind '{}'", item.str("kind"),
                                    eventKindName(u.event.kind)));
    }
    u.count = item.has("count") ? item.nonNegativeInt("count") : 0;
    events.push_back(std::move(u));
  }
  if (events.empty()) root.fail("events", "lists no events");
  return events;
}
}  // namespace

}  // namespace evsim
