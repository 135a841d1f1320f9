#include "modeler/calibration/measured_runs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "common/strings.h"

namespace evsim {

namespace {

constexpr std::string_view kByteOrderMark = "\xEF\xBB\xBF";

// The columns a run needs, by their header names.
enum Column { kGpus, kGlobal, kMicro, kHidden, kHeads, kLayers, kSeq, kTp, kDp, kPp, kTime };
constexpr const char* kColumnNames[] = {"# GPUs",
                                        "global batch",
                                        "micro batch",
                                        "hidden size",
                                        "attention heads",
                                        "# layers",
                                        "sequence length",
                                        "tensor parallelism",
                                        "data parallelism",
                                        "pipeline parallelism",
                                        "iteration time (ms)"};
constexpr int kColumns = sizeof(kColumnNames) / sizeof(kColumnNames[0]);

}  // namespace

std::vector<MeasuredRun> parseMeasuredRuns(const std::string& text, const std::string& origin) {
  std::istringstream in(text);
  std::string line;
  int line_number = 0;
  int index[kColumns];
  size_t width = 0;
  std::vector<MeasuredRun> runs;
  while (std::getline(in, line)) {
    ++line_number;
    if (line_number == 1 && line.rfind(kByteOrderMark, 0) == 0) line.erase(0, 3);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    std::vector<std::string> cells = split(line, ',');
    for (std::string& c : cells) c = trim(c);
    if (width == 0) {  // the header
      width = cells.size();
      for (int c = 0; c < kColumns; ++c) {
        auto it = std::find(cells.begin(), cells.end(), kColumnNames[c]);
        if (it == cells.end()) {
          EVSIM_THROW(InputError, "{}:{}: no column '{}' in the header (needs: {})", origin,
                      line_number, kColumnNames[c], fmt::join(kColumnNames, ", "));
        }
        index[c] = static_cast<int>(it - cells.begin());
      }
      continue;
    }
    if (cells.size() != width) {
      EVSIM_THROW(InputError, "{}:{}: {} cells, the header has {}", origin, line_number,
                  cells.size(), width);
    }
    auto integer = [&](Column c) {
      const std::string& cell = cells[index[c]];
      int64_t value = 0;
      auto [end, ec] = std::from_chars(cell.data(), cell.data() + cell.size(), value);
      if (ec != std::errc() || end != cell.data() + cell.size() || value <= 0 ||
          value > (int64_t{1} << 40)) {
        EVSIM_THROW(InputError, "{}:{}: {} '{}': not a positive integer", origin, line_number,
                    kColumnNames[c], cell.substr(0, 40));
      }
      return value;
    };
    MeasuredRun r;
    r.line = line_number;
    r.gpus = integer(kGpus);
    r.global_batch = integer(kGlobal);
    r.micro_batch = integer(kMicro);
    r.hidden = integer(kHidden);
    r.heads = integer(kHeads);
    r.layers = integer(kLayers);
    r.seq = integer(kSeq);
    auto parallel = [&](Column c) {
      int64_t v = integer(c);
      if (v > 1 << 20) {
        EVSIM_THROW(InputError, "{}:{}: {} {}: too large", origin, line_number, kColumnNames[c], v);
      }
      return static_cast<int>(v);
    };
    r.tp = parallel(kTp);
    r.dp = parallel(kDp);
    r.pp = parallel(kPp);
    const std::string& time = cells[index[kTime]];
    const std::optional<double> ms = parseNumber(time);
    if (!ms) {
      EVSIM_THROW(InputError, "{}:{}: iteration time (ms) '{}': not a number", origin, line_number,
                  time.substr(0, 40));
    }
    r.iteration_ms = *ms;
    if (!(r.iteration_ms > 0) || !std::isfinite(r.iteration_ms)) {
      EVSIM_THROW(InputError, "{}:{}: iteration time (ms) {}: must be > 0", origin, line_number,
                  time.substr(0, 40));
    }
    if (int64_t{r.tp} * r.dp * r.pp != r.gpus) {
      EVSIM_THROW(InputError,
                  "{}:{}: tensor x data x pipeline parallelism = {} x {} x {} != {} GPUs", origin,
                  line_number, r.tp, r.dp, r.pp, r.gpus);
    }
    runs.push_back(r);
  }
  if (runs.empty())
    EVSIM_THROW(InputError, "{}: no measured runs (a header and data rows)", origin);
  return runs;
}

std::vector<MeasuredRun> loadMeasuredRuns(const std::string& path) {
  return parseMeasuredRuns(readInputFile(path, "measured-runs CSV"), path);
}

}  // namespace evsim
