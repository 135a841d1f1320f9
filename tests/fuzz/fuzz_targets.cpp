#include "fuzz_targets.h"

#include "common/error.h"
#include "common/input_file.h"
#include "config/cluster_config.h"
#include "config/device_config.h"
#include "events/event.h"
#include "events/event_file.h"
#include "config/model_config.h"
#include "io/profile_db.h"
#include "modeler/calibration/measured_runs.h"
#include "modeler/nccl_tests_log.h"

namespace evsim::fuzz {

namespace {

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
    default:
      EVSIM_THROW(Error, "no fuzz target {}", target);
  }
}

}  // namespace

void feed(int target, const std::string& text) {
  if (firstInvalidUtf8(text) >= 0) return;
  try {
    load(target, text);
  } catch (const InputError&) {
    // Refused with one line: the expected outcome for bad input.
  }
}

}  // namespace evsim::fuzz
