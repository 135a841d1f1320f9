#pragma once
// Internal to the closed-form tier (modeler/closed_form_*.cpp): one class's facts and one
// thread's workspace, which its files share. Not for other callers.

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "events/event_table.h"
#include "modeler/closed_form_tier.h"
#include "modeler/memory_model.h"
#include "modeler/shared_memo.h"
#include "ops/op_list.h"
#include "plan/plan_cache.h"
#include "plan/strategy.h"

namespace evsim {

// One class of candidates (a strategy less its ZeRO stage, DP overlap and offload): what its
// members share, each part computed when a member first needs it.
struct ClosedFormTier::Facts {
  std::optional<Strategy> key;  // the class; nullopt before the first candidate
  // The class's footprint and worst groups in the shared cache (valid until its releaseLookups,
  // which a search's pass calls only after every worker's workspace was released: a released
  // workspace has no key, so these are looked up afresh): once per class, not under the cache's
  // lock per candidate and chunk.
  const ModelFootprint* footprint = nullptr;
  const PlanCache::Placements* placements = nullptr;
  std::vector<int> first_layer;
  std::vector<ChunkMemoryInput> chunks;
  std::vector<int64_t> parameters, dense_parameters;
  std::vector<DeviceChunkSums> devices;  // the memory model's per-device sums of the chunks
  // Whether `devices` hold --grad-reduce-sync step's least first buckets (setLeastFirstBuckets):
  // set when a ZeRO-2 step member first needs them, no other reads them.
  bool least_first_buckets = false;
  // F_k and B_k without [0] and with [1] ZeRO-3's transfers; `complete` false when an op has no
  // cost (no bound then).
  std::array<std::vector<double>, 2> forward, backward;
  std::array<bool, 2> times_ready{}, times_complete{};
  // Whether some chunk's backward has an op running beside later ones (LayerTimes).
  std::array<bool, 2> backward_windows{};
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
  // ZeRO-2: per chunk, the device time of one reduce-scatter of all its dense gradients (no more
  // than its buckets' reductions in one micro-batch's backward, closed_form_bound.cpp); `complete`
  // false when uncosted.
  StageSums zero2_chunk_reductions;
  // ZeRO-2 under --grad-reduce-sync step: per device stage, the same reduce-scatters' device
  // times summed over its chunks (the DP stream's queue issues them without host time).
  StageSums zero2_queued_reductions;
  // lowerBoundUs's per device stage s, by the lists it reads (ZeRO-3's F and B or not, with
  // activation offload's copies or not, ZeRO-2's reductions none, in series or beside: index
  // z + 2 * copies + 4 * reductions): one micro-batch's work of its chunks with their sends, and
  // the fill and drain before it (the sums over stages 0..s-1). The same for every member of the
  // class that reads the same lists, so a candidate's bound loops over P stages instead of the
  // K = P x v chunks (the loop was most of lowerBoundUs, 12% of Llama 3 70B's search on 1,024 GPUs).
  struct StageWork {
    bool ready = false;
    std::vector<double> per_micro_batch, fill, drain;
  };
  std::array<StageWork, 12> stage_work;
  // The memory estimate's peak by [ZeRO stage in effect, or 4 for ZeRO-2 with --dp-overlap, 5
  // with --grad-reduce-sync step: its pending reductions]
  // [offload]: the same for both parameter-gather overlaps and, but under ZeRO-2 (one IPG buffer
  // or two: plan/zero2_buckets.h), both DP overlaps, so half the class's members take it from
  // here (estimateMemory was a fifth of the search's instructions).
  std::array<std::array<std::optional<MemoryPeak>, 4>, 6> memory;

