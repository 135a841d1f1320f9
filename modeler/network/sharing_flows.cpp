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
  Head& top = heads_.front();
  const int f = top.flow;
  // The run's next sharing flow (the runs hold the flows that do not share between theirs) takes
  // the top's place and sinks to its place: most often it stays (a run goes on), two comparisons.
  const int step = forward_ ? 1 : -1;
  int g = f + step;
  while (g != top.end && !flows_.sharing(g)) g += step;
  if (g == top.end) {
    top = heads_.back();
    heads_.pop_back();
  } else {
    top.flow = g;
  }
  const size_t n = heads_.size();
  size_t at = 0;
  while (true) {
    const size_t left = 2 * at + 1;
    if (left >= n) break;
    size_t child = left;
    if (left + 1 < n && later(heads_[left], heads_[left + 1])) child = left + 1;
    if (!later(heads_[at], heads_[child])) break;
    std::swap(heads_[at], heads_[child]);
    at = child;
  }
  return f;
}

}  // namespace evsim::sharing
