#pragma once
// `eventsim list models|clusters|devices`: the bundled configs (configs/), one line each, so that
// a new user finds the names --model and --cluster take.

#include <CLI/CLI.hpp>

#include "modeler/cli/json_sink.h"

namespace evsim {

// `sink`: where the report goes instead of standard output (the Python module).
void registerListCommand(CLI::App& app, JsonSink sink = {});

}  // namespace evsim
