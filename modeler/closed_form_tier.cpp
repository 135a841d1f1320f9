#include "modeler/closed_form_tier.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "common/error.h"
#include "modeler/memory_model.h"
#include "modeler/op_offsets.h"
#include "ops/fsdp_copies.h"
#include "ops/layer_footprint.h"
#include "ops/layer_ops.h"
#include "plan/iteration_plan.h"
#include "plan/layer_shape.h"
#include "plan/optimizer_step.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_core.h"
#include "plan/task_graph.h"

namespace evsim {

// One class of candidates (a strategy less its ZeRO stage, DP overlap and offload): what its
// members share, each part computed when a member first needs it.
struct ClosedFormTier::Facts {
  std::optional<Strategy> key;  // the class; nullopt before the first candidate
  // The class's footprint and worst groups in the shared cache (its maps keep references valid):
  // looked up once per class, not under the cache's lock per candidate and chunk.
  const ModelFootprint* footprint = nullptr;
  const PlanCache::Placements* placements = nullptr;
  std::vector<int> first_layer;
  std::vector<ChunkMemoryInput> chunks;
  std::vector<int64_t> parameters, dense_parameters;
  std::vector<DeviceChunkSums> devices;  // the memory model's per-device sums of the chunks
  // F_k and B_k without [0] and with [1] ZeRO-3's transfers; `complete` false when an op has no
  // cost (no bound then).
  std::array<std::vector<double>, 2> forward, backward;
  std::array<bool, 2> times_ready{}, times_complete{};
  // Activation offload: each chunk's copies out (forward) and in (backward), summed.
  std::vector<double> copy_out, copy_in;
  bool copies_ready = false;
  // Per link k (chunk k -> k+1): one P2P send's issued time, the least over the pipeline classes
  // (0 inside one device); `sends_complete` false when one is uncosted (no bound then).
  std::vector<double> send_us;
  bool sends_ready = false, sends_complete = true;
  // Per device stage, summed over its chunks (each variant when a candidate first needs it; not
  // `complete` when an op has no cost): the optimizer steps by [sharded][offload], the gradient
  // sync by [reduce-scatter rather than all-reduce], the ZeRO 1/2 parameter gathers.
  struct StageSums {
    bool ready = false, complete = true;
    std::vector<double> us;
  };
  std::array<std::array<StageSums, 4>, 2> steps;
  std::array<StageSums, 2> syncs;
  StageSums gathers;
  // The memory estimate's peak by [ZeRO stage in effect, or 4 for ZeRO-2 with --dp-overlap]
  // [offload]: the same for both parameter-gather overlaps and, but under ZeRO-2 (one IPG buffer
  // or two: plan/zero2_buckets.h), both DP overlaps, so half the class's members take it from
  // here (estimateMemory was a fifth of the search's instructions).
  std::array<std::array<std::optional<MemoryPeak>, 4>, 5> memory;
};

struct ClosedFormTier::Workspace::State {
  Facts facts;
  // The last pipeline shape's activation states (the classes of one shape, recomputation x SP,
  // come one after another): found without the shared cache's lock (sharedStates).
  using ShapeKey = std::tuple<int, int, int, int64_t, int>;
  ShapeKey last_shape{-1, 0, 0, 0, 0};
  std::shared_ptr<const std::vector<ActivationStates>> last_states;
  std::map<LayerKey, LayerTimes> layer_times;
  // (parameters, offload + 16 framework + 64 optimizer impl) -> us
  std::map<std::pair<int64_t, int>, double> step_us;
  // (kind, bytes, group size, nodes, ranks per node, dtype) -> a communication's issued time: the
  // same gradient syncs and P2P sends come back across classes, and each costs a tuner choice.
  std::map<std::tuple<int, int64_t, int, int, int, int>, double> communication_us;
  // (bytes, M, P, D, C, E, ETP, wrap) -> per device pair, a P2P send's least time (sendTimes).
  using SendKey = std::tuple<int64_t, int, int, int, int, int, int, bool>;
  std::map<SendKey, std::vector<double>> pair_send_us;
  // (out, bytes) -> one activation copy's time (activationCopyTimes): the layers' sizes come back
  // across classes, and each costs an event's signature.
  std::map<std::pair<bool, int64_t>, double> copy_us;
};

ClosedFormTier::Workspace::Workspace() : state_(std::make_unique<State>()) {}
ClosedFormTier::Workspace::~Workspace() = default;
ClosedFormTier::Workspace::Workspace(Workspace&&) noexcept = default;
ClosedFormTier::Workspace& ClosedFormTier::Workspace::operator=(Workspace&&) noexcept = default;
void ClosedFormTier::Workspace::release() { state_ = std::make_unique<State>(); }

namespace {

// scheduleActivationStates without the shared caches (Workspace::State::states).
std::shared_ptr<const std::vector<ActivationStates>> walkedStates(Schedule schedule,
                                                                  const PipelineShape& shape) {
  // A schedule file can be replaced within a process: the registry asks for it each time.
  if (schedule == Schedule::kFile) return scheduleActivationStates(schedule, shape);
  const DeviceOrders orders = pipelineSchedule(schedule).orders(shape);
  std::vector<ActivationStates> out;
  out.reserve(orders.size());
  for (const std::vector<StageTask>& order : orders) {
    out.push_back(activationStates(order, shape.chunks));
  }
  return std::make_shared<const std::vector<ActivationStates>>(std::move(out));
}

}  // namespace

// The activation states by pipeline shape, up to kCounts counts over all shapes (oldest out
// first); a shape over a quarter of that is not kept (it would push out many small ones; the
// workspace that walked it keeps it as its last). Kept here rather than in the process-wide caches
// (scheduleActivationStates, scheduleOrders), which would hold the states and the orders they
// were walked from for the rest of the process: 10 MB beside the simulations of Llama 3.1 405B on
// 1,024 GPUs, whose peak they raised. releaseShared() frees them before the simulations.
//
// A shape is walked once: the first worker to ask walks it outside the lock, a second one asking
// meanwhile waits for its result (a future) instead of walking it too. What a shape's states
// are does not depend on who walked them, so results do not depend on the thread count.
struct ClosedFormTier::SharedStates {
  using Key = std::tuple<int, int, int, int64_t, int>;
  using States = std::shared_ptr<const std::vector<ActivationStates>>;
  static constexpr size_t kCounts = size_t{1} << 20;
  std::mutex mutex;
  std::map<Key, std::shared_future<States>> states;
  std::deque<std::pair<Key, size_t>> order;  // the shapes kept, oldest first, with their counts
  size_t counts = 0;
};

ClosedFormTier::ClosedFormTier(const ModelConfig& model, const ClusterConfig& cluster,
                               const CostModel& costs, double headroom, PlanCache& cache)
    : model_(model),
      cluster_(cluster),
      costs_(costs),
      headroom_(headroom),
      cache_(cache),
      shared_states_(std::make_unique<SharedStates>()) {}

ClosedFormTier::~ClosedFormTier() = default;

void ClosedFormTier::releaseShared() const {
  std::lock_guard<std::mutex> lock(shared_states_->mutex);
  shared_states_->states.clear();
  shared_states_->order.clear();
  shared_states_->counts = 0;
}

double ClosedFormTier::issuedUs(const Event& event) const {
  std::optional<EventCost> c = costs_.cost(event);
  return c ? c->host_us + c->time_us : -1;
}

double ClosedFormTier::communicationUs(EventKind kind, int64_t bytes, const Placement& placement,
                                       DType dtype, Workspace::State& workspace) const {
  // makeCommunication's event is a function of these alone.
  auto [it, inserted] = workspace.communication_us.try_emplace(
      {static_cast<int>(kind), bytes, placement.group_size, placement.nodes,
       placement.ranks_per_node, static_cast<int>(dtype)},
      0.0);
  if (inserted) it->second = issuedUs(makeCommunication(kind, bytes, placement, dtype));
  return it->second;
}

ClosedFormTier::LayerTimes ClosedFormTier::computeLayerTimes(
    const Strategy& strategy, bool zero3, const StageGroups& groups,
    const ModelFootprint& class_footprint) const {
  LayerShape shape = layerShape(model_, strategy, groups.tp);
  if (strategy.cp > 1) shape.cp_ring = groups.cp_ring, shape.cp_group = groups.cp_group;
  if (strategy.ep > 1) shape.ep_group = groups.ep;
  shape.etp_group = groups.etp;
  EventTable table;
  LayerOpBuilder builder(shape, table);
  LayerTimes out;
  std::vector<double> op_us;  // by event index, filled as events appear
  // Op times as a task runs them (op_offsets.h), without host issue time (which only adds).
  auto sum = [&](const OpList& ops) {
    for (const OpInstance& op : ops) {
      while (static_cast<int>(op_us.size()) <= op.event) {
        std::optional<EventCost> c = costs_.cost(table[static_cast<int>(op_us.size())].event);
        if (!c) out.complete = false;
        op_us.push_back(c ? c->time_us : 0);
      }
    }
    return opOffsets(
        ops, [](const OpInstance&) { return true; },
        [&](const OpInstance& op) {
          return std::pair{0.0, op_us[op.event]};
        },
        [](size_t, double) {});
  };
  // ZeRO-3's transfers of a block, as the plan core places them (plan_core.cpp): its parameters
  // gathered before its forward and (resharding after the forward) again before its backward, its
  // gradients reduce-scattered after the backward, in the DP group, on the DP stream.
  const ModelFootprint* footprint = zero3 ? &class_footprint : nullptr;
  const bool fsdp = strategy.framework == Framework::kFsdp;
  auto zero3Op = [&](OpList& ops, int64_t params, EventKind kind, std::string_view name) {
    DType wire = model_.dtype;
    if (fsdp && kind == EventKind::kReduceScatter) wire = DType::kFp32;
    if (fsdp && kind == EventKind::kAllGather && model_.fp8WeightGather()) wire = DType::kFp8;
    Event e = makeCommunication(kind, checkedMul(params, dtypeBytes(wire), "ZeRO-3 gather bytes"),
                                groups.dp, wire);
    ops.push_back(OpInstance{table.intern(e), Stream::kDpComm, 0, name});
  };
  auto block = [&](bool cross, bool moe, double& forward, double& backward) {
    TransformerBlock b;
    b.cross_attention = cross;
    b.moe = moe;
    OpList f, g;
    // The model's own block of this kind (its footprint is keyed by the whole block).
    const auto model_block = std::find_if(
        model_.blocks.begin(), model_.blocks.end(),
        [&](const TransformerBlock& m) { return m.cross_attention == cross && m.moe == moe; });
    // FSDP under PP without reshard syncs once per step, outside the tasks (finish_plan.cpp).
    const bool transfers =
        footprint && model_block != model_.blocks.end() && !strategy.fsdpSyncsOncePerStep();
    const int64_t params = transfers ? footprint->block(*model_block).weights : 0;
    // Prefetched (sharded_prefetch.h): in the steady state a block's transfers run beside its own
    // ops, one at a time on the DP stream, so a block costs at least the longer of the two. The
    // exposed first gather and last scatter of a task only add: still a lower bound.
    // FSDP2's copy-out after each gather and copy-in before the reduce-scatter run on the
    // compute stream, with the block's ops (ops/fsdp_copies.h, as plan_core.cpp places them).
    auto copy = [&](OpList& ops, const FsdpCopy& c) {
      ops.push_back(OpInstance{table.intern(c.event), Stream::kCompute, 0, c.name});
    };
    const bool copies = transfers && fsdp;
    const bool regather = transfers && strategy.reshardsAfterForward();
    if (transfers) zero3Op(f, params, EventKind::kAllGather, "zero3_param_allgather");
    const size_t f_transfers = f.size();
    auto copyOut = [&](OpList& ops) {
      copy(ops, fsdpAllGatherCopyOut(table[ops.front().event].event.message_bytes, model_.dtype));
    };
    if (copies) copyOut(f);
    builder.blockForward(b, 0, f);
    if (regather) zero3Op(g, params, EventKind::kAllGather, "zero3_param_allgather");
    if (transfers) zero3Op(g, params, EventKind::kReduceScatter, "zero3_grad_reduce_scatter");
    const size_t g_transfers = g.size();
    if (copies && regather) copyOut(g);
    if (copies) copy(g, fsdpReduceScatterCopyIn(params, model_.dtype));
    builder.blockBackward(b, 0, g);
    auto beside = [](OpList& ops, size_t transfers) {
      for (size_t j = 0; j < transfers; ++j) {
        ops[j].overlap_ops = static_cast<int>(ops.size() - 1 - j);
      }
    };
    beside(f, f_transfers);
    beside(g, g_transfers);
    forward = sum(f);
    backward = sum(g);
  };
  block(false, false, out.self_forward, out.self_backward);
  if (model_.hasCrossAttention()) block(true, false, out.cross_forward, out.cross_backward);
  if (model_.moeLayers() > 0) block(false, true, out.moe_forward, out.moe_backward);
  const int streams = embeddingStreams(model_);
  OpList ef, eb, hf, hb;
  builder.embeddingForward(streams, ef);
  builder.embeddingBackward(streams, eb);
  builder.headForward(hf, /*owns_output_weight=*/true);  // weights do not change times
  builder.headBackward(hb);
  out.embedding_forward = sum(ef);
  out.embedding_backward = sum(eb);
  out.head_forward = sum(hf);
  out.head_backward = sum(hb);
  return out;
}

ClosedFormTier::LayerTimes ClosedFormTier::layerTimes(const Strategy& strategy, bool zero3,
                                                      const StageGroups& groups,
                                                      const ModelFootprint& footprint,
                                                      Workspace::State& workspace) const {
  auto placement = [](const Placement& p) {
    return std::make_tuple(p.group_size, p.nodes, p.ranks_per_node);
  };
  const LayerKey key{strategy.micro_batch,
                     strategy.tp,
                     strategy.sequence_parallel,
                     static_cast<int>(strategy.recompute),
                     strategy.cp,
                     strategy.ep,
                     zero3 ? 1 : 0,
                     zero3 ? static_cast<int>(strategy.framework) : 0,
                     // What the transfers depend on (the reshard policy and, through it, P).
                     zero3 ? (strategy.reshardsAfterForward() ? 1 : 0) +
                                 (strategy.fsdpSyncsOncePerStep() ? 2 : 0)
                           : 0,
                     placement(groups.tp),
                     placement(groups.cp_ring),
                     placement(groups.ep),
                     placement(zero3 ? groups.dp : Placement{}),
                     strategy.expertTp(),
                     placement(groups.etp),
                     strategy.tp_comm_overlap,
                     static_cast<int>(strategy.moe_dispatcher),
                     strategy.framework != Framework::kFsdp ? 0
                     : strategy.eagerKernels()              ? 2
                     : strategy.eagerLoss()                 ? 3
                                                            : 1,
                     placement(groups.cp_group),
                     static_cast<int>(strategy.cp_comm),
                     strategy.cp_a2a};
  auto it = workspace.layer_times.find(key);
  if (it != workspace.layer_times.end()) return it->second;
  return workspace.layer_times
      .try_emplace(key, computeLayerTimes(strategy, zero3, groups, footprint))
      .first->second;
}

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
  // A device's chunks share its groups, so their layer times: looked up once per device (the
  // memo's key is 21 fields; v lookups per device were 2-3% of a search).
  std::vector<std::optional<LayerTimes>> of_device(static_cast<size_t>(P));
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

double ClosedFormTier::lowerBoundUs(const Strategy& strategy, int64_t micro_batches, Facts& facts,
                                    Workspace::State& workspace) const {
  const int P = strategy.pp, G = strategy.gradGroupSize();
  const int K = static_cast<int>(facts.first_layer.size());
  const int v = K / P;
  const PipelineLayout pipeline = pipelineLayout(strategy.schedule, P, v);
  const int zero = G > 1 ? strategy.zero_stage : 0;
  const int64_t elem_bytes = dtypeBytes(model_.dtype);
  const PlanCache::Placements& placements = *facts.placements;

  // Per virtual stage: one micro-batch's forward and backward op-time sums.
  const bool zero3 = zero == 3;
  if (!chunkTimes(strategy, zero3, facts, workspace)) return 0;
  const std::vector<double>* forward = &facts.forward[zero3 ? 1 : 0];
  const std::vector<double>* backward = &facts.backward[zero3 ? 1 : 0];
  std::vector<double> with_copies_forward, with_copies_backward;
  if (offloadsActivations(strategy.offload)) {
    if (!facts.copies_ready) activationCopyTimes(facts, workspace);
    with_copies_forward = *forward;
    with_copies_backward = *backward;
    for (int k = 0; k < K; ++k) {
      with_copies_forward[k] = std::max(with_copies_forward[k], facts.copy_out[k]);
      with_copies_backward[k] = std::max(with_copies_backward[k], facts.copy_in[k]);
    }
    forward = &with_copies_forward;
    backward = &with_copies_backward;
  }
  // One optimizer step's ops over `params`, issued one after another (memoised per thread).
  auto stepUs = [&](int64_t params) {
    auto [it, inserted] =
        workspace.step_us.try_emplace({params, static_cast<int>(strategy.offload) +
                                                   16 * static_cast<int>(strategy.framework) +
                                                   64 * static_cast<int>(strategy.optimizer_impl)},
                                      0.0);
    if (inserted) {
      for (const StepOp& op : frameworkStepOps(params, model_.dtype, strategy.offload,
                                               strategy.framework, strategy.optimizer_impl)) {
        const double t = issuedUs(op.event);
        if (t < 0) {
          it->second = -1;
          break;
        }
        it->second += t;
      }
    }
    return it->second;
  };
  // Sums `chunk_us(k)` per device stage into `sums` the first time; false when one is uncosted.
  auto stageSums = [&](Facts::StageSums& sums, auto&& chunk_us) {
    if (!sums.ready) {
      sums.ready = true;
      sums.us.assign(P, 0.0);
      for (int k = 0; k < K && sums.complete; ++k) {
        const double t = chunk_us(k);
        if (t < 0) sums.complete = false;
        sums.us[pipeline.device(k)] += t;
      }
    }
    return sums.complete;
  };
  // Gradients travel in the DP reduction's dtype (fp32 for Megatron's bf16 models), the ZeRO 1/2
  // parameter gathers in the model's (finish_plan.cpp, plan_core.cpp, optimizer_step.h).
  // The events carry that dtype as the plan's do, so a profile's records are found by signature.
  const DType grad_wire =
      dataParallelGradDtype(strategy.framework, model_.dtype, strategy.grad_reduce_in_bf16);
  const int64_t grad_bytes = dtypeBytes(grad_wire);
  auto syncUs = [&](EventKind kind, int k) {
    const bool gather = kind == EventKind::kAllGather;
    const int64_t bytes = facts.dense_parameters[k] * (gather ? elem_bytes : grad_bytes);
    return communicationUs(kind, bytes, placements.dp[pipeline.device(k)],
                           gather ? model_.dtype : grad_wire, workspace);
  };
  // After the pipeline: gradient sync (not overlapped), optimizer, ZeRO 1/2 parameter gathers.
  const int offload = static_cast<int>(strategy.offload);
  EVSIM_CHECK(offload >= 0 && offload < 4, "offload {}", offload);
  Facts::StageSums& steps = facts.steps[zero > 0 ? 1 : 0][offload];
  // Under EP the experts' shard is over fewer ranks: dividing all by G stays below the plan's.
  if (!stageSums(steps, [&](int k) {
        return stepUs(zero > 0 ? (facts.parameters[k] + G - 1) / G : facts.parameters[k]);
      })) {
    return 0;
  }
  std::vector<double> post = steps.us;
  if (G > 1 && zero < 3) {
    // ZeRO-2 reduces in the backward's op list (plan/zero2_buckets.h): no step sync to add.
    if (!strategy.dp_overlap && zero < 2) {
      const EventKind kind = zero > 0 ? EventKind::kReduceScatter : EventKind::kAllReduce;
      Facts::StageSums& syncs = facts.syncs[zero > 0 ? 1 : 0];
      if (!stageSums(syncs, [&](int k) { return syncUs(kind, k); })) return 0;
      for (int s = 0; s < P; ++s) post[s] += syncs.us[s];
    }
    // Overlapped with the next forward (--overlap-param-gather), the gathers stall it by >= 0.
    if (zero > 0 && !strategy.overlap_param_gather) {
      if (!stageSums(facts.gathers,
                     [&](int k) { return syncUs(EventKind::kAllGather, k); })) {
        return 0;
      }
      for (int s = 0; s < P; ++s) post[s] += facts.gathers.us[s];
    }
  }
  const double m = static_cast<double>(micro_batches);
  // Fused tasks: DualPipeV's, or the combined 1F1B of --overlap-moe-expert-parallel-comm.
  const bool fuses = fusesTasks(strategy);
  // A fused task (DualPipeV) lasts max(compute, all-to-all) >= half its members' sum: with expert
  // all-to-alls to hide, only half the work is a bound (timing_engine.h).
  const double work_share = fuses && strategy.ep > 1 ? 0.5 : 1.0;
  // P2P sends: a lone task's send holds its device right after it, and the data arrives when the
  // send ends (timing_engine.h): each forward of chunk k < K-1 and each backward (B) of chunk
  // k > 0 adds its link's send to its device's work, and the sends along micro-batch 0's first
  // forwards and the last backwards to fill and drain. Left out wherever tasks fuse (a fused
  // task's sends go out on the communication stream; lone tasks beside them are left out too).
  if (!fuses && !sendTimes(strategy, facts, workspace)) return 0;
  auto sendUs = [&](int link) {
    return fuses || link < 0 || link + 1 >= K ? 0.0 : facts.send_us[static_cast<size_t>(link)];
  };
  double bound = 0, fill = 0, drain = 0;
  // ZeRO-2 reduce-scatters every micro-batch's gradients bucket by bucket on the DP stream, one
  // bucket at a time (plan/zero2_buckets.h), and the step's ops wait for the last: a device's
  // iteration lasts at least m of its chunks' reductions plus its step. A chunk's buckets cost at
  // least one reduce-scatter of all its dense gradients (a collective's cost is concave in its
  // bytes: one message of the sum costs no more than the parts), which syncUs gives.
  if (G > 1 && zero == 2) {
    Facts::StageSums& syncs = facts.syncs[1];
    if (!stageSums(syncs, [&](int k) { return syncUs(EventKind::kReduceScatter, k); })) return 0;
    for (int s = 0; s < P; ++s) bound = std::max(bound, m * syncs.us[s] + post[s]);
  }
  for (int s = 0; s < P; ++s) {
    double per_micro_batch = 0;
    for (int c = 0; c < v; ++c) {
      const int k = pipeline.virtualStage(s, c);
      per_micro_batch += (*forward)[k] + (*backward)[k] + sendUs(k) + sendUs(k - 1);
    }
    const double work = m * per_micro_batch * work_share;
    bound = std::max(bound, fill + work + post[s]);
    bound = std::max(bound, fill + work + drain + post[0]);
    fill += (*forward)[s] + sendUs(s);
    // Device s's gradient send to s-1 is in its work: the drain's chain sends from s-1 on.
    drain += (*backward)[s] + sendUs(s - 1);
  }
  return bound;
}

std::shared_ptr<const std::vector<ActivationStates>> ClosedFormTier::sharedStates(
    Schedule schedule, const PipelineShape& shape,
    const std::tuple<int, int, int, int64_t, int>& key) const {
  SharedStates& shared = *shared_states_;
  std::promise<SharedStates::States> walk;
  std::unique_lock<std::mutex> lock(shared.mutex);
  auto [it, inserted] = shared.states.try_emplace(key);
  if (!inserted) {
    const std::shared_future<SharedStates::States> known = it->second;
    lock.unlock();  // wait for its walker (if still walking) without holding the others up
    return known.get();
  }
  it->second = walk.get_future().share();
  lock.unlock();
  SharedStates::States states;
  try {
    states = walkedStates(schedule, shape);
  } catch (...) {
    walk.set_exception(std::current_exception());  // a waiter rethrows it too
    // Not kept: a later worker asking walks again (a transient failure does not stick).
    const std::lock_guard<std::mutex> relock(shared.mutex);
    shared.states.erase(key);
    throw;
  }
  walk.set_value(states);
  size_t counts = 0;
  for (const ActivationStates& device : *states) counts += device.counts.size();
  lock.lock();
  if (counts > SharedStates::kCounts / 4) {
    // Too large to keep: a later worker asking for it walks it again (its waiters have it).
    shared.states.erase(key);
    return states;
  }
  while (!shared.order.empty() && shared.counts + counts > SharedStates::kCounts) {
    shared.states.erase(shared.order.front().first);
    shared.counts -= shared.order.front().second;
    shared.order.pop_front();
  }
  shared.order.emplace_back(key, counts);
  shared.counts += counts;
  return states;
}

ClosedFormTier::Facts& ClosedFormTier::facts(const Strategy& strategy,
                                             Workspace::State& workspace) const {
  Strategy key = strategy;
  key.zero_stage = 0;
  key.dp_overlap = false;
  key.overlap_param_gather = false;
  key.offload = Offload::kNone;
  Facts& f = workspace.facts;
  if (f.key && *f.key == key) return f;
  f = Facts{};
  f.key = key;
  f.first_layer = stageFirstLayers(model_, strategy, &cache_);
  const ModelFootprint& footprint = cachedFootprint(model_, strategy, cache_);
  f.footprint = &footprint;
  f.placements = &stagePlacements(strategy, cluster_.gpus_per_node, cache_);
  const std::vector<int>& first_layer = f.first_layer;
  const int K = static_cast<int>(first_layer.size());
  const ModelFootprint* unrecomputed = nullptr;
  if (strategy.recompute != Recompute::kNone) {
    Strategy plain = strategy;
    plain.recompute = Recompute::kNone;
    unrecomputed = &cachedFootprint(model_, plain, cache_);
  }
  f.chunks.resize(K);
  f.parameters.resize(K);
  f.dense_parameters.resize(K);
  for (int k = 0; k < K; ++k) {
    ChunkMemoryInput& c = f.chunks[k];
    const int end = k + 1 < K ? first_layer[k + 1] : static_cast<int>(model_.numLayers());
    const bool has_embedding = k == 0, has_head = k == K - 1;
    c.parameters =
        chunkParameters(model_, strategy, first_layer[k], end, has_embedding, has_head, &cache_);
    // The same sums the plan's forward op lists give (estimateMemory(plan)).
    for (int layer = first_layer[k]; layer < end; ++layer) {
      const LayerFootprint& block = footprint.block(model_.blocks[layer]);
      c.activation_bytes += block.saved_bytes;
      c.largest_layer_bytes = std::max(c.largest_layer_bytes, block.saved_bytes);
      c.expert_parameters += block.expert_weights;
      c.weight_grad_input_bytes += block.weight_grad_input_bytes;
    }
    if (has_embedding) {
      c.activation_bytes += footprint.embedding.saved_bytes;
      c.largest_layer_bytes = std::max(c.largest_layer_bytes, footprint.embedding.saved_bytes);
      c.weight_grad_input_bytes += footprint.embedding.weight_grad_input_bytes;
    }
    if (has_head) {
      c.activation_bytes += footprint.head.saved_bytes;
      c.largest_layer_bytes = std::max(c.largest_layer_bytes, footprint.head.saved_bytes);
      c.weight_grad_input_bytes += footprint.head.weight_grad_input_bytes;
      c.expert_parameters += footprint.head.expert_weights;  // an MTP depth's MoE block
    }
    addLayerFacts(model_, footprint, unrecomputed, first_layer[k], end, has_embedding, has_head, c);
    f.parameters[k] = c.parameters;
    // The parameters the DP group (x CP) synchronises: all, or without the experts under EP.
    f.dense_parameters[k] = c.parameters - (strategy.expertsSyncApart() ? c.expert_parameters : 0);
  }
  const PipelineShape shape{strategy.pp, K / strategy.pp, strategy.microBatches(),
                            strategy.microbatch_group};
  // The group only matters to the interleaved schedule (scheduleOrders' key).
  const Workspace::State::ShapeKey shape_key{
      static_cast<int>(strategy.schedule), shape.stages, shape.chunks, shape.micro_batches,
      strategy.schedule == Schedule::kInterleaved && shape.group > 0 ? shape.group : 0};
  std::shared_ptr<const std::vector<ActivationStates>> states;
  if (strategy.schedule == Schedule::kFile) {
    states = walkedStates(strategy.schedule, shape);  // asked for each time, as the registry does
  } else if (workspace.last_states && workspace.last_shape == shape_key) {
    states = workspace.last_states;
  } else {
    states = sharedStates(strategy.schedule, shape, shape_key);
  }
  workspace.last_shape = shape_key;
  workspace.last_states = states;
  f.devices = deviceChunkSums(strategy, shape.micro_batches, f.chunks, *states);
  return f;
}

ClosedFormResult ClosedFormTier::evaluate(const Strategy& strategy) const {
  Workspace workspace;
  return evaluate(strategy, workspace);
}

ClosedFormResult ClosedFormTier::evaluate(const Strategy& strategy, Workspace& workspace) const {
  Workspace::State& state = *workspace.state_;
  // A long search sees many step sizes: the memo stays small.
  if (state.step_us.size() > 65536) state.step_us.clear();
  if (state.layer_times.size() > 65536) state.layer_times.clear();
  if (state.communication_us.size() > 65536) state.communication_us.clear();
  if (state.pair_send_us.size() > 4096) state.pair_send_us.clear();
  if (state.copy_us.size() > 65536) state.copy_us.clear();
  ClosedFormResult out;
  out.micro_batches = strategy.microBatches();
  Facts& f = facts(strategy, state);
  const int zero = strategy.gradGroupSize() > 1 ? strategy.zero_stage : 0;
  const int offload = static_cast<int>(strategy.offload);
  EVSIM_CHECK(zero >= 0 && zero < 4 && offload >= 0 && offload < 4, "zero {}, offload {}", zero,
              offload);
  // ZeRO-2's buffers depend on the overlap (plan/zero2_buckets.h), which the facts' key resets.
  const int memory_slot = zero == 2 && strategy.dp_overlap ? 4 : zero;
  std::optional<MemoryPeak>& mem =
      f.memory[static_cast<size_t>(memory_slot)][static_cast<size_t>(offload)];
  if (!mem) {
    mem = estimateMemoryPeak(model_, strategy, cluster_.device.memoryBytes(), f.devices, headroom_,
                             hostCapacity(cluster_), cluster_.device.memory);
  }
  out.peak_memory_bytes = mem->peak_bytes;
  out.peak_memory_stage = mem->peak_stage;
  out.fits = mem->fits;
  if (out.fits) out.lower_bound_us = lowerBoundUs(strategy, out.micro_batches, f, state);
  return out;
}

}  // namespace evsim
