// libFuzzer target for one of eventsim's loaders (issue 17, item 7), chosen at compile time by
// EVSIM_FUZZ_TARGET (tests/fuzz/CMakeLists.txt builds one executable per loader). Any input may
// be refused with an InputError (the YAML parser's 10 s deadline included); anything else escaping
// — another exception, a crash, a sanitizer report (the build uses ASan and UBSan) — is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "common/input_file.h"
#include "events/cluster_config.h"
#include "events/device_config.h"
#include "events/event.h"
#include "events/event_file.h"
#include "events/model_config.h"
#include "io/profile_db.h"
#include "modeler/calibration/measured_runs.h"
#include "modeler/nccl_tests_log.h"

namespace {

void load(const std::string& text) {
  using namespace evsim;
  const std::string origin = "fuzz";
  switch (EVSIM_FUZZ_TARGET) {
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
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // What a file must pass before any loader sees it (common/input_file.h: readInputFile).
  if (evsim::firstInvalidUtf8(text) >= 0) return 0;
  try {
    load(text);
  } catch (const evsim::InputError&) {
    // Refused with one line: the expected outcome for bad input.
  }
  return 0;
}
