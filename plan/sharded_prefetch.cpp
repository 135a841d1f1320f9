#include "plan/sharded_prefetch.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "common/error.h"

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

// One op's place in the pass: its role, and the unit it joins (-1: a host copy after the last
// device op, which stays last).
struct Placed {
  Role role = Role::kBody;
  int unit = -1;
};

// A unit's ops of one kind, as positions into the original list (increasing).
struct Span {
  const size_t* begin = nullptr;
  const size_t* end = nullptr;
  size_t size() const { return static_cast<size_t>(end - begin); }
};

// prefetchShardedTransfers' arrays, kept per thread across its calls (two per ZeRO-3 chunk of
// every plan core a search builds: 19,402 calls in Llama 3 70B's search on 1,024 GPUs, eight
// vectors each, were 4.4% of its heap allocations; bench/RESULTS.md, session 26, alloc34). Each
// call sizes every array it reads before reading it, so what an earlier call left changes
// nothing; the storage kept is that of the longest list the thread has reordered (~100 bytes per
// op).
struct PrefetchScratch {
  std::vector<Placed> placed;
  std::vector<size_t> group_start, grouped, next, order, new_position;
  std::vector<int> beside_span;
  OpList ops;
};

}  // namespace

// A unit's gathers, other ops (host copies included) and scatters are each increasing in
// position, so they are kept as three runs of one array, grouped by a counting sort, instead of
// three vectors per unit: this runs for every ZeRO-3 task list of every simulated candidate (a
// search's simulations built ~3 vectors per layer here, 14% of Llama 3 70B's search's heap
// allocations on 1,024 GPUs, contended at two threads: bench/RESULTS.md, session 25, thr34b).
void prefetchShardedTransfers(OpList& ops, const EventTable& table) {
  const size_t n = ops.size();
  thread_local PrefetchScratch scratch;
  std::vector<Placed>& placed = scratch.placed;
  placed.assign(n, Placed{});
  size_t pending_from = n;  // the first host copy waiting for the unit that follows it
  int units = 0;
  bool any = false;
  Role last = Role::kScatter;  // a gather or body op after a scatter starts a unit
  for (size_t i = 0; i < n; ++i) {
    const Role role = placed[i].role = roleOf(ops[i], table);
    if (role == Role::kHostCopy) {
      if (pending_from == n) pending_from = i;
      continue;
    }
    const bool starts = units == 0 || (role == Role::kGather && last != Role::kGather) ||
                        (role == Role::kBody && last == Role::kScatter);
    if (starts) ++units;
    const int unit = units - 1;
    if (pending_from != n && role != Role::kScatter) {
      // The copies waiting join this unit's other ops, before this one.
      for (size_t c = pending_from; c < i; ++c) {
        if (placed[c].role == Role::kHostCopy && placed[c].unit < 0) placed[c].unit = unit;
      }
      pending_from = n;
    }
    placed[i].unit = unit;
    any = any || role != Role::kBody;
    last = role;
  }
  if (!any) return;

  // Group k = 3 * unit + (0 gathers, 1 other ops, 2 scatters); the copies left waiting (unit -1)
  // after every group.
  auto groupOf = [&](const Placed& p) -> size_t {
    if (p.unit < 0) return 3 * static_cast<size_t>(units);
    const size_t kind = p.role == Role::kGather ? 0 : p.role == Role::kScatter ? 2 : 1;
    return 3 * static_cast<size_t>(p.unit) + kind;
  };
  const size_t groups = 3 * static_cast<size_t>(units) + 1;
  std::vector<size_t>& group_start = scratch.group_start;
  group_start.assign(groups + 1, 0);
  for (const Placed& p : placed) ++group_start[groupOf(p) + 1];
  for (size_t g = 0; g < groups; ++g) group_start[g + 1] += group_start[g];
  std::vector<size_t>& grouped = scratch.grouped;
  grouped.assign(n, 0);
  {
    std::vector<size_t>& next = scratch.next;
    next.assign(group_start.begin(), group_start.end() - 1);
    for (size_t i = 0; i < n; ++i) grouped[next[groupOf(placed[i])]++] = i;
  }
  auto span = [&](int unit, size_t kind) {
    const size_t g = 3 * static_cast<size_t>(unit) + kind;
    return Span{grouped.data() + group_start[g], grouped.data() + group_start[g + 1]};
  };

  // The new order, as positions into the old list, and which transfers run beside which body.
  std::vector<size_t>& order = scratch.order;
  order.clear();
  std::vector<int>& beside_span = scratch.beside_span;
  beside_span.assign(n, -1);  // new overlap_ops of a moved transfer
  const Span first_gathers = span(0, 0);
  order.insert(order.end(), first_gathers.begin, first_gathers.end);  // exposed: nothing before
  for (int u = 0; u < units; ++u) {
    // Beside the unit's ops: the scatters of the unit before, then the gathers of the one after.
    const Span before = u > 0 ? span(u - 1, 2) : Span{};
    const Span after = u + 1 < units ? span(u + 1, 0) : Span{};
    const size_t beside = before.size() + after.size();
    const Span body = span(u, 1);
    size_t j = 0;
    for (const Span& run : {before, after}) {
      for (const size_t* at = run.begin; at != run.end; ++at, ++j) {
        // Each runs beside the transfers after it and the unit's ops; with no ops, it blocks.
        beside_span[*at] = body.size() == 0 ? 0 : static_cast<int>(beside - 1 - j + body.size());
        order.push_back(*at);
      }
    }
    order.insert(order.end(), body.begin, body.end);
  }
  const Span last_scatters = span(units - 1, 2);
  order.insert(order.end(), last_scatters.begin, last_scatters.end);  // exposed: the task ends
  // Copies after the last device op stay last (they run beside nothing that follows).
  order.insert(order.end(), grouped.data() + group_start[groups - 1], grouped.data() + n);

  std::vector<size_t>& new_position = scratch.new_position;
  new_position.assign(n, 0);
  for (size_t p = 0; p < order.size(); ++p) new_position[order[p]] = p;
  // The old list copied aside, the new order written back into `ops` (its storage kept).
  const OpList& old_ops = scratch.ops;
  scratch.ops.assign(ops.begin(), ops.end());
  EVSIM_CHECK(order.size() == n, "{} ops reordered into {}", n, order.size());
  for (size_t p = 0; p < order.size(); ++p) {
    OpInstance op = old_ops[order[p]];
    if (beside_span[order[p]] >= 0) {
      op.overlap_ops = beside_span[order[p]];
    } else if (op.overlap_ops > 0) {
      // Still beside the same device ops: up to where the last one it covered now stands (the
      // gathers and scatters it covered have moved to other units). Covering none, it is released
      // where the op after its span now stands (the list's end if none).
      const size_t first = order[p] + 1;
      const size_t release = std::min(first + static_cast<size_t>(op.overlap_ops), n);
      size_t at = release < n ? new_position[release] : n;
      for (size_t k = release; k > first; --k) {
        const Role role = placed[k - 1].role;
        if (role == Role::kBody || role == Role::kHostCopy) {
          at = new_position[k - 1] + 1;
          break;
        }
      }
      op.overlap_ops = at > p ? static_cast<int>(at - p - 1) : 0;
    }
    ops[p] = op;
  }
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
  table.reorder(order);
  for (StagePlan& stage : stages) {
    for (OpList* ops : {&stage.forward, &stage.backward}) {
      for (OpInstance& op : *ops) op.event = renumbered[op.event];
    }
  }
}

}  // namespace evsim
