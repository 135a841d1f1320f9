#include "modeler/variability.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "common/cancel.h"
#include "common/error.h"
#include "common/units.h"

namespace evsim {

namespace {

constexpr double kTieUs = 1e-9;  // times equal up to rounding

// The compute ops' times of each task kind of each chunk, for TaskJitter.
std::vector<std::array<std::vector<double>, 3>> computeOpTimes(const Simulation& sim) {
  const bool split = sim.timeline.graph.split_backward;
  std::vector<std::array<std::vector<double>, 3>> out(sim.plan.stages.size());
  for (size_t k = 0; k < sim.plan.stages.size(); ++k) {
    const StagePlan& stage = sim.plan.stages[k];
    for (const OpInstance& op : stage.forward) {
      if (op.stream == Stream::kCompute) out[k][0].push_back(sim.costUs(op.event));
    }
    for (const OpInstance& op : stage.backward) {
      if (op.stream != Stream::kCompute) continue;
      out[k][runsIn(op, Phase::kWeightGrad, split) ? 2 : 1].push_back(sim.costUs(op.event));
    }
  }
  return out;
}

double nearestRank(const std::vector<double>& sorted, double pct) {
  const size_t n = sorted.size();
  const size_t rank = static_cast<size_t>(std::ceil(pct / 100.0 * static_cast<double>(n)));
  return sorted[std::clamp<size_t>(rank, 1, n) - 1];
}

}  // namespace

std::vector<StageRef> criticalPath(const IterationTimeline& tl) {
  const TaskGraph& graph = tl.graph;
  // The device that ends last.
  StageRef end;
  double end_us = -1;
  for (size_t k = 0; k < tl.pipelines.size(); ++k) {
    for (size_t s = 0; s < tl.pipelines[k].stages.size(); ++s) {
      const StageTimeline& st = tl.pipelines[k].stages[s];
      const double t = std::max(st.optimizer.end_us, st.param_allgather.end_us);
      if (t > end_us + kTieUs) end_us = t, end = {static_cast<int>(k), static_cast<int>(s)};
    }
  }
  // Held by the DP collective: it waited for the class whose stage finished its pipeline last.
  const StageTimeline& last = tl.pipelines[end.pipeline].stages[end.stage];
  if (last.optimizer.start_us > last.pipeline_end_us + kTieUs) {
    double latest = -1;
    for (size_t k = 0; k < tl.pipelines.size(); ++k) {
      const double t = tl.pipelines[k].stages[end.stage].pipeline_end_us;
      if (t > latest + kTieUs) latest = t, end.pipeline = static_cast<int>(k);
    }
  }
  std::vector<StageRef> path;
  StageRef at = end;
  const StageTimeline* stage = &tl.pipelines[at.pipeline].stages[at.stage];
  size_t i = stage->tasks.size() - 1;
  for (;;) {
    path.push_back(at);
    const TaskNode& node = graph.nodes[stage->node(i)];
    // A fused task's members share its head's start: the head weighs all their inputs.
    if (node.task.overlapped) {
      --i;
      continue;
    }
    // The device was free after the task before (its send too, unless that was a fused task's,
    // which leaves on the communication stream).
    double device_free = 0;
    if (i > 0) {
      const TaskTiming& before = stage->tasks[i - 1];
      device_free = graph.nodes[stage->node(i - 1)].fused_size == 1 ? before.send_end_us
                                                                     : before.run.end_us;
    }
    // When its input arrived: its members' transfer inputs' latest send end (0: none), as the
    // timing engine took it; the producer that sent it last holds the task.
    const size_t members = static_cast<size_t>(node.fused_size);
    auto arrivalOf = [&](int producer) {
      return tl.pipelines[at.pipeline]
          .stages[static_cast<size_t>(graph.deviceOf(producer))]
          .tasks[graph.positionOf(producer)]
          .send_end_us;
    };
    double input_ready = 0;
    for (size_t j = i; j < i + members; ++j) {
      for (const TaskEdge& e : graph.inputs(stage->node(j))) {
        if (e.transfer) input_ready = std::max(input_ready, arrivalOf(e.from));
      }
    }
    int from = -1;
    if (input_ready > device_free + kTieUs) {
      for (size_t j = i; j < i + members; ++j) {
        for (const TaskEdge& e : graph.inputs(stage->node(j))) {
          if (e.transfer && arrivalOf(e.from) + kTieUs >= input_ready) from = e.from;
        }
      }
    }
    if (from >= 0) {
      at.stage = graph.deviceOf(from);
      stage = &tl.pipelines[at.pipeline].stages[static_cast<size_t>(at.stage)];
      i = graph.positionOf(from);  // the same in every class
    } else if (i > 0) {
      --i;
    } else {
      break;
    }
  }
  std::sort(path.begin(), path.end());
  path.erase(std::unique(path.begin(), path.end()), path.end());
  return path;
}

std::vector<int64_t> stageRanks(const IterationPlan& plan, StageRef stage) {
  const RankLayout layout = plan.layout();
  std::vector<int64_t> ranks;
  for (int dp : plan.pipelines[stage.pipeline].replicas) {
    for (int cp = 0; cp < plan.strategy.cp; ++cp) {
      for (int tp = 0; tp < plan.strategy.tp; ++tp) {
        ranks.push_back(layout.rank(tp, dp, stage.stage, cp));
      }
    }
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

IterationDistribution sampleIterations(const Simulation& sim, double jitter, uint64_t seed,
                                       int iterations) {
  EVSIM_CHECK(iterations >= 1 && jitter >= 0, "{} iterations, jitter {}", iterations, jitter);
  IterationDistribution d;
  d.iterations = iterations;
  d.jitter = jitter;
  d.seed = seed;
  TimingInput input = sim.input;
  input.jitter.sigma = jitter;
  if (jitter > 0) input.jitter.op_us = computeOpTimes(sim);
  std::map<StageRef, int> on_path;
  for (int i = 0; i < iterations; ++i) {
    throwIfCancelled();
    input.jitter.seed = seed * 1000003 + static_cast<uint64_t>(i);
    const IterationTimeline tl = computeTimeline(input);
    d.iteration_us.push_back(tl.iteration_us);
    for (StageRef s : criticalPath(tl)) ++on_path[s];
  }
  std::sort(d.iteration_us.begin(), d.iteration_us.end());
  d.p50_us = nearestRank(d.iteration_us, 50);
  d.p90_us = nearestRank(d.iteration_us, 90);
  d.p99_us = nearestRank(d.iteration_us, 99);
  d.mean_us = std::accumulate(d.iteration_us.begin(), d.iteration_us.end(), 0.0) / iterations;
  for (const auto& [stage, n] : on_path) {
    d.critical.push_back({stage, static_cast<double>(n) / iterations});
  }
  return d;
}

std::string rankRanges(const std::vector<int64_t>& r) {
  std::string out;
  for (size_t i = 0; i < r.size();) {
    size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", r[i]) : fmt::format("{}-{}", r[i], r[j]);
    i = j + 1;
  }
  return out;
}

nlohmann::json variabilityJson(const Simulation& sim, const IterationDistribution& d) {
  nlohmann::json critical = nlohmann::json::array();
  for (const CriticalShare& c : d.critical) {
    critical.push_back({{"pp", c.stage.stage},
                        {"dp_replicas", sim.plan.pipelines[c.stage.pipeline].replicas},
                        {"ranks", rankRanges(stageRanks(sim.plan, c.stage))},
                        {"share", c.share}});
  }
  nlohmann::json slow = nlohmann::json::array();
  for (size_t k = 0; k < sim.input.pipelines.size(); ++k) {
    const std::vector<double>& f = sim.input.pipelines[k].stage_slowdown;
    for (size_t s = 0; s < f.size(); ++s) {
      if (f[s] == 1.0) continue;
      slow.push_back(
          {{"pp", s}, {"dp_replicas", sim.plan.pipelines[k].replicas}, {"factor", f[s]}});
    }
  }
  return {{"iterations", d.iterations},
          {"jitter", d.jitter},
          {"seed", d.seed},
          {"iteration_time_ms",
           {{"p50", d.p50_us / kUsPerMs},
            {"p90", d.p90_us / kUsPerMs},
            {"p99", d.p99_us / kUsPerMs},
            {"mean", d.mean_us / kUsPerMs},
            {"min", d.iteration_us.front() / kUsPerMs},
            {"max", d.iteration_us.back() / kUsPerMs}}},
          {"slow_stages", slow},
          {"critical_path", critical}};
}

std::string variabilityText(const Simulation& sim, const IterationDistribution& d) {
  std::string out = fmt::format(
      "\nVariability over {} iteration(s) (jitter {:.3g}, seed {}):\n"
      "  iteration time  p50 {:.3f} ms  p90 {:.3f} ms  p99 {:.3f} ms  (min {:.3f}, max {:.3f})\n",
      d.iterations, d.jitter, d.seed, d.p50_us / kUsPerMs, d.p90_us / kUsPerMs, d.p99_us / kUsPerMs,
      d.iteration_us.front() / kUsPerMs, d.iteration_us.back() / kUsPerMs);
  for (size_t k = 0; k < sim.input.pipelines.size(); ++k) {
    const std::vector<double>& f = sim.input.pipelines[k].stage_slowdown;
    for (size_t s = 0; s < f.size(); ++s) {
      if (f[s] == 1.0) continue;
      out += fmt::format(
          "  slow: stage {} of DP replica(s) {} x{:.3g} (ranks {})\n", s,
          rankRanges(std::vector<int64_t>(sim.plan.pipelines[k].replicas.begin(),
                                          sim.plan.pipelines[k].replicas.end())),
          f[s], rankRanges(stageRanks(sim.plan, {static_cast<int>(k), static_cast<int>(s)})));
    }
  }
  out += "  critical path (share of iterations):\n";
  for (const CriticalShare& c : d.critical) {
    out += fmt::format(
        "    stage {:>3} of DP replica(s) {:<12} ranks {}  {:.0f}%\n", c.stage.stage,
        rankRanges(std::vector<int64_t>(sim.plan.pipelines[c.stage.pipeline].replicas.begin(),
                                        sim.plan.pipelines[c.stage.pipeline].replicas.end())),
        rankRanges(stageRanks(sim.plan, c.stage)), 100 * c.share);
  }
  return out;
}

}  // namespace evsim
