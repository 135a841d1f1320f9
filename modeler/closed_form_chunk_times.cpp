// The closed-form tier's per-chunk times: F_k and B_k, the P2P sends per link, the activation
// copies (closed_form_tier.h).
#include "modeler/closed_form_tier.h"

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "common/error.h"
#include "modeler/closed_form_facts.h"
#include "ops/layer_footprint.h"
#include "plan/iteration_plan.h"
#include "plan/layer_shape.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_core.h"

namespace evsim {

void ClosedFormTier::activationCopyTimes(Facts& facts, Workspace::State& workspace) const {
  // A task's copies run one at a time on the host stream and the task ends after the last
  // (op_offsets.h): it lasts at least their sum, whatever the ops beside them.
  const ModelFootprint& footprint = *facts.footprint;
  const int64_t elem_bytes = dtypeBytes(model_.dtype);
  std::map<std::pair<bool, int64_t>, double>& memo = workspace.copy_us;  // layers of a kind repeat
  auto copyUs = [&](bool out, int64_t bytes) {
    if (bytes == 0) return 0.0;  // no copy (addActivationOffload)
    auto [it, inserted] = memo.try_emplace({out, bytes}, 0.0);
    if (inserted) {
      const Event copy =
          makeCompute(out ? "offload_d2h" : "offload_h2d",
                      {{"elems", (bytes + elem_bytes - 1) / elem_bytes}}, "", model_.dtype);
      std::optional<EventCost> c = costs_.cost(copy);
      it->second = c ? c->time_us : 0.0;  // uncosted: no bound from it (the full path reports it)
    }
    return it->second;
  };
  const std::vector<int>& first_layer = facts.first_layer;
  const int K = static_cast<int>(first_layer.size());
  facts.copy_out.assign(K, 0.0);
  facts.copy_in.assign(K, 0.0);
  // The blocks of a kind come one after another with the same bytes: looked up once per run.
  int64_t last_bytes = -1;
  double last_out = 0, last_in = 0;
  for (int k = 0; k < K; ++k) {
    double out = 0, in = 0;
    auto layer = [&](int64_t saved_bytes) {
      if (saved_bytes != last_bytes) {
        last_bytes = saved_bytes;
        last_out = copyUs(true, saved_bytes);
        last_in = copyUs(false, saved_bytes);
      }
      out += last_out;
      in += last_in;
    };
    if (k == 0) layer(footprint.embedding.saved_bytes);
    const int end = k + 1 < K ? first_layer[k + 1] : static_cast<int>(model_.numLayers());
    for (int l = first_layer[k]; l < end; ++l) layer(footprint.block(model_.blocks[l]).saved_bytes);
    if (k == K - 1) layer(footprint.head.saved_bytes);
    facts.copy_out[k] = out;
    facts.copy_in[k] = in;
  }
  facts.copies_ready = true;
}

bool ClosedFormTier::sendTimes(const Strategy& strategy, Facts& facts,
                               Workspace::State& workspace) const {
  if (facts.sends_ready) return facts.sends_complete;
  facts.sends_ready = true;
  const std::vector<int>& first_layer = facts.first_layer;
  const int K = static_cast<int>(first_layer.size());
  const PipelineLayout pipeline = pipelineLayout(strategy.schedule, strategy.pp, K / strategy.pp);
  // The shape's placement does not change the bytes (plan_core.cpp builds the same event).
  const LayerShape shape = layerShape(model_, strategy, Placement{});
  // Per device pair, one send's least issued time over the pipeline classes (negative: uncosted),
  // kept per (bytes, M, P, D, C, E, ETP, wrap): classes of other v, schedules and recomputation
  // send the same.
  const std::vector<double>* least = nullptr;
  int64_t least_bytes = -1;
  auto leastByPair = [&](int64_t bytes) -> const std::vector<double>& {
    const Workspace::State::SendKey key{bytes,        strategy.tp, strategy.pp,
                                        strategy.dp,  strategy.cp, strategy.ep,
                                        strategy.expertTp(), pipeline.wraps()};
    auto [it, inserted] = workspace.pair_send_us.try_emplace(key);
    if (inserted) {
      const PlanCache::PipelineClasses& classes =
          pipelineClasses(strategy, cluster_.gpus_per_node, cache_);
      const PlanCache::PipelineGroups& groups = pipeline.wraps() ? classes.ring : classes.line;
      const size_t pairs = groups.pairs.empty() ? 0 : groups.pairs.front().size();
      it->second.assign(pairs, std::numeric_limits<double>::infinity());
      for (size_t p = 0; p < pairs; ++p) {
        for (const std::vector<Placement>& of_class : groups.pairs) {
          const double t =
              communicationUs(EventKind::kP2P, bytes, of_class[p], model_.dtype, workspace);
          it->second[p] = t < 0 || it->second[p] < 0 ? -1 : std::min(it->second[p], t);
        }
      }
    }
    return it->second;
  };
  facts.send_us.assign(K > 0 ? K - 1 : 0, 0.0);
  for (int k = 0; k + 1 < K; ++k) {
    const int pair = pipeline.linkPair(k);
    if (pair < 0) continue;  // a hand-over inside one device
    const int64_t bytes = stageOutputBytes(model_, shape, first_layer[k + 1]);
    if (least == nullptr || bytes != least_bytes) least = &leastByPair(bytes), least_bytes = bytes;
    EVSIM_CHECK(static_cast<size_t>(pair) < least->size(), "link {}: pair {} of {}", k, pair,
                least->size());
    const double t = (*least)[static_cast<size_t>(pair)];
    if (t < 0) {
      facts.sends_complete = false;
      return false;
    }
    facts.send_us[k] = std::isinf(t) ? 0.0 : t;
  }
  return true;
}

bool ClosedFormTier::chunkTimes(const Strategy& strategy, bool zero3, Facts& facts,
                                Workspace::State& workspace) const {
  const int z = zero3 ? 1 : 0;
  if (facts.times_ready[z]) return facts.times_complete[z];
  facts.times_ready[z] = true;
  facts.times_complete[z] = false;
  const std::vector<int>& first_layer = facts.first_layer;
  const int P = strategy.pp;
  const int K = static_cast<int>(first_layer.size());
  const PipelineLayout pipeline = pipelineLayout(strategy.schedule, P, K / P);
  const PlanCache::Placements& placements = *facts.placements;
  std::vector<double>& forward = facts.forward[z];
  std::vector<double>& backward = facts.backward[z];
  forward.assign(K, 0.0);
  backward.assign(K, 0.0);
  facts.backward_windows[z] = false;
  // A device's chunks share its groups, so their layer times: looked up once per device (the
  // memo's key is 21 fields; v lookups per device were 2-3% of a search).
  std::vector<std::optional<LayerTimes>>& of_device = workspace.device_layer_times;
  of_device.assign(static_cast<size_t>(P), std::nullopt);
  for (int k = 0; k < K; ++k) {
    const int s = pipeline.device(k);
    std::optional<LayerTimes>& known = of_device[static_cast<size_t>(s)];
    if (!known) {
      known = layerTimes(strategy, zero3,
                         StageGroups{placements.tp[s], placements.cp_ring[s], placements.ep[s],
                                     placements.dp[s], placements.etp[s], placements.cp_group[s]},
                         *facts.footprint, workspace);
    }
    const LayerTimes& t = *known;
    if (!t.complete) return false;
    facts.backward_windows[z] = facts.backward_windows[z] || t.backward_windows;
    const int end = k + 1 < K ? first_layer[k + 1] : static_cast<int>(model_.numLayers());
    for (int layer = first_layer[k]; layer < end; ++layer) {
      const TransformerBlock& block = model_.blocks[layer];
      forward[k] += block.cross_attention ? t.cross_forward
                    : block.moe           ? t.moe_forward
                                          : t.self_forward;
      backward[k] += block.cross_attention ? t.cross_backward
                     : block.moe           ? t.moe_backward
                                           : t.self_backward;
    }
    if (k == 0) {
      forward[k] += t.embedding_forward;
      backward[k] += t.embedding_backward;
    }
    if (k == K - 1) {
      forward[k] += t.head_forward;
      backward[k] += t.head_backward;
    }
  }
  facts.times_complete[z] = true;
  return true;
}

}  // namespace evsim
