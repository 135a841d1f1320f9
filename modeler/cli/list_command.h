#pragma once
// `eventsim list models|clusters|devices`: the bundled configs (configs/), one line each, so that
// a new user finds the names --model and --cluster take.

#include <CLI/CLI.hpp>

namespace evsim {

void registerListCommand(CLI::App& app);

}  // namespace evsim
