#include "modeler/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <tuple>

#include "common/error.h"

namespace evsim {

namespace {

// How many unmatched keys an error message names.
constexpr size_t kMissingKeysShown = 3;

auto matchKey(const TimelineRow& r) {
  return std::make_tuple(r.rank, static_cast<int>(r.stream), static_cast<int>(r.phase),
                         r.micro_batch, r.layer, r.op);
}

// Matching order: the key, then time, so the k-th rows of equal keys pair up. Indices rather than
// rows are sorted so the caller's timelines stay untouched and memory grows by 4 bytes per row.
std::vector<uint32_t> sortedForMatching(const Timeline& t) {
  EVSIM_CHECK(t.rows.size() < UINT32_MAX, "{} has too many rows", t.path);
  std::vector<uint32_t> order(t.rows.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&t](uint32_t a, uint32_t b) {
    const TimelineRow& x = t.rows[a];
    const TimelineRow& y = t.rows[b];
    auto kx = matchKey(x);
    auto ky = matchKey(y);
    if (kx != ky) return kx < ky;
    return x.start_us < y.start_us;
  });
  return order;
}

std::string keyText(const TimelineRow& r, int64_t occurrence, const NameTable& names) {
  return fmt::format("rank {} {} {} mb {} layer {} {} #{}", r.rank, streamName(r.stream),
                     phaseName(r.phase), r.micro_batch, layerName(r.layer), names.name(r.op),
                     occurrence);
}

// Unmatched rows of one file: a count and the first few keys.
struct Unmatched {
  int64_t count = 0;
  std::vector<std::string> first;
  void add(const TimelineRow& r, int64_t occurrence, const NameTable& names) {
    if (first.size() < kMissingKeysShown) first.push_back(keyText(r, occurrence, names));
    ++count;
  }
  std::string describe(const Timeline& has, const Timeline& lacks) const {
    return fmt::format("{}: lacks {} event(s) of {}, first: {}{}", lacks.path, count, has.path,
                       fmt::join(first, "; "),
                       count > static_cast<int64_t>(first.size()) ? "; ..." : "");
  }
};

// Walks a sorted order and numbers each row's occurrence of its key.
class OccurrenceCounter {
 public:
  int64_t next(const TimelineRow& r) {
    auto key = matchKey(r);
    occurrence_ = (has_last_ && key == last_) ? occurrence_ + 1 : 0;
    last_ = key;
    has_last_ = true;
    return occurrence_;
  }

 private:
  decltype(matchKey(TimelineRow{})) last_{};
  bool has_last_ = false;
  int64_t occurrence_ = 0;
};

struct TaskSpan {
  double start_us = 0;
  double finish_us = 0;
};
using TaskKey = std::tuple<int32_t, int, int32_t>;  // stage, phase (forward 0, backward 1), mb

// Per (stage, phase, micro-batch) of forward and backward: earliest start and latest end over the
// stage's ranks, relative to the file's first start. Recomputed ops run inside the backward task.
// With the interleaved schedule a stage runs each micro-batch once per chunk: the span covers them.
std::map<TaskKey, TaskSpan> stageTasks(const Timeline& t) {
  std::map<TaskKey, TaskSpan> tasks;
  for (const TimelineRow& r : t.rows) {
    const bool in_task = r.phase == Phase::kForward || r.phase == Phase::kBackward ||
                         r.phase == Phase::kRecompute || r.phase == Phase::kWeightGrad;
    if (r.micro_batch < 0 || !in_task) continue;
    // Task kinds: forward 0, backward (recomputation inside it) 1, a split backward's W 2.
    const int kind = r.phase == Phase::kForward ? 0 : r.phase == Phase::kWeightGrad ? 2 : 1;
    TaskKey key{r.pp, kind, r.micro_batch};
    double start = r.start_us - t.begin_us;
    double finish = r.end_us - t.begin_us;
    auto [it, inserted] = tasks.try_emplace(key, TaskSpan{start, finish});
    if (!inserted) {
      it->second.start_us = std::min(it->second.start_us, start);
      it->second.finish_us = std::max(it->second.finish_us, finish);
    }
  }
  return tasks;
}

MaxMean maxMean(const std::vector<double>& values) {
  MaxMean m;
  if (values.empty()) return m;
  m.max = *std::max_element(values.begin(), values.end());
  m.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return m;
}

}  // namespace

