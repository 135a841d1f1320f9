#pragma once
// Flows sharing links over time (issue 28, item 4): flow-level, max-min fair, not packets.
//
// A flow is one transfer (a P2P send, a collective) of one representative GPU: it starts at a
// known time, takes `duration_us` when alone (the NCCL tuner's or the profile's time: sharing never
// changes a lone flow) and moves `bytes` through each resource it uses (a GPU's NVLink ports, a
// node's NICs, a node's share of an oversubscribed tier's uplinks), so alone it needs
// demand = bytes / duration_us. A flow stands for `copies` identical flows of symmetric GPUs that
// cross the same resource at the same time (the 8 TP ranks of a stage each send their own
// activation through the node's NICs): they are computed once, and load the resource `copies`
// times.
//
// While flows overlap, each gets its max-min fair rate (progressive filling): every unfrozen flow's
// rate rises equally until it reaches its demand or a resource it uses is full (sum over its flows
// of copies x rate = capacity); those flows freeze and the rest rise on. The rates are recomputed
// whenever a flow starts or ends. A flow at rate x progresses x / demand of its standalone time per
// microsecond, so a flow that overlaps another only for part of its life is stretched only there.
// A resource is never slower than what one of its flows gets alone: its capacity is raised to the
// largest copies x demand among its flows (a profile's time may beat the nominal link).
//
// Units: microseconds, bytes, bytes per microsecond (1 GB/s = 1e3 bytes/us).

#include <array>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace evsim {

struct LinkUse {
  int resource = 0;  // index into the capacities
  float copies = 1;  // symmetric GPUs pushing this flow through the resource at once
};

// The resources of one flow, held inline (a flow crosses at most a GPU's ports, a node's NICs and
// the uplinks of a few tiers, each both ways): thousands of flows per timing, no allocation each.
class LinkUses {
 public:
  static constexpr int kMax = 12;
  LinkUses() = default;
  LinkUses(std::initializer_list<LinkUse> uses);
  void push_back(LinkUse use);  // Error past kMax
  const LinkUse* begin() const { return at_.data(); }
  const LinkUse* end() const { return at_.data() + size_; }
  bool empty() const { return size_ == 0; }
  int size() const { return size_; }

 private:
  std::array<LinkUse, kMax> at_{};
  int size_ = 0;
};

struct SharedFlow {
  double start_us = 0;
  double duration_us = 0;  // alone
  double bytes = 0;        // per copy, through each resource in `uses`
  LinkUses uses;
  // An earlier flow of the list this one follows (a task's collectives run one after another), or
  // -1: it starts when that one ends plus the gap their standalone times leave (start_us - that
  // one's start_us - duration_us), never before start_us.
  int after = -1;
  // Follows `after` as a queue does (--grad-reduce-sync step's reductions on the DP stream): it
  // starts at the later of start_us and that one's end, with no gap. What kept it from starting
  // earlier alone was its own start (its bucket's close), not the gap: a delay of the one before
  // moves it only past its own start. Where the queue was busy (start_us = that one's end alone)
  // the two rules agree.
  bool queued = false;
};

// A flow's load alone on each resource it uses (bytes / its standalone time, times the copies),
// in `uses` order, raising `capacity` to each (a resource carries at least the largest load alone
// that uses it: link sharing's transfer loads and the link report's totals take the same maxima).
// Returns how many entries of `at` it wrote: 0 for an empty or instant flow.
using FlowLoads = std::array<std::pair<size_t, double>, LinkUses::kMax>;
int flowLoads(const SharedFlow& flow, std::vector<double>& capacity, FlowLoads& at);

