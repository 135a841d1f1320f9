#pragma once
// `eventsim events`: the unique events of a (model, strategy), or the union over every valid
// strategy for N GPUs, with counts, FLOPs and bytes. Text, --json, or -o FILE (events file YAML).

#include <CLI/CLI.hpp>

namespace evsim {

void registerEventsCommand(CLI::App& app);

}  // namespace evsim