PairComparison compareTimelines(const Timeline& predicted, const Timeline& measured,
                                const NameTable& names) {
  PairComparison c;
  c.predicted_iteration_us = predicted.iterationUs();
  c.measured_iteration_us = measured.iterationUs();
  if (!(c.measured_iteration_us > 0)) {
    EVSIM_THROW(InputError, "{}: measured iteration time is {} us; it must be > 0", measured.path,
                c.measured_iteration_us);
  }
  const double to_pct = 100.0 / c.measured_iteration_us;
  c.iteration_error_pct = (c.predicted_iteration_us - c.measured_iteration_us) * to_pct;

  // Match rows, accumulating each rank's activity error (ranks come in order in the sorted walk).
  std::vector<uint32_t> p_order = sortedForMatching(predicted);
  std::vector<uint32_t> m_order = sortedForMatching(measured);
  Unmatched missing_in_measured, missing_in_predicted;
  OccurrenceCounter p_occ, m_occ;
  double rank_sum_us = 0;
  auto flushRank = [&](int32_t rank, int64_t events) {
    if (events == 0) return;
    c.devices.push_back({rank, events, rank_sum_us / static_cast<double>(events) * to_pct});
    rank_sum_us = 0;
  };
  int32_t current_rank = -1;
  int64_t rank_events = 0;
  size_t i = 0, j = 0;
  while (i < p_order.size() || j < m_order.size()) {
    const TimelineRow* p = i < p_order.size() ? &predicted.rows[p_order[i]] : nullptr;
    const TimelineRow* m = j < m_order.size() ? &measured.rows[m_order[j]] : nullptr;
    if (p && m && matchKey(*p) == matchKey(*m)) {
      p_occ.next(*p);
      m_occ.next(*m);
      if (p->rank != current_rank) {
        flushRank(current_rank, rank_events);
        current_rank = p->rank;
        rank_events = 0;
      }
      double d_start =
          std::abs((p->start_us - predicted.begin_us) - (m->start_us - measured.begin_us));
      double d_end = std::abs((p->end_us - predicted.begin_us) - (m->end_us - measured.begin_us));
      rank_sum_us += (d_start + d_end) / 2;
      ++rank_events;
      ++c.matched_events;
      ++i;
      ++j;
    } else if (p && (!m || matchKey(*p) < matchKey(*m))) {
      missing_in_measured.add(*p, p_occ.next(*p), names);
      ++i;
    } else {
      missing_in_predicted.add(*m, m_occ.next(*m), names);
      ++j;
    }
  }
  flushRank(current_rank, rank_events);
  if (missing_in_measured.count > 0 || missing_in_predicted.count > 0) {
    std::vector<std::string> parts;
    if (missing_in_measured.count > 0)
      parts.push_back(missing_in_measured.describe(predicted, measured));
    if (missing_in_predicted.count > 0)
      parts.push_back(missing_in_predicted.describe(measured, predicted));
    EVSIM_THROW(InputError, "{} (the files describe different runs)", fmt::join(parts, " | "));
  }

  std::vector<double> device_errors;
  for (const DeviceActivityError& d : c.devices) {
    device_errors.push_back(d.error_pct);
    if (d.error_pct > c.device_error_pct_max || device_errors.size() == 1) {
      c.device_error_pct_max = d.error_pct;
      c.device_error_max_rank = d.rank;
    }
  }
  c.device_error_pct_mean = maxMean(device_errors).mean;

  // Stage tasks. Matched rows imply the same tasks unless a rank sits on different stages.
  std::map<TaskKey, TaskSpan> p_tasks = stageTasks(predicted);
  std::map<TaskKey, TaskSpan> m_tasks = stageTasks(measured);
  for (const auto* pair : {&p_tasks, &m_tasks}) {
    const auto& other = pair == &p_tasks ? m_tasks : p_tasks;
    for (const auto& [key, span] : *pair) {
      if (other.count(key) == 0) {
        const Timeline& lacks = pair == &p_tasks ? measured : predicted;
        EVSIM_THROW(InputError, "{}: no stage {} {} micro-batch {} task, which {} has", lacks.path,
                    std::get<0>(key), std::get<1>(key) == 0 ? "forward" : "backward",
                    std::get<2>(key), pair == &p_tasks ? predicted.path : measured.path);
      }
    }
  }
  std::vector<double> starts, finishes, both;
  for (const auto& [key, p_span] : p_tasks) {
    const TaskSpan& m_span = m_tasks.at(key);
    StageTaskError e;
    e.stage = std::get<0>(key);
    e.phase = std::get<1>(key) == 0 ? Phase::kForward : Phase::kBackward;
    e.micro_batch = std::get<2>(key);
    e.predicted_start_us = p_span.start_us;
    e.measured_start_us = m_span.start_us;
    e.predicted_finish_us = p_span.finish_us;
    e.measured_finish_us = m_span.finish_us;
    e.start_error_pct = std::abs(p_span.start_us - m_span.start_us) * to_pct;
    e.finish_error_pct = std::abs(p_span.finish_us - m_span.finish_us) * to_pct;
    starts.push_back(e.start_error_pct);
    finishes.push_back(e.finish_error_pct);
    both.push_back(e.start_error_pct);
    both.push_back(e.finish_error_pct);
    c.tasks.push_back(e);
  }
  c.start_error_pct = maxMean(starts);
  c.finish_error_pct = maxMean(finishes);
  c.task_error_pct = maxMean(both);
  return c;
}

