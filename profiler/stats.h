#pragma once
// Summary statistics of repeated timings, and how per-rank samples of one communication event are
// combined into one time per repetition.

#include <vector>

#include "io/profile_db.h"

namespace evsim {

// Median (mean of the two middle values for an even count), min, max and the sample standard
// deviation (n - 1 in the denominator; 0 for a single sample) of `samples_us`. Throws Error on an
// empty list or a non-finite or negative sample: a timer never produces those.
TimingStats computeStats(std::vector<double> samples_us);

// Point-to-point: both sides time the same repetition; the recorded time is min(send, recv),
// because the side that called later did not wait for its peer, so its time is the transfer alone,
// while the earlier caller's time also counts the wait for the later one.
// The two lists must have the same length.
std::vector<double> combineP2P(const std::vector<double>& send_us,
                               const std::vector<double>& recv_us);

// Collectives: a repetition is complete only when every rank has its result, so its time is the
// slowest rank's (max over ranks). `per_rank_us[r][i]` is rank r's time of repetition i; every rank
// must have the same number of repetitions.
std::vector<double> combineCollective(const std::vector<std::vector<double>>& per_rank_us);

}  // namespace evsim