// Flows held compactly (issue 34: a CP ring's exchanges are ~10^6 flows of one simulation, 128
// bytes each as SharedFlows): what identical flows share (their standalone time, bytes and
// resources) is one shape, and a flow is its start and its shape (10 bytes while the list has at
// most 65,536 shapes, a few thousand in a search's largest simulations; 12 beyond; 6 and 8 with
// starts on the tick, below) and whether it follows the flow listed just before it (a bit: a
// task's collectives are listed one after another). The rare follower of another flow (a fused
// task's two interleaved chains) is kept aside. A flow of shape s is SharedFlow{startUs(f),
// shape(s).duration_us, shape(s).bytes, uses(s), after(f), shape(s).queued}.
//
// A list reserved for kTickedFromFlows flows or more keeps each start, and each shape's time
// alone, on the tick at or before it, 1/16 us (kStartTickUs: 62.5 ns, far below any transfer's
// latency), a start as a 4-byte count of ticks while the starts lie in [0, 2^32 ticks) = [0,
// 268 s), which holds the searched plans' iterations (Llama 3.1 405B on 1,024 GPUs: ~72 s); a
// start outside that (or not finite) moves the list to 8-byte starts, still on the tick. Why: a
// sharing pass holds its list whole, and with 4-byte starts two of the 405B search's largest
// passes (~10^6 flows each) fit side by side in the rounds' memory budget
// (pruned_search_state.h; bench/RESULTS.md, session 32). Why the times alone too: a flow that
// starts where another ends (the next of a chain, the next bucket on a stream; start = start +
// time alone in floating point) must not overlap it on the tick, and floor(a) + floor(b) <=
// floor(a + b): with the starts alone on the tick, it would overlap it by up to a tick, share a
// link for nothing and be stretched (or released late) by it. So flows that met or were apart
// still are, and a plan nothing contends in keeps every standalone end (a start listed at or
// after the end is on the tick at or after the end's; an in-task chain's starts, the task's
// start plus scaled offsets, meet only up to rounding, as in an exact list, where such a
// rounding overlap of a few ulps can now cost up to a tick). A time alone under a tick is 0
// there: that flow neither shares nor links a chain (none is that short: NCCL's latency alone
// is microseconds). A smaller list keeps its times exactly (0.26 MB at most is at stake there,
// and a hand-worked timeline keeps its arithmetic). Every reader takes the times from the list
// (the sharing pass, the stretches, the standalone ends), never from the timeline.
class FlowList {
 public:
  struct Shape {
    double duration_us = 0;  // alone
    double bytes = 0;        // per copy, through each resource it uses
    uint32_t first_use = 0;  // into the uses of every shape
    uint16_t use_count = 0;  // at most LinkUses::kMax
    bool queued = false;     // its flows follow as SharedFlow::queued
  };
  // A new shape (its index); a flow's resources as SharedFlow::uses.
  int addShape(double duration_us, double bytes, const LinkUses& uses, bool queued = false);
  // A flow of `shape` starting at `start_us`, following flow `after` (-1: none; else an earlier
  // flow, which no other flow follows); its index.
  int add(double start_us, int shape, int after = -1);
  // Each of `flows` with a shape of its own (on the tick from kTickedFromFlows flows).
  static FlowList of(std::span<const SharedFlow> flows);

  static constexpr double kStartTickUs = 1.0 / 16;
  static constexpr size_t kTickedFromFlows = size_t{1} << 16;
  // `us` on the tick at or before it: what startUs gives back for a flow added at `us` to a list
  // on the tick, and shape(s).duration_us for a time alone of `us` (exact: a power of two, a
  // whole number of ticks).
  static double onTick(double us) { return std::floor(us / kStartTickUs) * kStartTickUs; }
  // The bytes a start takes in a list reserved for `flows` flows none of which starts after
  // `latest_start_us` (>= 0): 4, as a count of ticks, or 8.
  static size_t startBytes(size_t flows, double latest_start_us) {
    return flows >= kTickedFromFlows && fitsTicks(latest_start_us / kStartTickUs) ? 4 : 8;
  }

  size_t size() const { return ticks_ ? start_ticks_.size() : start_us_.size(); }
  size_t shapes() const { return shapes_.size(); }
  double startUs(size_t f) const { return ticks_ ? ticksUs(start_ticks_[f]) : start_us_[f]; }
  // Whether the starts are kept on the tick, and whether in 4 bytes each.
  bool startsOnTick() const { return on_tick_; }
  bool startsInTicks() const { return ticks_; }
  int shapeOf(size_t f) const { return wide_ ? wide_shape_[f] : shape_[f]; }
  // The flow `f` follows (SharedFlow::after), or -1.
  int after(size_t f) const {
    if (followsPrevious(f)) return static_cast<int>(f) - 1;
    return aside_.empty() ? -1 : afterAside(f);
  }
  // The flow that follows `f` (whose after is f), or -1.
  int follower(size_t f) const {
    if (f + 1 < size() && followsPrevious(f + 1)) return static_cast<int>(f) + 1;
    return aside_.empty() ? -1 : followerAside(f);
  }
  const Shape& shape(int s) const { return shapes_[static_cast<size_t>(s)]; }
  std::span<const LinkUse> uses(int s) const {
    const Shape& sh = shape(s);
    return {uses_.data() + sh.first_use, sh.use_count};
  }
  // Flow `f` in full.
  SharedFlow flow(size_t f) const;
  // Room for `flows` flows; an empty list reserved for kTickedFromFlows or more keeps its times
  // on the tick from then on (its shapes' times alone included).
  void reserve(size_t flows);

 private:
  static bool fitsTicks(double ticks) { return ticks >= 0 && ticks < 0x1p32; }  // false for NaN
  static double ticksUs(uint32_t ticks) { return static_cast<double>(ticks) * kStartTickUs; }
  inline void addStart(double start_us);  // flow_list.cpp
  int afterAside(size_t f) const;
  int followerAside(size_t f) const;

