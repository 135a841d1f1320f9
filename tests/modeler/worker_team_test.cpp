// WorkerTeam (modeler/worker_team.h): the threads a search keeps for its parallel regions. Each
// region's calls run once each, worker 0 on the caller's thread and worker w on the team's same
// thread every time; exceptions and cancellation come back to the caller; misuse (too many
// workers, a region inside a region) is an error; the loops of parallel_for.h and
// parallel_within_budget.h run on the team the caller installed, and a loop nested inside a region
// runs on threads of its own. Counts are worked out from the regions' sizes.
#include "modeler/worker_team.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common/cancel.h"
#include "common/error.h"
#include "modeler/parallel_for.h"
#include "modeler/parallel_within_budget.h"

namespace evsim {
namespace {

// 40 regions of 1, 2, 3, 4 workers in turn on a team of 4: each call runs once, all of a region
// under way at once (a latch of the region's size passes only then), worker 0 on the caller's
// thread, and worker w on one thread of its own across all the regions (not a new one each).
TEST(WorkerTeam, EachRegionsCallsRunOnceEachWorkerOnItsOwnKeptThread) {
  WorkerTeam team(4);
  ASSERT_EQ(team.workers(), 4u);
  std::mutex mutex;
  std::map<unsigned, std::set<std::thread::id>> threads_of;  // worker -> the threads it ran on
  std::vector<int> calls(4, 0);
  for (int region = 0; region < 40; ++region) {
    const unsigned n = 1 + region % 4;
    std::atomic<unsigned> arrived{0};
    team.run(n, [&](unsigned w) {
      ++arrived;
      while (arrived.load() < n) std::this_thread::yield();  // all n under way at once
      std::lock_guard<std::mutex> lock(mutex);
      ++calls[w];
      threads_of[w].insert(std::this_thread::get_id());
    });
  }
  // Worker w runs in the regions of more than w workers: 10 of each size.
  EXPECT_EQ(calls[0], 40);
  EXPECT_EQ(calls[1], 30);
  EXPECT_EQ(calls[2], 20);
  EXPECT_EQ(calls[3], 10);
  EXPECT_EQ(threads_of[0], std::set<std::thread::id>{std::this_thread::get_id()});
  std::set<std::thread::id> distinct;
  for (unsigned w = 0; w < 4; ++w) {
    EXPECT_EQ(threads_of[w].size(), 1u) << "worker " << w;
    distinct.insert(threads_of[w].begin(), threads_of[w].end());
  }
  EXPECT_EQ(distinct.size(), 4u);
}

// The address space of this process in bytes (VmSize of /proc/self/status), 0 when unknown.
uint64_t addressSpaceBytes() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmSize:") {
      uint64_t kib = 0;
      status >> kib;
      return kib * 1024;
    }
  }
  return 0;
}

