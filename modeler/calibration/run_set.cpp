#include "modeler/calibration/run_set.h"

#include "common/error.h"
#include "common/units.h"
#include "modeler/cost_model.h"
#include "modeler/parallel_for.h"
#include "modeler/simulation.h"

namespace evsim {

namespace {

ModelConfig gptModel(const MeasuredRun& r, const RunSettings& settings) {
  std::string yaml = fmt::format(
      "name: gpt-h{}-l{}\ndtype: {}\nhidden_size: {}\nnum_heads: {}\nffn_hidden_size: {}\n"
      "seq_length: {}\nvocab_size: {}\nlayers:\n  - {{type: embedding}}\n"
      "  - {{type: decoder, count: {}, cross_attention: false}}\n  - {{type: head}}\n",
      r.hidden, r.layers, dtypeName(settings.dtype), r.hidden, r.heads, 4 * r.hidden, r.seq,
      settings.vocab, r.layers);
  return parseModelConfig(yaml, fmt::format("measured run at line {}", r.line));
}

}  // namespace

RunSet::RunSet(const std::vector<MeasuredRun>& runs, const ClusterConfig& cluster,
               const RunSettings& settings) {
  for (const MeasuredRun& r : runs) {
    Strategy s = Strategy::of(r.tp, r.pp, r.dp, r.micro_batch, r.global_batch, settings.schedule);
    s.recompute = settings.recompute;
    try {
      planned_.push_back(PlannedRun{r, buildIterationPlan(gptModel(r, settings), cluster, s)});
    } catch (const InputError& e) {
      skipped_.emplace_back(r, e.what());
    }
  }
}

double predictIterationUs(const IterationPlan& plan, const ClusterConfig& cluster) {
  CostModel costs(cluster, nullptr, /*analytic_fallback=*/true);
  std::vector<EventCost> c = costs.costAll(plan.events);
  std::vector<StageOpOffsets> offsets;
  return computeTimeline(timingInput(plan, c, offsets)).iteration_us;
}

std::vector<double> RunSet::predictMs(const ClusterConfig& cluster, int threads) const {
  std::vector<double> out(planned_.size());
  parallelFor(planned_.size(), static_cast<unsigned>(std::max(1, threads)),
              [&](size_t i) { out[i] = predictIterationUs(planned_[i].plan, cluster) / kUsPerMs; });
  return out;
}

}  // namespace evsim
