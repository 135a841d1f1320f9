#include "modeler/cli/train_run_flags.h"

#include "io/cli_checks.h"
#include "modeler/time_to_train.h"

namespace evsim {

std::optional<double> TrainRunFlags::tokens() const {
  if (!given()) return std::nullopt;
  return parseTokenCount(tokens_text, "--train-tokens");
}

void TrainRunFlags::addTo(CLI::App& cmd, const std::string& tokens_help) {
  CLI::Option* tokens_flag = cmd.add_option("--train-tokens", tokens_text, tokens_help);
  cmd.add_option("--gpu-hour-cost", gpu_hour_cost,
                 "price of one GPU-hour, for the run's cost (with --train-tokens)")
      ->check(kFinitePositive)
      ->needs(tokens_flag);
}

}  // namespace evsim
