#pragma once
// `eventsim compare`: accuracy of predicted timelines (eventsim simulate --csv) against measured
// ones (eventrun --csv): iteration-time error, per-device activity error, per-stage micro-batch
// start/finish error, and for several pairs whether the strategy ranking is preserved. Text or
// --json.

#include <CLI/CLI.hpp>

namespace evsim {

void registerCompareCommand(CLI::App& app);

}  // namespace evsim