  std::vector<Shape> shapes_;
  std::vector<LinkUse> uses_;
  // Each flow's start: exact, or on the tick (`on_tick_`), then in ticks (`ticks_`, 4 bytes)
  // until one does not fit, from when all are in `start_us_` (and `start_ticks_` is freed).
  bool on_tick_ = false, ticks_ = false;
  std::vector<double> start_us_;
  std::vector<uint32_t> start_ticks_;
  // Each flow's shape: in 16 bits until a shape index needs more (`wide_`), then all in
  // `wide_shape_` (and `shape_` emptied).
  bool wide_ = false;
  std::vector<uint16_t> shape_;
  std::vector<int> wide_shape_;
  // Per flow a bit: whether it follows the one listed before it, 64 a word (read for every flow
  // by link sharing: plain shifts, not std::vector<bool>'s signed bit iterators; issue 34).
  std::vector<uint64_t> follows_previous_;
  bool followsPrevious(size_t f) const { return (follows_previous_[f / 64] >> (f % 64)) & 1; }
  // Followers of a flow other than the one listed before them: (follower, after), in list order,
  // and the same pairs by `after`.
  std::vector<std::pair<int, int>> aside_, aside_by_after_;
};

// A resource's load over one stretch of time (constant in between).
struct LoadSegment {
  double start_us = 0;
  double end_us = 0;
  double bytes_per_us = 0;  // all copies of all flows on it
};

// Each flow's end after sharing. Most flows end at their standalone end (start + time alone:
// alone on their links, or released on time), so only the ends sharing moved are kept (issue 34:
// of ~10^6 flows of one simulation a few thousand move). It reads the standalone ends from the
// flow list it was computed for, which must outlive it (the list-of-flows shareLinks keeps its own).
class FlowEnds {
 public:
  FlowEnds() = default;
  explicit FlowEnds(const FlowList& list) : list_(&list) {}
  double operator[](size_t f) const;
  size_t size() const { return list_ == nullptr ? 0 : list_->size(); }
  double standaloneUs(size_t f) const {
    return list_->startUs(f) + list_->shape(list_->shapeOf(f)).duration_us;
  }
  // Flow `f` ends at `end_us` (kept where it is not its standalone end); then, once all are set,
  // done().
  void set(int f, double end_us) {
    if (end_us != standaloneUs(static_cast<size_t>(f))) moved_.emplace_back(f, end_us);
  }
  void done();
  // What sharing added to flow `f`: its end less its start less its time alone (in that order;
  // below 0 by rounding, and not exactly 0 where sharing left the end alone: the rounding of
  // (start + alone) - start - alone).
  double extraUs(size_t f) const {
    return (*this)[f] - list_->startUs(f) - list_->shape(list_->shapeOf(f)).duration_us;
  }
  // extraUs of every flow where it is above 0, in list order, as visit(f, extra, extra_before)
  // with extra_before flow f - 1's (a follower's inheritance; 0 for flow 0); visit returns
  // whether to go on. A flow whose end sharing did not move is read from its start and shape (no
  // search of the moved ends: ~10^6 flows of one simulation, a few thousand moved; issue 34).
  template <typename Visit>
  void forEachExtra(Visit visit) const {
    size_t m = 0;
    double before = 0;
    for (size_t f = 0; f < size(); ++f) {
      const double start = list_->startUs(f);
      const double alone = list_->shape(list_->shapeOf(f)).duration_us;
      const bool moved = m < moved_.size() && static_cast<size_t>(moved_[m].first) == f;
      const double extra = (moved ? moved_[m++].second : start + alone) - start - alone;
      if (extra > 0 && !visit(f, extra, before)) return;
      before = extra;
    }
  }
  // How many ends sharing moved (the ones kept).
  size_t moved() const { return moved_.size(); }
  // The list read, kept alive with the ends (a list built for one call).
  void keep(std::shared_ptr<const FlowList> list) {
    owned_ = std::move(list);
    list_ = owned_.get();
  }

 private:
  const FlowList* list_ = nullptr;
  std::shared_ptr<const FlowList> owned_;
  std::vector<std::pair<int, double>> moved_;  // by flow, once done()
};

struct SharingResult {
  FlowEnds end_us;                             // per flow
  std::vector<std::vector<LoadSegment>> load;  // per resource, in time order (when recorded)
  std::vector<double> capacity_bytes_per_us;   // per resource, raised where one flow needs more
  // Followers taken with their chain at once (shareLinks' whole_chains), not flow by flow: how
  // often the fast way was taken (tests check that it still is).
  size_t whole_chain_flows = 0;
};

// Ends of `flows` sharing resources of `capacity_bytes_per_us` (one per resource). A flow with no
// use, no bytes or no duration ends at start + duration (and a flow after it starts at its own
// start_us). `record_load` fills `load`. `whole_chains` lets the followers of a chain that
// nothing else touches while they start be taken at once (sharing_pass.cpp, runAlong); off, flow
// by flow, which must give the same ends to the bit (tests compare the two). It is ignored when
// `record_load` is on (a chain taken at once records no load): then always flow by flow.
SharingResult shareLinks(const FlowList& flows, std::span<const double> capacity_bytes_per_us,
                         bool record_load = false, bool whole_chains = true);
// The same for flows given one by one (each its own shape).
SharingResult shareLinks(std::span<const SharedFlow> flows,
                         std::span<const double> capacity_bytes_per_us, bool record_load = false);

}  // namespace evsim
