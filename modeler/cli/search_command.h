#pragma once
// `eventsim search`: rank every xMxPxD x micro-batch x schedule for N GPUs (memory model, then
// simulation of the strategies that fit). Text table, --json, --csv; prints the `eventsim simulate`
// command that shows the best strategy's full timeline.

#include <CLI/CLI.hpp>

#include "modeler/cli/json_sink.h"

namespace evsim {

// With a sink (the Python module), the ranking JSON goes there instead of standard output.
void registerSearchCommand(CLI::App& app, JsonSink sink = {});

}  // namespace evsim
