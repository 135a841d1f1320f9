// Link sharing's start order (modeler/network/sharing_flows.h): merged once latest first, its runs
// recorded, then replayed earliest first; both directions against orders traced by hand and, for
// the wider records (more than 256 and 65,536 runs), against a sort of (start, index).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "modeler/network/link_sharing.h"
#include "modeler/network/sharing_flows.h"

namespace evsim {
namespace {

// A list of flows at `starts`, each sharing (1000 bytes in 10 us over resource 0) unless its
// entry of `quiet` is set (0 bytes: it takes no part in sharing), and the Flows that read it.
struct Listed {
  FlowList list;
  sharing::Flows flows;
  Listed(const std::vector<double>& starts, const std::vector<bool>& quiet) {
    const int loud = list.addShape(10, 1000, {{0, 1}});
    const int silent = list.addShape(10, 0, {{0, 1}});
    for (size_t f = 0; f < starts.size(); ++f) list.add(starts[f], quiet[f] ? silent : loud);
    flows.list = &list;
    flows.shape_duration_us = {10, 10};
    flows.shape_demand = {100, 0};
    flows.shape_shares = {1, 0};
  }
};

std::vector<int> latestFirst(sharing::StartOrder& order) {
  std::vector<int> out;
  while (!order.latestDone()) out.push_back(order.popLatest());
  return out;
}

std::vector<int> earliestFirst(sharing::StartOrder& order) {
  std::vector<int> out;
  while (!order.done()) {
    const int head = order.peek();
    const int f = order.pop();
    EXPECT_EQ(head, f) << "peek and pop disagree at " << out.size();
    out.push_back(f);
  }
  return out;
}

// Ten flows (start, * = does not share):
//   0: 5, 1: 7, 2: 6*, 3: 9 | 4: 2, 5: 7, 6: 8*, 7: 9 | 8: 1, 9: 5
// Runs of rising starts among the sharing flows: {0, 1, 3}, {4, 5, 7}, {8, 9} (flow 2 sits inside
// the first run, 6 inside the second: they neither split a run nor appear). By start, ties by
// index: 8 (1), 4 (2), 0 and 9 (5), 1 and 5 (7), 3 and 7 (9). Latest first is that reversed.
TEST(StartOrder, ThreeRunsWithTiesAndQuietFlowsBothWays) {
  Listed l({5, 7, 6, 9, 2, 7, 8, 9, 1, 5},
           {false, false, true, false, false, false, true, false, false, false});
  sharing::StartOrder order(l.flows);
  EXPECT_EQ(latestFirst(order), (std::vector<int>{7, 3, 5, 1, 9, 0, 4, 8}));
  order.turn();
  EXPECT_EQ(earliestFirst(order), (std::vector<int>{8, 4, 0, 9, 1, 5, 3, 7}));
}

// One run, its last flow quiet (the replay must stop at the run's last sharing flow, not step
// into the quiet one), and a list with no sharing flow at all.
TEST(StartOrder, OneRunAndNone) {
  Listed one({1, 2, 3, 4}, {false, true, false, true});
  sharing::StartOrder order(one.flows);
  EXPECT_EQ(latestFirst(order), (std::vector<int>{2, 0}));
  order.turn();
  EXPECT_EQ(earliestFirst(order), (std::vector<int>{0, 2}));
  Listed none({1, 2}, {true, true});
  sharing::StartOrder empty(none.flows);
  EXPECT_TRUE(empty.latestDone());
  empty.turn();
  EXPECT_TRUE(empty.done());
}

// Flow f starts at (919 f) mod 1000 (every fifth quiet): almost every step falls, so nearly
// every flow is a run of its own and the runs need two bytes (330 flows) or four (70,001) in the
// record. Both directions against a sort of the sharing flows by (start, index).
TEST(StartOrder, ManyRunsNeedWiderRecords) {
  for (const int n : {400, 120000}) {
    SCOPED_TRACE(n);
    std::vector<double> starts(static_cast<size_t>(n));
    std::vector<bool> quiet(static_cast<size_t>(n));
    std::vector<int> expected;
    for (int f = 0; f < n; ++f) {
      starts[f] = static_cast<double>((919LL * f) % 1000);
      quiet[f] = f % 5 == 4;
      if (!quiet[f]) expected.push_back(f);
    }
    size_t runs = expected.empty() ? 0 : 1;
    for (size_t i = 1; i < expected.size(); ++i) runs += starts[expected[i]] < starts[expected[i - 1]];
    EXPECT_GT(runs, n == 400 ? 256u : 65536u);
    std::stable_sort(expected.begin(), expected.end(),
                     [&](int a, int b) { return starts[a] < starts[b]; });
    Listed l(starts, quiet);
    sharing::StartOrder order(l.flows);
    std::vector<int> latest = latestFirst(order);
    std::reverse(latest.begin(), latest.end());
    EXPECT_EQ(latest, expected);
    order.turn();
    EXPECT_EQ(earliestFirst(order), expected);
  }
}

}  // namespace
}  // namespace evsim
