#pragma once
// `eventsim calibrate`: fits a device model to measured collectives and/or measured iterations and
// writes it as a device file (modeler/calibration/calibrate.h; docs/CALIBRATION.md).

#include <CLI/CLI.hpp>

#include "modeler/cli/json_sink.h"

namespace evsim {

// `sink`: where the report goes instead of standard output (the Python module).
void registerCalibrateCommand(CLI::App& app, JsonSink sink = {});

}  // namespace evsim
