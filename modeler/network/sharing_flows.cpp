// The start order of link sharing's flows; sharing_flows.h.
#include "modeler/network/sharing_flows.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/error.h"

namespace evsim::sharing {

StartOrder::StartOrder(const Flows& flows) : flows_(flows) {
  // The maximal runs of sharing flows with rising start times, in the list's order.
  const int n = static_cast<int>(flows.list->size());
  int last = -1;
  for (int f = 0; f < n; ++f) {
    if (!flows.sharing(f)) continue;
    ++total_;
    if (last < 0 || flows.startUs(f) < flows.startUs(last)) {
      heads_.push_back({0, 0, 0, f, f});
    } else {
      heads_.back().last = f;
    }
    last = f;
  }
  const size_t k = heads_.size();
  width_ = k <= 1u << 8 ? 1 : k <= 1u << 16 ? 2 : 4;
  record_.resize(total_ * width_);
  for (Head& head : heads_) place(head, head.last);
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
  if (flow < head.first) {  // spent: after every flow
    head.key = std::numeric_limits<double>::infinity();
    head.rank = std::numeric_limits<int>::max();
    return;
  }
  head.flow = flow;
  head.key = -flows_.startUs(flow);
  head.rank = -flow;
}

int StartOrder::popLatest() {
  const int run = tree_[0];
  Head& head = heads_[static_cast<size_t>(run)];
  const int f = head.flow;
  record(merged_++, run);
  // The run's sharing flow before f (the runs hold the flows that do not share between theirs).
  int g = f - 1;
  while (g >= head.first && !flows_.sharing(g)) --g;
  place(head, g);
  // Replay the run's path to the root: at each node the first of the two goes on up.
  int up = run;
  for (size_t node = (heads_.size() + static_cast<size_t>(run)) / 2; node > 0; node /= 2) {
    if (before(tree_[node], up)) std::swap(tree_[node], up);
  }
  tree_[0] = up;
  return f;
}

void StartOrder::record(size_t i, int run) {
  if (width_ == 1) {
    record_[i] = static_cast<uint8_t>(run);
  } else if (width_ == 2) {
    const auto narrow = static_cast<uint16_t>(run);
    std::memcpy(record_.data() + 2 * i, &narrow, 2);
  } else {
    const auto wide = static_cast<uint32_t>(run);
    std::memcpy(record_.data() + 4 * i, &wide, 4);
  }
}

void StartOrder::turn() {
  EVSIM_CHECK(latestDone(), "start order turned after {} of {} flows", merged_, total_);
  for (Head& head : heads_) head.flow = head.first;
  left_ = total_;
  next_ = left_ > 0 ? heads_[recorded(left_ - 1)].flow : -1;
}

int StartOrder::pop() {
  // The merge's pops from the last: the earliest flow left is the head of the last one's run.
  const int f = next_;
  Head& head = heads_[recorded(--left_)];
  int g = f + 1;
  while (g <= head.last && !flows_.sharing(g)) ++g;
  head.flow = g;
  next_ = left_ > 0 ? heads_[recorded(left_ - 1)].flow : -1;
  return f;
}

}  // namespace evsim::sharing