// runOnThreads (fresh threads, no team) where the system starts only some of them: the region
// fails with the environment's error before any call runs. Before, the threads started ran their
// share of the region (a whole search's) and only then was the failure said. In a child process
// (fork) whose address space may grow by 24 MiB: each thread reserves a stack of at least 2 MiB
// (glibc's default is RLIMIT_STACK, 8 MiB here, or 2 MiB when unlimited), so of 256 threads at most
// 12 start. The child's exit code says what happened: 0 the error and no call, 1 calls ran,
// 2 no error, 3 another exception.
TEST(WorkerTeam, AThreadTheSystemRefusesFailsTheRegionBeforeAnyCall) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space: no RLIMIT_AS test";
#endif
  const uint64_t used = addressSpaceBytes();
  if (used == 0) GTEST_SKIP() << "no /proc/self/status";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const rlimit limit{used + (uint64_t{24} << 20), used + (uint64_t{24} << 20)};
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(4);
    std::atomic<int> calls{0};
    int code = 2;
    try {
      runOnThreads(256, [&](unsigned) { ++calls; });
    } catch (const EnvironmentError& e) {
      code = std::string(e.what()).find("starting 256 worker threads failed") != std::string::npos
                 ? 0
                 : 3;
    } catch (...) {
      code = 3;
    }
    _exit(calls.load() > 0 ? 1 : code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A worker's exception comes back from run() once every other call has returned, and the team runs
// its next region whole. Worker 2 throws at once; workers 0, 1 and 3 finish only after it has.
TEST(WorkerTeam, TheFirstExceptionComesBackAfterEveryCallReturned) {
  WorkerTeam team(4);
  std::atomic<bool> thrown{false};
  std::atomic<int> finished{0};
  try {
    team.run(4, [&](unsigned w) {
      if (w == 2) {
        thrown = true;
        throw std::runtime_error("worker 2");
      }
      while (!thrown.load()) std::this_thread::yield();
      ++finished;
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "worker 2");
  }
  EXPECT_EQ(finished.load(), 3);
  // The caller's own call throwing: the same, and the team still whole afterwards.
  EXPECT_THROW(team.run(2,
                        [](unsigned w) {
                          if (w == 0) throw std::logic_error("caller");
                        }),
               std::logic_error);
  std::atomic<int> after{0};
  team.run(4, [&](unsigned) { ++after; });
  EXPECT_EQ(after.load(), 4);
}

// Misuse is an error, not a hang: a region of 5 workers on a team of 4 (whose fifth worker does not
// exist, so it would wait forever), and a region started from inside a running one (which would
// overwrite the running region's task), both throw Error before calling anything; tryRun answers
// false for both, calling nothing. The team then runs a whole region of 4.
TEST(WorkerTeam, MisuseIsAnErrorAndTryRunDeclinesIt) {
  WorkerTeam team(4);
  std::atomic<int> calls{0};
  const auto count = [&](unsigned) { ++calls; };
  EXPECT_THROW(team.run(5, count), Error);
  EXPECT_FALSE(team.tryRun(5, count));
  EXPECT_EQ(calls.load(), 0);
  std::atomic<int> nested_errors{0}, nested_declined{0};
  team.run(2, [&](unsigned w) {
    if (w != 0) return;  // on the caller's thread, the region under way
    try {
      team.run(2, count);
    } catch (const Error&) {
      ++nested_errors;
    }
    if (!team.tryRun(1, count)) ++nested_declined;
  });
  EXPECT_EQ(nested_errors.load(), 1);
  EXPECT_EQ(nested_declined.load(), 1);
  EXPECT_EQ(calls.load(), 0);
  EXPECT_TRUE(team.tryRun(4, count));
  EXPECT_EQ(calls.load(), 4);
}

// The loops take the installed team: parallelForWorkers over 1,000 indices in blocks of 7, 30
// times, visits each index once per call (30 in all), on the caller's thread and the team's one
// other thread only; outside Use they start threads of their own (the team's thread unused).
TEST(WorkerTeam, TheLoopsRunOnTheInstalledTeam) {
  WorkerTeam team(2);
  std::thread::id team_thread;
  team.run(2, [&](unsigned w) {
    if (w == 1) team_thread = std::this_thread::get_id();
  });
  std::mutex mutex;
  std::set<std::thread::id> inside;
  std::vector<int> visits(1000, 0);
  {
    const WorkerTeam::Use use(team);
    EXPECT_EQ(WorkerTeam::current(), &team);
    for (int call = 0; call < 30; ++call) {
      parallelForWorkers(visits.size(), 2, 7, [&](size_t i, unsigned w) {
        EXPECT_LT(w, 2u);
        std::lock_guard<std::mutex> lock(mutex);
        ++visits[i];
        inside.insert(std::this_thread::get_id());
      });
    }
  }
  EXPECT_EQ(WorkerTeam::current(), nullptr);
  for (size_t i = 0; i < visits.size(); ++i) ASSERT_EQ(visits[i], 30) << "index " << i;
  const std::set<std::thread::id> team_threads{std::this_thread::get_id(), team_thread};
  for (const std::thread::id& t : inside) EXPECT_EQ(team_threads.count(t), 1u);
  std::set<std::thread::id> outside;
  runWorkers(2, [&](unsigned) {
    std::lock_guard<std::mutex> lock(mutex);
    outside.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(outside.size(), 2u);
  EXPECT_EQ(outside.count(std::this_thread::get_id()), 0u);  // fresh threads, not the caller
}

// A loop inside a region: the caller's thread's team is busy and a team thread has none, so the
// nested loops run on threads of their own: 2 workers x 100 indices, each index once per worker.
// The outer region runs on the team (no thread started); each of the 2 nested loops of 2 workers
// starts 2 threads: 4 in all.
TEST(WorkerTeam, ANestedLoopRunsOnThreadsOfItsOwn) {
  WorkerTeam team(2);
  const WorkerTeam::Use use(team);
  std::vector<std::atomic<int>> visits(200);
  const uint64_t started_before = threadsStarted().load();
  runWorkers(2, [&](unsigned w) { parallelFor(100, 2, [&](size_t i) { ++visits[w * 100 + i]; }); });
  EXPECT_EQ(threadsStarted().load() - started_before, 4u);
  for (size_t i = 0; i < visits.size(); ++i) EXPECT_EQ(visits[i].load(), 1) << "slot " << i;
}

// Cancellation (common/cancel.h) asked before a budgeted loop on the team: no item runs and
// Cancelled comes back; cleared, the same loop runs each of its 9 items once. Both loops run on
// the team: no thread is started.
TEST(WorkerTeam, CancellationComesBackThroughTheTeam) {
  WorkerTeam team(2);
  const WorkerTeam::Use use(team);
  const std::vector<size_t> weights(9, 10);
  std::atomic<int> ran{0};
  const uint64_t started_before = threadsStarted().load();
  requestCancel(true);
  EXPECT_THROW(parallelForWithinBudget(weights, 20, 2, [&](size_t) { ++ran; }), Cancelled);
  requestCancel(false);
  EXPECT_EQ(ran.load(), 0);
  std::vector<std::atomic<int>> each(9);
  parallelForWithinBudget(weights, 20, 2, [&](size_t i) { ++each[i]; });
  for (size_t i = 0; i < each.size(); ++i) EXPECT_EQ(each[i].load(), 1) << "item " << i;
  EXPECT_EQ(threadsStarted().load(), started_before);
}

}  // namespace
}  // namespace evsim
