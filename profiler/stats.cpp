#include "profiler/stats.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace evsim {

TimingStats computeStats(std::vector<double> samples_us) {
  EVSIM_CHECK(!samples_us.empty(), "no timing samples");
  for (double s : samples_us) {
    EVSIM_CHECK(std::isfinite(s) && s >= 0, "bad timing sample {} us", s);
  }
  std::sort(samples_us.begin(), samples_us.end());
  const size_t n = samples_us.size();
  TimingStats stats;
  stats.count = static_cast<int>(n);
  stats.min_us = samples_us.front();
  stats.max_us = samples_us.back();
  stats.median_us =
      n % 2 == 1 ? samples_us[n / 2] : 0.5 * (samples_us[n / 2 - 1] + samples_us[n / 2]);
  if (n > 1) {
    double mean = 0;
    for (double s : samples_us) mean += s;
    mean /= double(n);
    double sum_sq = 0;
    for (double s : samples_us) sum_sq += (s - mean) * (s - mean);
    stats.stddev_us = std::sqrt(sum_sq / double(n - 1));
  }
  return stats;
}

std::vector<double> combineP2P(const std::vector<double>& send_us,
                               const std::vector<double>& recv_us) {
  EVSIM_CHECK(send_us.size() == recv_us.size(), "p2p: {} send samples but {} receive samples",
              send_us.size(), recv_us.size());
  std::vector<double> out(send_us.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = std::min(send_us[i], recv_us[i]);
  return out;
}

std::vector<double> combineCollective(const std::vector<std::vector<double>>& per_rank_us) {
  EVSIM_CHECK(!per_rank_us.empty(), "collective: no ranks");
  std::vector<double> out = per_rank_us.front();
  for (const auto& rank_samples : per_rank_us) {
    EVSIM_CHECK(rank_samples.size() == out.size(), "collective: ranks have {} and {} samples",
                rank_samples.size(), out.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = std::max(out[i], rank_samples[i]);
  }
  return out;
}

}  // namespace evsim
