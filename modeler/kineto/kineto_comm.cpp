#include "modeler/kineto/kineto_comm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>
#include <tuple>

namespace evsim {
namespace {

// "_allgather_base" -> "allgather", "reduce_scatter_tensor_coalesced" -> "reducescatter".
std::string normalized(const std::string& name) {
  std::string n;
  for (char ch : name) {
    if (ch != '_') n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  }
  for (const char* suffix : {"coalesced", "base", "intotensor", "tensor"}) {
    const std::string s(suffix);
    if (n.size() > s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0) {
      n.erase(n.size() - s.size());
    }
  }
  return n;
}

std::optional<EventKind> kindOf(const std::string& name) {
  static const std::map<std::string, EventKind> kinds = {
      {"allreduce", EventKind::kAllReduce},
      {"allgather", EventKind::kAllGather},
      {"reducescatter", EventKind::kReduceScatter},
      {"alltoall", EventKind::kAllToAll},
      {"send", EventKind::kP2P},
      {"recv", EventKind::kP2P},
      {"broadcast", EventKind::kBroadcast}};
  auto it = kinds.find(normalized(name));
  return it == kinds.end() ? std::nullopt : std::optional<EventKind>(it->second);
}

// c10::ScalarType names as the trace writes them: eventsim's dtype (none for integer and double
// buffers) and the element size.
struct TraceDType {
  std::optional<DType> dtype;
  int64_t bytes = 0;
};
std::optional<TraceDType> dtypeOf(const std::string& name) {
  static const std::map<std::string, TraceDType> types = {
      {"Float", {DType::kFp32, 4}},      {"BFloat16", {DType::kBf16, 2}},
      {"Half", {DType::kFp16, 2}},       {"Float8_e4m3fn", {DType::kFp8, 1}},
      {"Float8_e5m2", {DType::kFp8, 1}}, {"Double", {std::nullopt, 8}},
      {"Int", {std::nullopt, 4}},        {"Long", {std::nullopt, 8}},
      {"Byte", {std::nullopt, 1}},       {"Char", {std::nullopt, 1}}};
  auto it = types.find(name);
  return it == types.end() ? std::nullopt : std::optional(it->second);
}

Placement placementOf(const std::vector<int64_t>& ranks, int gpus_per_node) {
  std::map<int64_t, int> per_node;
  for (int64_t r : ranks) ++per_node[r / gpus_per_node];
  Placement p;
  p.group_size = static_cast<int>(ranks.size());
  p.nodes = static_cast<int>(per_node.size());
  p.ranks_per_node = 0;
  for (const auto& [node, n] : per_node) p.ranks_per_node = std::max(p.ranks_per_node, n);
  return p;
}

}  // namespace

KinetoCollectiveMatch matchKinetoCollective(const KinetoCollective& c, const EventTable& table,
                                            int gpus_per_node) {
  KinetoCollectiveMatch m;
  const std::string ranks =
      c.ranks.empty() ? std::string() : fmt::format(" [{}]", fmt::join(c.ranks, ", "));
  m.what = fmt::format("{} {}x{} group {}{}", c.name, std::max(c.in_elems, c.out_elems), c.dtype,
                       c.group_size, ranks);
  const std::optional<EventKind> kind = kindOf(c.name);
  if (!kind) {
    m.reason = "no eventsim collective";
    return m;
  }
  const auto type = dtypeOf(c.dtype);
  if (!type) {
    m.reason = fmt::format("unknown dtype '{}'", c.dtype);
    return m;
  }
  const bool full_buffer = *kind == EventKind::kAllGather || *kind == EventKind::kReduceScatter;
  const int64_t elems = full_buffer ? std::max(c.in_elems, c.out_elems) : c.in_elems;
  const int64_t bytes = elems * type->bytes;
  m.what = fmt::format("{} ({} bytes={} group={})", m.what, eventKindName(*kind), bytes,
                       *kind == EventKind::kP2P ? 2 : c.group_size);
  const bool p2p = *kind == EventKind::kP2P;
  const bool placed = !p2p && gpus_per_node > 0 && !c.ranks.empty() &&
                      static_cast<int>(c.ranks.size()) == c.group_size;
  const Placement where = placed ? placementOf(c.ranks, gpus_per_node) : Placement{};
  std::vector<int> candidates;
  for (int i = 0; i < table.size(); ++i) {
    const Event& e = table[i].event;
    if (e.kind != *kind || e.message_bytes != bytes) continue;
    if (!p2p && e.placement.group_size != c.group_size) continue;
    if (placed && !(e.placement == where)) continue;
    candidates.push_back(i);
  }
  if (candidates.empty()) {
    m.reason = "not an event of the plan";
    return m;
  }
  std::set<std::tuple<int, int, int>> placements;
  for (int i : candidates) {
    const Placement& p = table[i].event.placement;
    placements.emplace(p.group_size, p.nodes, p.ranks_per_node);
  }
  if (placements.size() > 1) {
    m.reason = "several placements of the plan fit (the trace gives no Process Group Ranks)";
    return m;
  }
  // Those of the trace's dtype when the plan has some (the wire dtype only names the event).
  for (int i : candidates) {
    if (type->dtype && table[i].event.dtype == *type->dtype) m.events.push_back(i);
  }
  if (m.events.empty()) m.events = candidates;
  return m;
}

}  // namespace evsim
