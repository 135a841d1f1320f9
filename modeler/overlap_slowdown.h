#pragma once
// Overlap slowdown: a compute op slows while a collective or P2P transfer is in flight on its own
// GPU (NCCL's kernels hold SMs and move bytes through HBM beside it). The rule, one for every
// place the timing overlaps compute with communication (op_offsets.h: a CP ring exchange beside
// its attention step; timing_engine.cpp: DP gradient buckets beside the backward):
//
//   work is conserved: an op of duration t (its time alone) progresses at rate 1/f while a
//   transfer of slowdown factor f is in flight, at rate 1 otherwise. Only the overlapped part
//   slows, and the transfer's own interval is fixed (the compute does not slow it).
//
// So an op starting at T beside a transfer that ends at E (started at or before T):
//   T + f t <= E  (the transfer outlasts the op):  it takes f t;
//   otherwise:                                     it takes t + (E - T) (f - 1) / f,
// i.e. t + o (f - 1) / f where o = min(f t, E - T) is the wall time the two overlap. A transfer
// that starts inside the op (at A > T) overlaps from A on. Where several transfers are in flight
// at once the largest factor applies (their SMs and bytes do not add up in this model). f = 1, or
// no transfer, leaves the op at t exactly.
//
// The factor per device and traffic kind (inside a node: NVLink; across nodes: the network) is in
// the device file (config/device_config.h, OverlapSlowdown); `--overlap-slowdown off` sets both
// to 1 (io/run_options.h).

#include <span>

namespace evsim {

// A transfer in flight on the op's GPU over [start_us, end_us), slowing compute by `factor`.
struct SlowInterval {
  double start_us = 0;
  double end_us = 0;
  double factor = 1;
};

// When an op of `work_us` (its time alone) that starts at `start_us` ends beside `transfers`
// (any order, may overlap each other), by the rule above. Returns start_us + work_us when none
// overlaps it.
double slowedEndUs(double start_us, double work_us, std::span<const SlowInterval> transfers);

}  // namespace evsim