RankingComparison compareRankings(const std::vector<double>& predicted_us,
                                  const std::vector<double>& measured_us, double tie_pct) {
  EVSIM_CHECK(predicted_us.size() == measured_us.size(), "{} predicted vs {} measured times",
              predicted_us.size(), measured_us.size());
  const size_t n = predicted_us.size();
  RankingComparison r;
  auto order = [n](const std::vector<double>& t) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&t](size_t a, size_t b) { return t[a] < t[b]; });
    return idx;
  };
  r.predicted_order = order(predicted_us);
  r.measured_order = order(measured_us);
  // Kendall's tau-b: (C - D) / sqrt((n0 - ties_pred) (n0 - ties_meas)).
  int64_t concordant = 0, discordant = 0, ties_pred = 0, ties_meas = 0, pairs = 0;
  for (size_t a = 0; a < n; ++a) {
    for (size_t b = a + 1; b < n; ++b) {
      ++pairs;
      // Only the measurement has a spread; predictions are deterministic and tie only when equal.
      auto measured_tie = [tie_pct](double x, double y) {
        return std::abs(x - y) < tie_pct / 100 * std::min(x, y);
      };
      double dp = predicted_us[a] - predicted_us[b];
      double dm =
          measured_tie(measured_us[a], measured_us[b]) ? 0 : measured_us[a] - measured_us[b];
      if (dp == 0) ++ties_pred;
      if (dm == 0) ++ties_meas;
      if (dp == 0 || dm == 0) continue;
      if ((dp > 0) == (dm > 0))
        ++concordant;
      else
        ++discordant;
    }
  }
  r.preserved = discordant == 0;
  double denominator =
      std::sqrt(static_cast<double>(pairs - ties_pred) * static_cast<double>(pairs - ties_meas));
  if (denominator > 0) r.kendall_tau = static_cast<double>(concordant - discordant) / denominator;
  return r;
}

}  // namespace evsim
