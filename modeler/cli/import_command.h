#pragma once
// `eventsim import-nccl-tests`: nccl-tests output (or its CSV form) into a profile database as
// measured communication events (modeler/nccl_tests_log.h).

#include <CLI/CLI.hpp>

namespace evsim {

void registerImportCommand(CLI::App& app);

}  // namespace evsim
