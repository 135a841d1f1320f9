#include "plan/sharded_prefetch.h"

#include <algorithm>
#include <cstddef>
#include <vector>

namespace evsim {
namespace {

// kHostCopy: an activation offload or prefetch on the host stream. It does not hold the device,
// so it neither ends nor starts a unit: it joins the ops of the unit that follows it.
enum class Role { kGather, kBody, kScatter, kHostCopy };

Role roleOf(const OpInstance& op, const EventTable& table) {
  if (op.stream == Stream::kHost) return Role::kHostCopy;
  if (op.stream != Stream::kDpComm) return Role::kBody;
  const EventKind kind = table[op.event].event.kind;
  if (kind == EventKind::kAllGather) return Role::kGather;
  if (kind == EventKind::kReduceScatter) return Role::kScatter;
  return Role::kBody;
}

// Positions (into the original list) of one unit's gathers, other ops and scatters.
struct Unit {
  std::vector<size_t> gathers, body, scatters;
};

}  // namespace

void prefetchShardedTransfers(OpList& ops, const EventTable& table) {
  std::vector<Unit> units;
  std::vector<Role> roles(ops.size());
  std::vector<size_t> host_copies;  // waiting for the unit that follows them
  bool any = false;
  Role last = Role::kScatter;  // a gather or body op after a scatter starts a unit
  for (size_t i = 0; i < ops.size(); ++i) {
    const Role role = roles[i] = roleOf(ops[i], table);
    if (role == Role::kHostCopy) {
      host_copies.push_back(i);
      continue;
    }
    const bool starts = units.empty() || (role == Role::kGather && last != Role::kGather) ||
                        (role == Role::kBody && last == Role::kScatter);
    if (starts) units.emplace_back();
    Unit& unit = units.back();
    if (!host_copies.empty() && role != Role::kScatter) {
      unit.body.insert(unit.body.end(), host_copies.begin(), host_copies.end());
      host_copies.clear();
    }
    if (role == Role::kGather) unit.gathers.push_back(i);
    if (role == Role::kBody) unit.body.push_back(i);
    if (role == Role::kScatter) unit.scatters.push_back(i);
    any = any || role != Role::kBody;
    last = role;
  }
  if (!any) return;
  // Copies after the last device op stay last (they run beside nothing that follows).
  std::vector<size_t> trailing = std::move(host_copies);

  // The new order, as positions into the old list, and which transfers run beside which body.
  std::vector<size_t> order;
  std::vector<int> beside_span(ops.size(), -1);  // new overlap_ops of a moved transfer
  order.reserve(ops.size());
  for (size_t g : units.front().gathers) order.push_back(g);  // exposed: nothing before it
  for (size_t u = 0; u < units.size(); ++u) {
    std::vector<size_t> beside;
    if (u > 0) beside = units[u - 1].scatters;
    if (u + 1 < units.size()) {
      beside.insert(beside.end(), units[u + 1].gathers.begin(), units[u + 1].gathers.end());
    }
    const size_t body = units[u].body.size();
    for (size_t j = 0; j < beside.size(); ++j) {
      // Each runs beside the transfers after it and the unit's ops; with no ops, it blocks.
      beside_span[beside[j]] = body == 0 ? 0 : static_cast<int>(beside.size() - 1 - j + body);
      order.push_back(beside[j]);
    }
    order.insert(order.end(), units[u].body.begin(), units[u].body.end());
  }
  for (size_t s : units.back().scatters) order.push_back(s);  // exposed: the task ends after it
  order.insert(order.end(), trailing.begin(), trailing.end());

  std::vector<size_t> new_position(ops.size());
  for (size_t p = 0; p < order.size(); ++p) new_position[order[p]] = p;
  OpList out;
  out.reserve(ops.size());
  for (size_t p = 0; p < order.size(); ++p) {
    OpInstance op = ops[order[p]];
    if (beside_span[order[p]] >= 0) {
      op.overlap_ops = beside_span[order[p]];
    } else if (op.overlap_ops > 0) {
      // Still beside the same device ops: up to where the last one it covered now stands (the
      // gathers and scatters it covered have moved to other units). Covering none, it is released
      // where the op after its span now stands (the list's end if none).
      const size_t first = order[p] + 1;
      const size_t release = std::min(first + static_cast<size_t>(op.overlap_ops), ops.size());
      size_t at = release < ops.size() ? new_position[release] : ops.size();
      for (size_t k = release; k > first; --k) {
        if (roles[k - 1] == Role::kBody || roles[k - 1] == Role::kHostCopy) {
          at = new_position[k - 1] + 1;
          break;
        }
      }
      op.overlap_ops = at > p ? static_cast<int>(at - p - 1) : 0;
    }
    out.push_back(op);
  }
  ops = std::move(out);
}

void renumberInFirstUseOrder(EventTable& table, std::vector<StagePlan>& stages,
                             const std::vector<int>& stage_events_end) {
  const int n = table.size();
  std::vector<int> order;  // new index -> old index
  std::vector<int> renumbered(static_cast<size_t>(n), -1);
  order.reserve(static_cast<size_t>(n));
  auto take = [&](int old) {
    if (old < 0 || renumbered[old] >= 0) return;
    renumbered[old] = static_cast<int>(order.size());
    order.push_back(old);
  };
  int begin = 0;
  for (size_t k = 0; k < stages.size() && k < stage_events_end.size(); ++k) {
    const int end = stage_events_end[k];
    for (bool copies : {false, true}) {
      for (const OpList* ops : {&stages[k].forward, &stages[k].backward}) {
        for (const OpInstance& op : *ops) {
          // An event of an earlier chunk keeps its number; one past this chunk's range is not
          // this chunk's to place (the plan core interns none such).
          if ((op.stream == Stream::kHost) == copies && op.event >= begin && op.event < end) {
            take(op.event);
          }
        }
      }
    }
    for (int old = begin; old < end; ++old) take(old);
    begin = end;
  }
  for (int old = begin; old < n; ++old) take(old);
  bool identity = true;
  for (int i = 0; i < n && identity; ++i) identity = order[i] == i;
  if (identity) return;
  EventTable out;
  for (int old : order) out.appendNew(table[old], table.hashAt(old));
  table = std::move(out);
  for (StagePlan& stage : stages) {
    for (OpList* ops : {&stage.forward, &stage.backward}) {
      for (OpInstance& op : *ops) op.event = renumbered[op.event];
    }
  }
}

}  // namespace evsim
