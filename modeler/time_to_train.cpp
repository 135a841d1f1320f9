#include "modeler/time_to_train.h"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <string_view>

#include "common/error.h"

namespace evsim {

namespace {

constexpr double kSecondsPerHour = 3600;
constexpr double kSecondsPerDay = 86400;

// 1234567 -> "1.23 M"; keeps large counts readable in one line.
std::string compact(double value) {
  if (value >= 1e12) return fmt::format("{:.2f} T", value / 1e12);
  if (value >= 1e9) return fmt::format("{:.2f} B", value / 1e9);
  if (value >= 1e6) return fmt::format("{:.2f} M", value / 1e6);
  if (value >= 1e3) return fmt::format("{:.1f} K", value / 1e3);
  return fmt::format("{:.1f}", value);
}

}  // namespace

double parseTokenCount(const std::string& text, const std::string& flag) {
  double scale = 1;
  std::string number = text;
  if (!number.empty() && std::isalpha(static_cast<unsigned char>(number.back()))) {
    // K, M, B, T, P: 1000^1 .. 1000^5.
    constexpr std::string_view kSuffixes = "KMBTP";
    const size_t power =
        kSuffixes.find(static_cast<char>(std::toupper(static_cast<unsigned char>(number.back()))));
    if (power == std::string_view::npos) {
      EVSIM_THROW(InputError, "{} '{}': the suffix must be K, M, B, T or P", flag, text);
    }
    scale = std::pow(1000.0, static_cast<double>(power + 1));
    number.pop_back();
  }
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(number, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != number.size() || !std::isfinite(value) || value <= 0 ||
      value * scale > 1e18) {
    EVSIM_THROW(InputError, "{} '{}': a token count such as 15T, 300B or 1.5e12 (> 0, <= 1e18)",
                flag, text);
  }
  return value * scale;
}

TimeToTrain timeToTrain(double tokens, int64_t tokens_per_iteration, double iteration_us,
                        int64_t gpus, std::optional<double> gpu_hour_cost) {
  EVSIM_CHECK(tokens_per_iteration > 0, "no tokens per iteration");
  TimeToTrain t;
  t.tokens = tokens;
  t.iterations =
      static_cast<int64_t>(std::ceil(tokens / static_cast<double>(tokens_per_iteration)));
  t.seconds = static_cast<double>(t.iterations) * iteration_us * 1e-6;
  t.gpu_hours = t.seconds / kSecondsPerHour * static_cast<double>(gpus);
  if (gpu_hour_cost) t.cost = t.gpu_hours * *gpu_hour_cost;
  return t;
}

std::string timeToTrainText(const TimeToTrain& t) {
  const std::string duration = t.seconds < kSecondsPerDay
                                   ? fmt::format("{:.1f} hours", t.seconds / kSecondsPerHour)
                                   : fmt::format("{:.1f} days", t.seconds / kSecondsPerDay);
  std::string out = fmt::format("  time to train      {} tokens: {} iterations, {}, {} GPU-hours",
                                compact(t.tokens), t.iterations, duration, compact(t.gpu_hours));
  if (t.cost) out += fmt::format(", cost {}", compact(*t.cost));
  return out + "\n";
}

nlohmann::json timeToTrainJson(const TimeToTrain& t) {
  return {{"tokens", t.tokens},
          {"iterations", t.iterations},
          {"days", t.seconds / kSecondsPerDay},
          {"gpu_hours", t.gpu_hours},
          {"cost", t.cost ? nlohmann::json(*t.cost) : nlohmann::json(nullptr)}};
}

}  // namespace evsim
