#pragma once
// Executors of a RankProgram (eventrun_program.h). RankExecutor is the interface main() drives;
// the rank's Device (platform/device.h) makes the CPU one below or the CUDA one
// (runner/cuda/eventrun_cuda_executor.h).
//
// CpuRankExecutor runs a program for real on the CPU: compute actions through the
// kernels/cpu implementation of their event, communication through MPI in the communicator the
// action names (P2P on MPI_COMM_WORLD with the peer's world rank; collectives in one communicator
// per distinct group, created at construction). Buffers are sized from each event's
// message_bytes by mpi/mpi_collectives.h, the same buffers and calls eventprof measures.
//
// Receives are posted at the start of each iteration, so a send always finds its receive and
// completes as soon as the data has moved (no deadlock between a stage sending forward and its
// neighbour sending backward, whatever the schedule). After every action the executor tests its
// pending requests, which drives MPI's progress while the rank computes (a GPU's copy engine does
// that on its own). DP gradient buckets run one at a time in issue order, each started as soon
// as the previous has completed.
//
// Call order: construct on every rank of MPI_COMM_WORLD at the same point (collective: it creates
// the group communicators) -> runIteration() any number of times, every rank the same number.

#include <mpi.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plan/iteration_plan.h"
#include "kernels/kernel.h"
#include "mpi/mpi_collectives.h"
#include "mpi/mpi_wait.h"
#include "runner/eventrun_program.h"

namespace evsim {

class RankExecutor {
 public:
  virtual ~RankExecutor() = default;
  // One iteration. `times` gets one entry per action (entries of unrecorded actions are left 0),
  // on this rank's steady_clock in microseconds.
  virtual void runIteration(std::vector<ActionTime>& times) = 0;
  // For the summary line: "cpu, wait spin", "cuda, device 0 (NVIDIA H100)".
  virtual std::string describe() const = 0;
  // Bound on the error of the times on this rank's steady_clock beyond the clock reading itself
  // (0 on the CPU; the CUDA executor's GPU-to-host conversion), over the iterations run so far.
  virtual double timeErrorUs() const { return 0; }
};

class CpuRankExecutor : public RankExecutor {
 public:
  CpuRankExecutor(const IterationPlan& plan, const RankProgram& program, WaitMode wait,
                  uint64_t seed);
  ~CpuRankExecutor() override;
  CpuRankExecutor(const CpuRankExecutor&) = delete;
  CpuRankExecutor& operator=(const CpuRankExecutor&) = delete;

  void runIteration(std::vector<ActionTime>& times) override;
  std::string describe() const override;

 private:
  // The send/collective buffers of `event`; `in_flight` ones serve non-blocking DP buckets only.
  MpiCollectiveBuffers& bufferFor(int event, bool in_flight = false);
  void runCollective(const Action& action, MPI_Request* request);
  // Send to the next member of the action's group, receive from the previous (the CP ring).
  void ringExchange(const Action& action);
  void wait(MPI_Request& request);
  void pollPending(std::vector<ActionTime>& times);
  void startNextBucket(std::vector<ActionTime>& times);

  const IterationPlan& plan_;
  const RankProgram& program_;
  WaitMode wait_mode_;
  std::map<int, std::unique_ptr<ComputeKernel>> kernels_;         // by event
  std::map<std::pair<int, bool>, MpiCollectiveBuffers> buffers_;  // by (event, in flight)
  std::vector<MPI_Comm> comms_;                                   // by program group
  std::vector<MpiCollectiveBuffers> recv_buffers_;                // one per kRecv action
  std::vector<MPI_Request> recv_requests_;                        // one per kRecv action
  std::deque<size_t> bucket_queue_;                // issued, not started (action indices)
  MPI_Request bucket_request_ = MPI_REQUEST_NULL;  // the bucket in flight
  size_t bucket_action_ = 0;
};

// Clock offset of this rank against rank 0, by ping-pong (collective over `comm`, rank 0 is the
// reference). For each of `rounds` exchanges rank 0 notes t0, sends to rank r, r answers with its
// clock tr, rank 0 notes t1; offset = tr - (t0 + t1) / 2 from the exchange with the smallest round
// trip, whose error is at most half that round trip (the reply may be taken anywhere within it).
struct ClockOffset {
  double offset_us = 0;    // this rank's steady_clock minus rank 0's
  double half_rtt_us = 0;  // bound on the offset's error
};
ClockOffset estimateClockOffset(MPI_Comm comm, int rounds);

// One MPI communicator per group (ascending world ranks, this rank included), in the given order.
// Collective over MPI_COMM_WORLD: every rank must pass its groups sorted (RankProgram::groups), so
// the smallest group not yet created is every member's next call and creation cannot deadlock.
std::vector<MPI_Comm> createGroupComms(const std::vector<std::vector<int64_t>>& groups);

double steadyNowUs();

// MPI_TAG_UB of MPI_COMM_WORLD: the largest P2P tag this MPI accepts (at least 32767).
int64_t mpiTagUpperBound();

}  // namespace evsim
