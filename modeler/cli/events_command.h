#pragma once
// `eventsim events`: the unique events of a (model, strategy), or the union over every valid
// strategy for N GPUs, with counts, FLOPs and bytes. Text, --json, or -o FILE (events file YAML).

#include <CLI/CLI.hpp>

#include "modeler/cli/json_sink.h"

namespace evsim {

// `sink`: where the report goes instead of standard output (the Python module).
void registerEventsCommand(CLI::App& app, JsonSink sink = {});

}  // namespace evsim
