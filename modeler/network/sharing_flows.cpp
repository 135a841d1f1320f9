// The start order of link sharing's flows; sharing_flows.h.
#include "modeler/network/sharing_flows.h"

#include <algorithm>

namespace evsim::sharing {

StartOrder::StartOrder(const Flows& flows, bool forward) : flows_(flows), forward_(forward) {
  // The maximal runs of sharing flows with rising start times, in the list's order.
  const int n = static_cast<int>(flows.list->size());
  std::vector<std::pair<int, int>> runs;  // first and last sharing flow of each
  int last = -1;
  for (int f = 0; f < n; ++f) {
    if (!flows.sharing(f)) continue;
    if (last < 0 || flows.startUs(f) < flows.startUs(last)) {
      runs.push_back({f, f});
    } else {
      runs.back().second = f;
    }
    last = f;
  }
  for (const auto& [first, final] : runs) {
    heads_.push_back(forward ? Head{first, final + 1} : Head{final, first - 1});
  }
  auto cmp = [this](const Head& a, const Head& b) { return later(a, b); };
  std::make_heap(heads_.begin(), heads_.end(), cmp);
}

int StartOrder::pop() {
  auto cmp = [this](const Head& a, const Head& b) { return later(a, b); };
  std::pop_heap(heads_.begin(), heads_.end(), cmp);
  Head& head = heads_.back();
  const int f = head.flow;
  // The run's next sharing flow (the runs hold the flows that do not share between theirs).
  const int step = forward_ ? 1 : -1;
  int g = f + step;
  while (g != head.end && !flows_.sharing(g)) g += step;
  if (g == head.end) {
    heads_.pop_back();
  } else {
    head.flow = g;
    std::push_heap(heads_.begin(), heads_.end(), cmp);
  }
  return f;
}

}  // namespace evsim::sharing
