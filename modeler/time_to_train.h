#pragma once
// Time and money for a training run (`--train-tokens 15T [--gpu-hour-cost 2.5]`): a run of T tokens
// takes ceil(T / (B x s)) iterations of the simulated iteration time, on every GPU of the plan.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace evsim {

struct TimeToTrain {
  double tokens = 0;
  int64_t iterations = 0;
  double seconds = 0;
  double gpu_hours = 0;
  std::optional<double> cost;  // gpu_hours x the price per GPU-hour, when given
};

// "15T", "300B", "2.5M", "4096", "1.5e12" as a token count (K, M, B, T, P: powers of 1000);
// InputError naming `flag` otherwise.
double parseTokenCount(const std::string& text, const std::string& flag);

TimeToTrain timeToTrain(double tokens, int64_t tokens_per_iteration, double iteration_us,
                        int64_t gpus, std::optional<double> gpu_hour_cost);

std::string timeToTrainText(const TimeToTrain& t);
nlohmann::json timeToTrainJson(const TimeToTrain& t);

}  // namespace evsim
