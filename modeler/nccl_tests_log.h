#pragma once
// Reads NVIDIA nccl-tests output (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
// alltoall_perf, broadcast_perf, sendrecv_perf: events/collective.h) into profile records, so a
// user's own cluster measurements feed the cost model as measured communication events (`eventsim
// import-nccl-tests`). Two forms:
//
// 1. The standard stdout of a test:
//      # Collective test starting: all_reduce_perf          (newer versions; else --collective,
//      # nThread 1 nGpus 1 ... iters: 20 ...                  or the file name, tells which)
//      #  Rank  0 Group  0 Pid 123 on node01 device  0 [0x07] NVIDIA A100-SXM4-80GB
//      #       size   count   type   redop   root   time  algbw  busbw #wrong   time  algbw ...
//               8       2    float     sum     -1  10.58   0.00   0.00      0  10.42   0.00 ...
//    The columns are found from the header line (older versions lack `root`, name the error
//    column `error` and print a numerical error there, and have no `Group` in the Rank lines).
//    Lines that are not nccl-tests' table (mpirun's, NCCL_DEBUG's) are skipped. The Rank lines give
//    the group (ranks), nodes (distinct hosts) and ranks per node (the most on one host);
//    --group/--nodes stand in when a log lacks them; where it has them --group must agree, and
//    --nodes may only raise the host count, to a divisor of the ranks: nodes started with one
//    hostname (containers) are one host in the Rank lines, and --nodes K reads them as K nodes.
// 2. The CSV form of ../shared/calibration/nccl_allreduce_*.csv:
//      size(B),count,type,time(ns),busbw(GB/s),time(ns),busbw(GB/s)     (out-of-place first)
//    which names neither the collective (all-reduce unless --collective) nor the group (--group
//    is required; --nodes defaults to 1 there, as those files are single-node).
//
// Times: the out-of-place column unless in_place. nccl-tests reports one averaged time per size,
// so a record's median, min and max are that time (count: the log's `iters`, else 1); algbw and
// busbw are recomputed from size and time (the logs print them to 0.01 GB/s). Element
// types: float -> fp32, half -> fp16, bfloat16 -> bf16. sendrecv over n ranks is a ring of pairs:
// it becomes p2p events between 2 ranks, across nodes when the log spans more than one host.
// A row whose #wrong is not 0 is refused: a wrong result's time is not a measurement.

#include <optional>
#include <string>
#include <vector>

#include "io/profile_db.h"

namespace evsim {

struct NcclTestsOptions {
  // Each stands in where the log is silent; where the log says (its 'Collective test starting'
  // line, its Rank lines) a different value is an InputError, not an override. The collective
  // does override a guess from the file name.
  std::optional<EventKind> collective;
  std::optional<int> group;             // ranks, when the log has no Rank lines (CSV: required)
  std::optional<int> nodes;             // nodes those ranks span (default 1 without Rank lines;
                                        // with them, at least the hosts they name)
  // The caller's flag for `collective` in messages (`eventsim collective` says --op).
  std::string collective_flag = "--collective";
  // false: where the log has Rank lines they give the placement and the caller compares it with
  // group and nodes itself, in its own flags' words (`eventsim collective --measured`).
  bool group_must_agree = true;
  bool in_place = false;
};

struct NcclTestsImport {
  EventKind kind = EventKind::kAllReduce;
  Placement placement;
  DType dtype = DType::kFp32;
  std::vector<ProfileRecord> records;  // one per message size
  std::vector<std::string> hosts;      // from the Rank lines, in rank order (may be empty)
  std::vector<std::string> devices;
};

// Parses one test's output. `origin` names the file in errors (InputError, "file:line: rule").
NcclTestsImport parseNcclTests(const std::string& text, const std::string& origin,
                               const NcclTestsOptions& options);
NcclTestsImport loadNcclTests(const std::string& path, const NcclTestsOptions& options);

// "allreduce", "all_reduce", "all_reduce_perf", "alltoall_perf", ... -> the event kind; nullopt if
// unknown.
std::optional<EventKind> ncclTestsCollective(const std::string& name);

}  // namespace evsim
