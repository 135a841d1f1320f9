#pragma once
// One shareLinks call (link_sharing.h states the model): the progressive filling of the flows in
// flight, as an event loop over the flows in start order. Its state is the members below, its
// steps the member functions (sharing_pass.cpp, in the order the loop takes them). Internal to
// link sharing: shareLinks builds one, runs it once and takes its result.
//
// The steps are inline members of one translation unit (sharing_pass.cpp): the loop runs ~10^6
// times a simulation, and they must inline as the closures of one function did (issue 34: the
// pass is a large part of a search's CPU; the library is built with -fPIC, where a non-inline
// member could be interposed and would not be inlined).

#include <cstddef>
#include <functional>
#include <queue>
#include <span>
#include <utility>
#include <vector>

#include "modeler/network/chain_runs.h"
#include "modeler/network/link_sharing.h"
#include "modeler/network/max_min_fill.h"
#include "modeler/network/resource_holds.h"
#include "modeler/network/sharing_flows.h"

namespace evsim::sharing {

class SharingPass {
 public:
  // Sets up the shapes and the capacities (`record_load`, `whole_chains`: shareLinks').
  SharingPass(const FlowList& input, std::span<const double> capacity_bytes_per_us,
              bool record_load, bool whole_chains);
  SharingPass(const SharingPass&) = delete;  // the in-flight arrays hold a reference to slot_of_
  SharingPass& operator=(const SharingPass&) = delete;
  // Every flow's end (and the loads, when recorded); once (on a temporary: the state is spent).
  SharingResult run() &&;

 private:
  // A flow's projected end at its current rate; stale once its rate changed again (`version_`).
  struct Finish {
    double us;
    int flow;
    int version;
    bool operator>(const Finish& o) const { return us > o.us; }
  };
  // A follower released to start at `us`, with its chain's entry of ResourceHolds.
  struct Release {
    double us;
    int flow;
    int tail;
  };
  // Followers released by the end of the flow they follow, by start (then start order).
  struct ReleasedLater {
    const Flows* flows;
    bool operator()(const Release& a, const Release& b) const {
      return a.us > b.us || (a.us == b.us && flows->earlier(b.flow, a.flow));
    }
  };
  // Followers released at their own start_us: their `us` is their start_us, so Flows::earlier
  // without reading the list.
  struct OnTimeLater {
    bool operator()(const Release& a, const Release& b) const {
      return a.us > b.us || (a.us == b.us && a.flow > b.flow);
    }
  };
  // Set-up: per shape its time alone, demand and whether it shares, the capacities raised to what
  // one flow alone needs; whether some sharing flow follows another.
  inline bool setUpShapes();
  // The loop's steps, in the order it takes them (sharing_pass.cpp).
  inline void findNextStarts();
  inline double nextStart();
  inline void skipFollowers();
  inline void startUntilRatesChange();
  inline void startFlows();
  inline void startInFlight(int f);
  inline void takeSlot(int f);
  inline double freeUntil(int f);
  inline bool alone(int f, int t);
  inline std::pair<int, double> runAlong(int f, int g, double end, int next_foreign);
  inline void releaseAloneFollower(int g, double start, double duration, double end);
  inline void recordAloneLoad(int f, double end);
  inline void gatherComponent();
  inline void refillComponent();
  inline double firstEnd();
  inline void endFlows(double until);
  inline void endFlow(int f, double until);
  inline void closeLoad(int r);

  const FlowList& input_;
  const bool record_load_;
  const bool whole_chains_;
  SharingResult out_;
  std::vector<double> capacity_;
  // Flows are named by their index in `input_` (no renumbering, no list of them in start order:
  // issue 34, memory); every flow ends at its standalone end unless sharing moves it.
  Flows flows_;
  bool chained_;  // whether some sharing flow follows another (setUpShapes: after flows_)
  Scratch scratch_;

  // Per flow in flight (its slot: InFlight) its rate, the standalone time it had left when its
  // rate last changed (at `since_us_`: flows whose rates an event leaves alone are not touched),
  // the event that last reached it and the version of its projected end. Before a flow starts,
  // its entry of `slot_of_` holds what `alone` reads of it instead (freeUntil): one array per
  // flow, not two (issue 34: memory).
  std::vector<int> slot_of_, free_slots_;
  int slots_ = 0;
  InFlight<double> rate_, remaining_us_, since_us_;
  InFlight<int> seen_at_, version_;
  InFlight<int> tail_of_;  // the chain's entry of ResourceHolds its follower carries

  // Per resource the flows on it (in start order), and where its recorded load last changed. An
  // event refills only the flows connected to it through shared resources (the rest keep their
  // rates: max-min fairness is per connected component), so a lone flow costs no fill.
  std::vector<std::vector<int>> on_;
  std::vector<double> load_since_;
  std::vector<int> component_, seeds_, ending_;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> ends_;  // earliest first
  size_t in_flight_ = 0;
  int event_ = 0;
  // The sharing flows in start order, read latest first (findNextStarts) and then earliest first by
  // the event loop: its head is the next to start (followers are passed over: they start when
  // released, unless released on time before the order reaches them).
  StartOrder order_;
  double now_ = 0;
  // Each chain head's facts for taking its followers at once (chain_runs.h), latest on top.
  std::vector<HeadFacts> head_facts_;

  // Who holds each resource, for the lone check: the flows in flight and the chains' tails.
  ResourceHolds holds_;

  // Followers released by the end of the flow they follow, by start (then start order), each with
  // its chain's entry of ResourceHolds.
  std::priority_queue<Release, std::vector<Release>, ReleasedLater> released_;
  // Followers released at their own start_us and not yet passed by the order: they start in their
  // place in it (startFlows), earliest first; when the order reaches one it is this queue's top.
  std::priority_queue<Release, std::vector<Release>, OnTimeLater> on_time_;
  int next_tail_ = -1;  // set by `alone`: the chain entry that f's follower carries (-1: none)
};

}  // namespace evsim::sharing
