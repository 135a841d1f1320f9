// libFuzzer target for one of eventsim's loaders (issue 17, item 7), chosen at compile time by
// EVSIM_FUZZ_TARGET (tests/fuzz/CMakeLists.txt builds one executable per loader). Any input may
// be refused with an InputError; anything else escaping
// — another exception, a crash, a sanitizer report (the build uses ASan and UBSan) — is a finding.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  evsim::fuzz::feed(EVSIM_FUZZ_TARGET, std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
