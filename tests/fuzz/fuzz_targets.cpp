#include "fuzz_targets.h"

#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "config/cluster_config.h"
#include "config/device_config.h"
#include "config/model_config.h"
#include "events/event.h"
#include "events/event_file.h"
#include "io/profile_cbor.h"
#include "io/profile_db.h"
#include "modeler/calibration/measured_runs.h"
#include "modeler/nccl_tests_log.h"

namespace evsim::fuzz {

namespace {

std::string entries(int first, int count) {
  std::string out;
  for (int i = first; i < first + count; ++i) {
    out += fmt::format(
        "  - signature: \"gemm m={} n=64 k=64 layout=nt dtype=bf16\"\n    kind: compute\n"
        "    time_us: {{median: 2, min: 1, max: 3, stddev: 0.5, count: 5}}\n",
        64 + i);
  }
  return out;
}

// A valid profile's header and 500 entries before the input, 500 after it.
std::string profileAround(const std::string& text) {
  static const std::string before =
      "schema_version: 1\nmetadata:\n  backend: cpu\n  date: \"2026-11-25T00:00:00Z\"\n"
      "  world_size: 1\n  ranks_per_node: 1\n  hosts: [h]\n  devices: [d]\n  versions: {}\n"
      "events:\n" +
      entries(0, 500);
  static const std::string after = entries(500, 500);
  return before + text + (text.empty() || text.back() == '\n' ? "" : "\n") + after;
}

// The input as the header of an all-reduce log, then one data row with as many cells as the
// input's first line has words after '#' (so a short header meets a row it accepts: the
// out-of-bounds read of issue 33 needed both), then a standard 13-column row.
std::string ncclLogAround(const std::string& header) {
  static const char* kCells[] = {"1024", "256", "float", "sum",  "-1",   "5.00", "0.20",
                                 "0.31", "0",   "4.90",  "0.21", "0.31", "0"};
  std::istringstream first_line(header.substr(0, header.find('\n')));
  std::string word, row;
  int words = 0;
  while (first_line >> word && words < 64) {
    if (words > 0 || word != "#") row += fmt::format(" {}", kCells[words++ % 13]);
  }
  return "# Collective test starting: all_reduce_perf\n" + header + "\n" + row +
         "\n        2048           512     float     sum      -1    6.00    0.34    0.51      0"
         "    6.10    0.34    0.50      0\n";
}

void load(int target, const std::string& text) {
  const std::string origin = "fuzz";
  switch (target) {
    case 0:
      parseModelConfig(text, origin);
      break;
    case 1:
      parseClusterConfig(text, origin);
      break;
    case 2:
      parseDeviceConfig(text, origin);
      break;
    case 3:
      ProfileDb::parse(text, origin);
      break;
    case 4:
      parseEventsFile(text, origin);
      break;
    case 5:
      parseMeasuredRuns(text, origin);
      break;
    case 6:
      parseNcclTests(text, origin, NcclTestsOptions{});
      break;
    case 7:
      parseEventSignature(text, origin);
      break;
    case 8:
      ProfileDb::parse(profileAround(text), origin);
      break;
    case 9: {
      NcclTestsOptions options;
      options.group = 2;
      parseNcclTests(ncclLogAround(text), origin, options);
      break;
    }
    case 10: {
      // Bytes after the magic, so every input reaches the CBOR reader (seeds carry it already).
      // Every row decoded too: a binary profile's rows are parsed when first needed.
      const ProfileDb db =
          ProfileDb::parse(isCborProfile(text) ? text : std::string(kProfileCborMagic) + text, origin);
      db.communicationRecords();
      db.records();
      break;
    }
    default:
      EVSIM_THROW(Error, "no fuzz target {}", target);
  }
}

}  // namespace

void feed(int target, const std::string& text) {
  // Text loaders only see UTF-8 (readInputFile); the binary profile sees any bytes.
  if (target != kProfileCborTarget && firstInvalidUtf8(text) >= 0) return;
  try {
    load(target, text);
  } catch (const InputError&) {
    // Refused with one line: the expected outcome for bad input.
  }
}

}  // namespace evsim::fuzz
