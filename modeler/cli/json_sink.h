#pragma once
// Where a subcommand's JSON report goes. The CLI prints it (--json); the Python module
// (python/eventsim_module.cpp) registers the same subcommand with a sink and receives the report
// itself, so a notebook runs the CLI's own code path and nothing reaches standard output.

#include <functional>
#include <nlohmann/json.hpp>

namespace evsim {

// Empty: the command prints as the flags say. Set: the report goes here, and nothing is printed.
using JsonSink = std::function<void(const nlohmann::json&)>;

}  // namespace evsim
