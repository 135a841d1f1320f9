#pragma once
// `eventsim search`: rank every xMxPxD x micro-batch x schedule for N GPUs (memory model, then
// simulation of the strategies that fit). Text table, --json, --csv; prints the `eventsim simulate`
// command that shows the best strategy's full timeline.

#include <CLI/CLI.hpp>

namespace evsim {

void registerSearchCommand(CLI::App& app);

}  // namespace evsim
