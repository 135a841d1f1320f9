#pragma once
// `eventsim calibrate`: fits a device model to measured collectives and/or measured iterations and
// writes it as a device file (modeler/calibration/calibrate.h; docs/CALIBRATION.md).

#include <CLI/CLI.hpp>

namespace evsim {

void registerCalibrateCommand(CLI::App& app);

}  // namespace evsim