  // Empties the facts for the next class, as `*this = Facts{}` does, but keeps the vectors'
  // storage: a worker meets a new class every ~10-30 candidates, and allocating these anew for
  // each was ~10% of Llama 3 70B's search's heap allocations on 1,024 GPUs (bench/RESULTS.md,
  // session 25, thr34b). A field left out here is still emptied, only not reused.
  void startClass() {
    Facts next;
    auto reuse = [](auto& to, auto& from) {
      from.clear();
      to.swap(from);
    };
    reuse(next.first_layer, first_layer);
    reuse(next.chunks, chunks);
    reuse(next.parameters, parameters);
    reuse(next.dense_parameters, dense_parameters);
    reuse(next.devices, devices);
    for (size_t z = 0; z < 2; ++z) {
      reuse(next.forward[z], forward[z]);
      reuse(next.backward[z], backward[z]);
      reuse(next.syncs[z].us, syncs[z].us);
      for (size_t o = 0; o < steps[z].size(); ++o) reuse(next.steps[z][o].us, steps[z][o].us);
    }
    reuse(next.copy_out, copy_out);
    reuse(next.copy_in, copy_in);
    reuse(next.send_us, send_us);
    reuse(next.gathers.us, gathers.us);
    reuse(next.zero2_chunk_reductions.us, zero2_chunk_reductions.us);
    reuse(next.zero2_queued_reductions.us, zero2_queued_reductions.us);
    for (size_t i = 0; i < stage_work.size(); ++i) {
      reuse(next.stage_work[i].per_micro_batch, stage_work[i].per_micro_batch);
      reuse(next.stage_work[i].fill, stage_work[i].fill);
      reuse(next.stage_work[i].drain, stage_work[i].drain);
    }
    *this = std::move(next);
  }
};

// The layer times every workspace shares (closed_form_layer_times.cpp): a key is computed once,
// by the first worker to miss it; another worker missing it meanwhile waits for that result
// instead of computing it too (two workers computed each of the 70B search's keys twice, +0.17 G
// instructions). A workspace keeps what it took from here in its own memo, so a hit takes no
// lock; only a workspace's first look at a key does. Emptied when it would grow past 65,536 keys.
struct ClosedFormTier::SharedLayerTimes : SharedMemo<LayerKey, LayerTimes> {
  SharedLayerTimes() : SharedMemo(65536) {}
};

// On cache lines of its own (the workers' states are allocated one after another by one thread,
// and each writes its own per candidate).
struct alignas(64) ClosedFormTier::Workspace::State {
  Facts facts;
  // The last pipeline shape's activation states (the classes of one shape, recomputation x SP,
  // come one after another): found without the shared cache's lock (sharedStates).
  using ShapeKey = std::tuple<int, int, int, int64_t, int>;
  ShapeKey last_shape{-1, 0, 0, 0, 0};
  std::shared_ptr<const std::vector<ActivationStates>> last_states;
  std::map<LayerKey, LayerTimes> layer_times;
  // computeLayerTimes's events, each op's time and whether it has a cost (by event index), and
  // its op lists, kept across the keys this workspace computes: the keys of one class differ in
  // their groups' placements, so most of their events (GEMMs, norms) recur. Built afresh per key,
  // each event's signature and copies were ~30% of Llama 3 70B's search's heap allocations on
  // 1,024 GPUs, contended at two threads (bench/RESULTS.md, session 25, thr34b). An event's time
  // is a pure function of the event, so which keys came before changes no result. Started again
  // past kKept events (~300 bytes each): neither search there came near it (4,096 and 1,024 gave
  // the same allocation counts), so it bounds the memory a wider model or space could keep.
  struct LayerEvents {
    static constexpr int kKept = 1024;
    EventTable table;
    std::vector<double> op_us;
    std::vector<char> uncosted;
    OpList forward, backward;
  };
  LayerEvents layer_events;
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
  // lowerBoundUs's per-candidate scratch (per device stage; per chunk with activation offload).
  std::vector<double> post_us, copies_forward_us, copies_backward_us, zero2_backward_us;
  // deviceChunkSums's per-chunk sizes (scratch, as above).
  DeviceChunkScratch device_chunk_scratch;
  // chunkTimes's per device stage layer times (scratch, as above).
  std::vector<std::optional<LayerTimes>> device_layer_times;
};

}  // namespace evsim
