// The start order of link sharing's flows; sharing_flows.h.
#include "modeler/network/sharing_flows.h"

#include <algorithm>
#include <limits>

namespace evsim::sharing {

StartOrder::StartOrder(const Flows& flows, bool forward) : flows_(flows), forward_(forward) {
  // The maximal runs of sharing flows with rising start times, in the list's order.
  const int n = static_cast<int>(flows.list->size());
  std::vector<std::pair<int, int>> runs;  // first and last sharing flow of each
  int last = -1;
  for (int f = 0; f < n; ++f) {
    if (!flows.sharing(f)) continue;
    ++left_;
    if (last < 0 || flows.startUs(f) < flows.startUs(last)) {
      runs.push_back({f, f});
    } else {
      runs.back().second = f;
    }
    last = f;
  }
  const size_t k = runs.size();
  heads_.resize(k);
  for (size_t r = 0; r < k; ++r) {
    const auto [first, final] = runs[r];
    heads_[r].end = forward ? final + 1 : first - 1;
    place(heads_[r], forward ? first : final);
  }
  // Play the tournament bottom up: winner[i] the run first below node i, tree_[i] the loser there.
  tree_.assign(std::max<size_t>(k, 1), 0);
  std::vector<int> winner(2 * k);
  for (size_t r = 0; r < k; ++r) winner[k + r] = static_cast<int>(r);
  for (size_t i = k - 1; i >= 1 && k > 1; --i) {
    const int a = winner[2 * i], b = winner[2 * i + 1];
    const bool a_first = before(a, b);
    winner[i] = a_first ? a : b;
    tree_[i] = a_first ? b : a;
  }
  if (k > 0) tree_[0] = winner[1];  // k = 1: the lone leaf, node 1
}

void StartOrder::place(Head& head, int flow) const {
  if (flow == head.end) {  // spent: after every flow
    head.key = std::numeric_limits<double>::infinity();
    head.rank = std::numeric_limits<int>::max();
    return;
  }
  head.flow = flow;
  const double start = flows_.startUs(flow);
  head.key = forward_ ? start : -start;
  head.rank = forward_ ? flow : -flow;
}

int StartOrder::pop() {
  const int run = tree_[0];
  Head& head = heads_[static_cast<size_t>(run)];
  const int f = head.flow;
  --left_;
  // The run's next sharing flow (the runs hold the flows that do not share between theirs).
  const int step = forward_ ? 1 : -1;
  int g = f + step;
  while (g != head.end && !flows_.sharing(g)) g += step;
  place(head, g);
  // Replay the run's path to the root: at each node the first of the two goes on up.
  int up = run;
  for (size_t node = (heads_.size() + static_cast<size_t>(run)) / 2; node > 0; node /= 2) {
    if (before(tree_[node], up)) std::swap(tree_[node], up);
  }
  tree_[0] = up;
  return f;
}

}  // namespace evsim::sharing
