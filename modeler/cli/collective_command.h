#pragma once
// `eventsim collective`: the nccl-tests table the network model predicts for one collective on a
// cluster (modeler/network/nccl_tuner.h), to compare line by line with a user's own nccl-tests
// run (--measured LOG prints the error beside each line):
//   eventsim collective --cluster C --op all-reduce --gpus 64 [--gpus-per-node 8]
//       (--bytes 1M,32M | --min-bytes 1M --max-bytes 8G) [--json] [--measured LOG]
//       [--nccl-algo A] [--nccl-cross-nic 0|1|2] [--nccl-pxn-disable 0|1] [--nccl-p2p-pxn-level L]
// (the NCCL switches simulate takes, io/nccl_options.h; a flag overrides the cluster file's key)
// Columns as nccl-tests prints them: size (B; the full buffer for all-gather, reduce-scatter and
// all-to-all), count (float elements per rank), time (us), algbw = size / time and busbw = algbw x
// the collective's bus factor (GB/s), and the algorithm and protocol NCCL would choose.

#include <CLI/CLI.hpp>

#include "modeler/cli/json_sink.h"

namespace evsim {

void registerCollectiveCommand(CLI::App& app, JsonSink sink = {});

}  // namespace evsim
