#pragma once
// Measured training iterations for calibration: a CSV with the columns of vTrain's single-node
// ground truth (../shared/calibration/vtrain_single_node.csv; a UTF-8 byte-order mark is allowed):
//   # GPUs, global batch, micro batch, hidden size, attention heads, # layers, sequence length,
//   tensor parallelism, data parallelism, pipeline parallelism, iteration time (ms)
// Columns are found by name, in any order; other columns are ignored.

#include <cstdint>
#include <string>
#include <vector>

namespace evsim {

struct MeasuredRun {
  int line = 0;  // in the file, for messages and the predictions table
  int64_t gpus = 0, global_batch = 0, micro_batch = 0;
  int64_t hidden = 0, heads = 0, layers = 0, seq = 0;
  int tp = 1, dp = 1, pp = 1;
  double iteration_ms = 0;
};

// Throws InputError naming file:line, column and value on anything missing or malformed
// (including tp * dp * pp != GPUs).
std::vector<MeasuredRun> loadMeasuredRuns(const std::string& path);
std::vector<MeasuredRun> parseMeasuredRuns(const std::string& text, const std::string& origin);

}  // namespace evsim
