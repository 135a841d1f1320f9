#pragma once
// eventrun's CUDA executor: runs a RankProgram on this rank's GPU (device local_rank % visible
// devices). No CUDA header here, so the CUDA device (platform/cuda/cuda_device.cpp) can include it.
// Built only when EVSIM_WITH_CUDA (target evsim_runner_cuda).
//
// Streams: one compute stream carries, in program order, the compute kernels (kernels/cuda
// makeCudaKernel), the blocking collectives and the P2P transfers; a second stream carries the DP
// gradient buckets (dp_overlap), each waiting for the compute stream at its issue point, all
// waited for at the program's bucket wait (before the optimizer).
// Communicators (NCCL, ids broadcast over MPI; init is collective, so every rank creates them in
// the same global order): one per program group, in the program's sorted group order; then one
// more per group that carries buckets (a communicator is not used from two streams at once); then,
// when P > 1, one over the whole world for P2P, peers addressed by their world rank (NCCL connects
// only the pairs that talk; one init instead of one per pair).
// P2P: a receive is issued where the program waits for its input, a send at its send action; both
// block the host (NcclComm's timeout) until done. Where that would deadlock (both neighbours
// sending first), the send and its next receive run as one ncclGroupStart/End; the pairs come
// from fuseP2P (runner/eventrun_backend_p2p.h), worked out identically on every rank. A fused
// send's recorded span is the group's (it ends when both transfers are done). Schedules whose
// order fusing cannot make deadlock-free (interleaved 1F1B) are refused by the CUDA device.
// Timing: two CUDA events around every recorded action on its stream, resolved after the
// iteration against a reference event (runner/eventrun_backend_timing.h).
//
// Call order: construct on every rank of MPI_COMM_WORLD at the same point (collective) ->
// runIteration() any number of times, every rank the same number.

#include <cstdint>
#include <memory>
#include <vector>

#include "plan/iteration_plan.h"
#include "runner/eventrun_executor.h"
#include "runner/eventrun_program.h"

namespace evsim {

struct CudaExecutorOptions {
  int local_rank = 0;               // picks device local_rank % visible devices
  uint64_t seed = 1;                // kernels' random inputs
  double comm_timeout_s = 300;      // a NCCL operation pending longer aborts its communicator
  std::vector<size_t> fused_sends;  // this rank's row of fuseP2P()
};

// `plan` and `program` must outlive the executor. Throws Error for a failing CUDA/NCCL call.
std::unique_ptr<RankExecutor> makeCudaRankExecutor(const IterationPlan& plan,
                                                   const RankProgram& program,
                                                   const CudaExecutorOptions& options);

}  // namespace evsim
