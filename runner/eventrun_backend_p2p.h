#pragma once
// P2P pairing for executors whose sends and receives are rendezvous (NCCL's ncclSend/ncclRecv on a
// stream: a send may wait until its receiver has posted the receive). Pure: no MPI, no CUDA.
//
// The CPU executor posts every receive at the iteration start, so any program order is safe. The
// CUDA executor cannot: a receive is issued where the program waits for its input and a send at
// its send action, both blocking. Two neighbours that both send first then wait for each other
// forever (1F1B's steady state: stage s sends activation i to s+1 while s+1 sends gradient j back).
// Megatron fuses such a send with the receive that follows it into one ncclGroupStart/End
// (send_forward_recv_backward / send_backward_recv_forward, batch_isend_irecv), so both transfers
// progress together. fuseP2P() finds the pairs: it simulates every rank's blocking communication
// and, while the simulation deadlocks, fuses on every stuck rank its send with the next receive
// of its program; it throws when a deadlock has no such pair. The next receive directly follows
// the send (the next task's input) in GPipe and 1F1B. In the interleaved schedule a task without
// input (the first virtual stage's forward, the last one's backward) can lie between them; the
// fused receive is then posted before that task's compute and the stream waits for it first, as
// in Megatron's interleaved schedule without overlap_p2p_comm (send_forward_backward_
// recv_forward_backward posts both next inputs with the sends and waits for all four).
//
// Simulation model (worst case, nothing buffered): a P2P step completes when every transfer in it
// meets its counterpart in the peer's current step (or already did); a blocking collective when
// every member of its group is at the same collective (same group, same occurrence); a DP bucket
// start never blocks; a bucket wait completes when every member of each bucket group has issued
// at least as many buckets as this rank. Compute never blocks.

#include <cstddef>
#include <string>
#include <vector>

#include "runner/eventrun_program.h"

namespace evsim {

// Where a simulation stopped: for each rank that did not finish, the action it waits at.
struct P2PStall {
  std::vector<int64_t> ranks;
  std::vector<size_t> actions;  // index into that rank's program
  bool stalled() const { return !ranks.empty(); }
  std::string describe(const std::vector<RankProgram>& programs) const;
};

// The first kRecv after action `send` (program.actions.size() when there is none).
size_t nextReceive(const RankProgram& program, size_t send);

// Simulates `programs` (one per world rank, in rank order) with the sends listed in `fused[r]`
// (action indices of kSend actions of rank r, each fused with nextReceive()).
P2PStall simulateP2P(const std::vector<RankProgram>& programs,
                     const std::vector<std::vector<size_t>>& fused);

// Per rank, the ascending indices of its kSend actions to fuse with their next kRecv. Every rank
// computes the same answer from the same programs. Throws Error when two ranks would issue their
// transfers in different orders (NCCL matches in issue order, without tags), or naming the stuck
// ranks and actions when fusing cannot remove a deadlock.
std::vector<std::vector<size_t>> fuseP2P(const std::vector<RankProgram>& programs);

}  // namespace evsim
