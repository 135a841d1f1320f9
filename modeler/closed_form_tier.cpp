#include "modeler/closed_form_tier.h"

#include <algorithm>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "modeler/closed_form_facts.h"
#include "modeler/memory_model.h"
#include "ops/layer_footprint.h"
#include "plan/iteration_plan.h"
#include "plan/pipeline_schedule.h"
#include "plan/plan_core.h"

namespace evsim {

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
      shared_states_(std::make_unique<SharedStates>()),
      shared_layer_times_(std::make_unique<SharedLayerTimes>()) {}

ClosedFormTier::~ClosedFormTier() = default;

void ClosedFormTier::releaseShared() const {
  std::lock_guard<std::mutex> lock(shared_states_->mutex);
  shared_states_->states.clear();
  shared_states_->order.clear();
  shared_states_->counts = 0;
  shared_layer_times_->clear();
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

double ClosedFormTier::communicationDeviceUs(EventKind kind, int64_t bytes,
                                             const Placement& placement, DType dtype,
                                             Workspace::State& workspace) const {
  // Kept beside the issued times, the kind's code offset by kDeviceTimeKey.
  constexpr int kDeviceTimeKey = 1 << 16;
  auto [it, inserted] = workspace.communication_us.try_emplace(
      {static_cast<int>(kind) + kDeviceTimeKey, bytes, placement.group_size, placement.nodes,
       placement.ranks_per_node, static_cast<int>(dtype)},
      0.0);
  if (inserted) {
    const std::optional<EventCost> c =
        costs_.cost(makeCommunication(kind, bytes, placement, dtype));
    it->second = c ? c->time_us : -1;
  }
  return it->second;
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
  key.grad_reduce_sync = GradReduceSync::kBackward;
  key.grad_reduce_queue = 0;
  key.offload = Offload::kNone;
  Facts& f = workspace.facts;
  if (f.key && *f.key == key) return f;
  f.startClass();
  f.key = key;
  stageFirstLayers(model_, strategy, &cache_, f.first_layer);
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
    c.parameters = chunkParameters(model_, footprint, first_layer[k], end, has_embedding, has_head);
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
  // The last shape's states are read in place: copying the pointer (an atomic count on a control
  // block the other workers' copies share) for each class put the workers on one cache line.
  if (strategy.schedule == Schedule::kFile) {
    // Asked for each time, as the registry does.
    workspace.last_states = walkedStates(strategy.schedule, shape);
  } else if (!workspace.last_states || !(workspace.last_shape == shape_key)) {
    workspace.last_states = sharedStates(strategy.schedule, shape, shape_key);
  }
  workspace.last_shape = shape_key;
  deviceChunkSums(strategy, shape.micro_batches, f.chunks, *workspace.last_states, f.devices,
                  workspace.device_chunk_scratch);
  return f;
}

ClosedFormResult ClosedFormTier::evaluate(const Strategy& strategy) const {
  Workspace workspace;
  return evaluate(strategy, workspace);
}

ClosedFormResult ClosedFormTier::evaluate(const Strategy& strategy, Workspace& workspace,
                                          int64_t exact_peak_below) const {
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
  // ZeRO-2's buffers depend on the overlap and on --grad-reduce-sync (plan/zero2_buckets.h,
  // memory_components.h), which the facts' key resets.
  const int memory_slot = zero == 2 && strategy.reducesAtStep() ? 5
                          : zero == 2 && strategy.dp_overlap   ? 4
                                                               : zero;
  if (memory_slot == 5 && !f.least_first_buckets) {
    // --grad-reduce-sync step's least pending bucket (memory_model.h), as the plan's estimate:
    // for the class's first such member only (the facts' key resets ZeRO and the sync mode).
    setLeastFirstBuckets(model_, strategy, f.chunks, f.devices);
    f.least_first_buckets = true;
  }
  std::optional<MemoryPeak>& mem =
      f.memory[static_cast<size_t>(memory_slot)][static_cast<size_t>(offload)];
  // A bound kept from an earlier member serves while it is at least the figure asked for.
  if (!mem || (!mem->exact && mem->peak_bytes < exact_peak_below)) {
    mem = estimateMemoryPeak(model_, strategy, cluster_.device.memoryBytes(), f.devices, headroom_,
                             hostCapacity(cluster_), cluster_.device.memory, exact_peak_below);
  }
  out.peak_memory_bytes = mem->peak_bytes;
  out.peak_memory_stage = mem->peak_stage;
  out.fits = mem->fits;
  out.peak_exact = mem->exact;
  if (out.fits) out.lower_bound_us = lowerBoundUs(strategy, out.micro_batches, f, state);
  return out;
}

}  // namespace evsim
