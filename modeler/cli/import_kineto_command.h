#pragma once
// `eventsim import-kineto trace.json --model M --cluster C --strategy S ... -o profile.yaml`: a
// PyTorch profiler (Kineto) trace of one training step into measured events of a profile
// database, matched to the strategy's events by op and shape (modeler/kineto/).

#include <CLI/CLI.hpp>

namespace evsim {

void registerImportKinetoCommand(CLI::App& app);

}  // namespace evsim
