#pragma once
// `--train-tokens 15T [--gpu-hour-cost 2.5]`: the whole training run's length and price, the
// same two flags for simulate (one plan) and search (every ranked plan).

#include <CLI/CLI.hpp>
#include <optional>
#include <string>

namespace evsim {

struct TrainRunFlags {
  std::string tokens_text;              // --train-tokens, as typed ("15T", "300B", "4096")
  std::optional<double> gpu_hour_cost;  // --gpu-hour-cost: price of one GPU-hour

  bool given() const { return !tokens_text.empty(); }
  // The token count, or nullopt without --train-tokens; InputError naming the flag if malformed.
  std::optional<double> tokens() const;
  // Registers both flags on `cmd`; `tokens_help` says what this command prints with them.
  void addTo(CLI::App& cmd, const std::string& tokens_help);
};

}  // namespace evsim
