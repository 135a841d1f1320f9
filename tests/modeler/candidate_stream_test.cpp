// The enumeration shared among workers (modeler/candidate_stream.h): on one worker or several,
// every candidate of forEachCandidate exactly once, with its violation, indices that sort them in
// enumeration order and rise on each worker; an error in one worker stops all and comes back.
#include "modeler/candidate_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <latch>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "support/search_options.h"
#include "support/test_support.h"

namespace evsim {
namespace {

struct Seen {
  size_t index = 0;
  unsigned worker = 0;
  std::string name;  // the strategy's name and micro-batch, then its violation
};

std::string describe(const Candidate& c) {
  const Strategy& s = c.strategy;
  std::string out = s.name() + " b=" + std::to_string(s.micro_batch) + " sched=" +
                    std::to_string(static_cast<int>(s.schedule)) + " v=" +
                    std::to_string(s.virtual_stages) + " rc=" +
                    std::to_string(static_cast<int>(s.recompute)) +
                    " sp=" + std::to_string(s.sequence_parallel) + " zero=" +
                    std::to_string(s.zero_stage) + " overlap=" + std::to_string(s.dp_overlap) +
                    " offload=" + std::to_string(static_cast<int>(s.offload)) + " split=";
  for (int n : s.stage_layers) out += std::to_string(n) + ",";
  return out + " " +
         (c.violation ? std::to_string(static_cast<int>(c.violation->rule)) + ":" +
                            std::to_string(c.violation->key)
                      : std::string("valid"));
}

std::vector<Seen> share(const ModelConfig& model, const ClusterConfig& cluster,
                        const SearchOptions& options, unsigned workers) {
  std::mutex mutex;
  std::vector<Seen> out;
  shareCandidates(model, cluster, options.base, options.space, workers,
                  [&](unsigned w, size_t index, const Candidate& c) {
                    std::lock_guard<std::mutex> lock(mutex);
                    out.push_back(Seen{index, w, describe(c)});
                  });
  return out;
}

SearchOptions techniqueSpace() {
  SearchOptions o = test_support::searchOptions(1024, 1536, {1, 2, 4},
                                                {Schedule::kDapple, Schedule::kInterleaved});
  o.space.virtual_stages = {2, 3};
  o.space.recomputes = {Recompute::kNone, Recompute::kFull};
  o.space.sequence_parallel = {false, true};
  o.space.zero_stages = {0, 1, 3};
  return o;
}

TEST(CandidateStreamTest, EveryCandidateOnceInEnumerationOrderOnAnyNumberOfWorkers) {
  ModelConfig model = loadModelConfig(test::configPath("models", "gpt3-175b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  const SearchOptions options = techniqueSpace();
  // Independently: every candidate of the enumeration in order, and how many are invalid.
  std::vector<std::string> all;
  int64_t invalid = 0;
  forEachCandidate(model, cluster, options.base, options.space, [&](Candidate&& c) {
    if (c.violation) ++invalid;
    all.push_back(describe(c));
  });
  ASSERT_GT(all.size(), 1000u);
  ASSERT_GT(invalid, 0);
  for (unsigned workers : {1u, 2u, 3u}) {
    std::vector<Seen> seen = share(model, cluster, options, workers);
    // Each worker's candidates come in rising index order.
    std::vector<size_t> last(workers, 0);
    std::vector<bool> any(workers, false);
    for (const Seen& s : seen) {
      ASSERT_LT(s.worker, workers);
      if (any[s.worker]) {
        EXPECT_GT(s.index, last[s.worker]);
      }
      any[s.worker] = true;
      last[s.worker] = s.index;
    }
    std::sort(seen.begin(), seen.end(),
              [](const Seen& a, const Seen& b) { return a.index < b.index; });
    ASSERT_EQ(seen.size(), all.size()) << workers;
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(seen[i].name, all[i]) << workers << " workers, candidate " << i;
      if (i > 0) {
        EXPECT_LT(seen[i - 1].index, seen[i].index);  // each index once
      }
    }
  }
}

// walked(w) comes once per worker, on the thread that ran that worker's visits, after its last
// visit; by then every candidate has been handed to some worker (the other workers may still be
// visiting theirs, so only the total over all workers is checked at the end).
TEST(CandidateStreamTest, EachWorkerIsToldOnItsOwnThreadWhenItsWalkHasEnded) {
  ModelConfig model = loadModelConfig(test::configPath("models", "gpt3-175b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  const SearchOptions options = techniqueSpace();
  size_t all = 0;
  forEachCandidate(model, cluster, options.base, options.space, [&](Candidate&&) { ++all; });
  for (unsigned workers : {1u, 2u, 3u}) {
    struct Worker {
      std::vector<std::thread::id> visit_threads;
      size_t visits = 0, visits_after_walked = 0;
      int walked = 0;
      std::thread::id walked_thread;
    };
    std::vector<Worker> seen(workers);  // each worker writes its own
    shareCandidates(
        model, cluster, options.base, options.space, workers,
        [&](unsigned w, size_t, const Candidate&) {
          Worker& me = seen[w];
          if (me.visit_threads.empty() || me.visit_threads.back() != std::this_thread::get_id()) {
            me.visit_threads.push_back(std::this_thread::get_id());
          }
          ++me.visits;
          if (me.walked > 0) ++me.visits_after_walked;
        },
        [&](unsigned w) {
          ++seen[w].walked;
          seen[w].walked_thread = std::this_thread::get_id();
        });
    size_t visits = 0;
    for (unsigned w = 0; w < workers; ++w) {
      const Worker& me = seen[w];
      EXPECT_EQ(me.walked, 1) << workers << " workers, worker " << w;
      EXPECT_EQ(me.visits_after_walked, 0u) << workers << " workers, worker " << w;
      EXPECT_LE(me.visit_threads.size(), 1u) << "one thread per worker";
      if (!me.visit_threads.empty()) {
        EXPECT_EQ(me.walked_thread, me.visit_threads.front()) << workers << " workers, " << w;
      }
      visits += me.visits;
    }
    EXPECT_EQ(visits, all) << workers << " workers";
  }
}

// Runs `on_exit` when the thread that set it ends (its thread_local storage is destroyed).
struct ThreadExitSignal {
  std::function<void()> on_exit;
  ~ThreadExitSignal() {
    if (on_exit) on_exit();
  }
};
thread_local ThreadExitSignal thread_exit_signal;

// (M, C, P, D, E, ETP, micro-batch): the enumeration's groups (candidate_stream.h).
auto groupOf(const Strategy& s) {
  return std::make_tuple(s.tp, s.cp, s.pp, s.dp, s.ep, s.etp, s.micro_batch);
}

// The interleaving is forced, not left to the scheduler: both workers hold a candidate of the
// group they claimed first (a latch), then worker 0 throws, and worker 1 goes on only once worker
// 0's thread has ended (the error has stopped the walks by then). Worker 1 must finish the group
// it holds, claim no other, and the error must come back.
TEST(CandidateStreamTest, AWorkersErrorStopsEveryWorkerAndComesBack) {
  ModelConfig model = loadModelConfig(test::configPath("models", "gpt3-175b"));
  ClusterConfig cluster = loadClusterConfig(test::configPath("clusters", "dgx-a100"));
  const SearchOptions options = techniqueSpace();
  // Independently: every candidate in enumeration order, with its group.
  std::vector<std::string> all;
  std::vector<decltype(groupOf(Strategy{}))> groups;
  forEachCandidate(model, cluster, options.base, options.space, [&](Candidate&& c) {
    all.push_back(describe(c));
    groups.push_back(groupOf(c.strategy));
  });
  ASSERT_EQ(std::set<std::string>(all.begin(), all.end()).size(), all.size());  // found by name
  std::latch both_hold_a_candidate(2);
  std::mutex mutex;
  std::condition_variable changed;
  bool thrower_ended = false, waited_too_long = false;
  std::vector<std::string> worker0, worker1;  // what each visited, in order
  std::atomic<int> walked{0};
  EXPECT_THROW(
      shareCandidates(
          model, cluster, options.base, options.space, 2,
          [&](unsigned w, size_t, const Candidate& c) {
            if (w == 0) {
              worker0.push_back(describe(c));
              thread_exit_signal.on_exit = [&] {
                const std::lock_guard<std::mutex> lock(mutex);
                thrower_ended = true;
                changed.notify_all();
              };
              both_hold_a_candidate.arrive_and_wait();
              throw std::runtime_error("stop");
            }
            worker1.push_back(describe(c));
            if (worker1.size() > 1) return;
            both_hold_a_candidate.arrive_and_wait();
            std::unique_lock<std::mutex> lock(mutex);
            // A guard against a hang, not a threshold: worker 0 ends within microseconds.
            waited_too_long =
                !changed.wait_for(lock, std::chrono::seconds(60), [&] { return thrower_ended; });
          },
          [&](unsigned) { ++walked; }),
      std::runtime_error);
  EXPECT_FALSE(waited_too_long);
  EXPECT_EQ(walked, 0);  // neither walk ended: one failed, the other was stopped
  EXPECT_EQ(worker0.size(), 1u);
  ASSERT_FALSE(worker1.empty());
  // Worker 1 visited exactly its group: from the group's first candidate to its last.
  const auto first = std::find(all.begin(), all.end(), worker1.front());
  ASSERT_NE(first, all.end());
  const size_t begin = static_cast<size_t>(first - all.begin());
  ASSERT_TRUE(begin == 0 || groups[begin - 1] != groups[begin]) << "not a group's first";
  size_t end = begin;
  while (end < all.size() && groups[end] == groups[begin]) ++end;
  EXPECT_EQ(worker1, std::vector<std::string>(all.begin() + static_cast<ptrdiff_t>(begin),
                                              all.begin() + static_cast<ptrdiff_t>(end)));
  // So far fewer than all were visited.
  EXPECT_LT(worker0.size() + worker1.size(), all.size() / 2);
}

}  // namespace
}  // namespace evsim
