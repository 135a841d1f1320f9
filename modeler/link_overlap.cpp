// Whether a timeline's transfers may share a link; link_overlap.h.
#include "modeler/link_overlap.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "modeler/link_map.h"
#include "modeler/timeline_flow_walk.h"

namespace evsim {

namespace {

// Whether two sends into one device overlap in time (on its NVLink or on its NICs). The arrivals
// from one sender are in time order and never overlap each other (a send holds its device), so
// an overlap is between two senders' arrivals, found by merging them (no sort: this runs on every
// timing that may share). Each sender's arrivals are read from its task list in place: copying
// them out per receiver was most of this check's cost (issue 34 item 3).
bool arrivalsOverlap(const IterationPlan& plan, const IterationTimeline& timeline) {
  const PipelineLayout layout = plan.pipelineLayout();
  const int P = plan.deviceStages();
  const size_t links = plan.virtualStages() - 1;
  constexpr size_t kNoKey = SIZE_MAX;
  const TaskGraph& graph = timeline.graph;
  // Per link and direction (2 link + (gradient)): its receiver key.
  std::vector<size_t> key_of(2 * links, kNoKey);
  // Per (receiver, inter-node) key: the devices sending into it, in device order.
  std::vector<std::vector<int>> senders(2 * static_cast<size_t>(P));
  // Per send code of a device: whether its sends go into the key merged (the graph's codes,
  // TaskGraph::send_codes: one byte read a task instead of its node, issue 34 item 3).
  using Into = std::array<uint8_t, 256>;
  Into into_a{}, into_b{};
  for (size_t k = 0; k < timeline.pipelines.size(); ++k) {
    const PipelineClass& pipeline = plan.pipelines[k];
    for (auto& list : senders) list.clear();
    // Each link's key once per class, not once per send; none: no event.
    for (size_t l = 0; l < links; ++l) {
      for (const Send send : {Send::kActivation, Send::kGradient}) {
        const bool forward = send == Send::kActivation;
        const int e = forward ? pipeline.forward_p2p[l] : pipeline.backward_p2p[l];
        const int link = static_cast<int>(l);
        const int to = layout.device(linkReceiver(send, link));
        const size_t key =
            e < 0 ? kNoKey
                  : 2 * static_cast<size_t>(to) + plan.events[e].event.placement.interNode();
        key_of[2 * l + !forward] = key;
        if (key != kNoKey) senders[key].push_back(layout.device(forward ? link : link + 1));
      }
    }
    const std::vector<StageTimeline>& stages = timeline.pipelines[k].stages;
    // Device d's codes whose sends go into `key`, marked in `into`.
    auto markInto = [&](Into& into, int d, size_t key) {
      into.fill(0);
      for (int c = 1; sendCodeChunk(c) < plan.chunksPerDevice(); ++c) {
        const int w = flow_walk::sendSlot(layout, d, c);
        if (w >= 0) into[c] = key_of[static_cast<size_t>(w)] == key;
      }
    };
    // A device's next arrival into the key marked in `into` at or after `c` (its end when none):
    // its timing and its send code, moved together.
    struct Cursor {
      const TaskTiming* t;
      const uint8_t* code;
    };
    auto nextInto = [](const Into& into, Cursor c, const TaskTiming* end) {
      for (; c.t != end; ++c.t, ++c.code) {
        if (into[*c.code] && !(c.t->send_end_us <= c.t->run.end_us)) break;
      }
      return c;
    };
    for (size_t key = 0; key < senders.size(); ++key) {
      std::vector<int>& from = senders[key];
      std::sort(from.begin(), from.end());
      from.erase(std::unique(from.begin(), from.end()), from.end());
      for (size_t i = 0; i < from.size(); ++i) {
        for (size_t j = i + 1; j < from.size(); ++j) {
          const std::vector<TaskTiming>& ta = stages[from[i]].tasks;
          const std::vector<TaskTiming>& tb = stages[from[j]].tasks;
          const TaskTiming* const a_end = ta.data() + ta.size();
          const TaskTiming* const b_end = tb.data() + tb.size();
          markInto(into_a, from[i], key);
          markInto(into_b, from[j], key);
          Cursor a = nextInto(into_a, {ta.data(), graph.deviceSendCodes(from[i]).data()}, a_end);
          Cursor b = nextInto(into_b, {tb.data(), graph.deviceSendCodes(from[j]).data()}, b_end);
          // Two time-sorted lists of non-overlapping intervals overlap where a merge finds it.
          while (a.t != a_end && b.t != b_end) {
            if (a.t->run.end_us < b.t->send_end_us && b.t->run.end_us < a.t->send_end_us) {
              return true;
            }
            if (a.t->send_end_us <= b.t->send_end_us) {
              a = nextInto(into_a, {a.t + 1, a.code + 1}, a_end);
            } else {
              b = nextInto(into_b, {b.t + 1, b.code + 1}, b_end);
            }
          }
        }
      }
    }
  }
  return false;
}

}  // namespace

// Whether two of the timeline's transfers share a resource at once, or may: DP buckets in flight
// beside the pipeline, or two representative devices on one node (both: the flows decide); else
// only sends arriving at one device from two neighbours at once. Sends of one device never
// overlap each other (a send holds its device), and the DP collectives and the ZeRO gather
// without overlap start after every transfer of the device.
bool mayShare(const IterationPlan& plan, const TimingInput& input,
              const IterationTimeline& timeline) {
  if (input.dp_overlap || input.grad_reduce_at_step) {
    for (const StageCost& s : input.stages) {
      if (!s.buckets.empty() || !s.micro_batch_buckets.empty()) return true;
    }
  }
  std::vector<int> nodes;
  for (const std::vector<int>& pipeline : deviceNodes(plan)) {
    nodes.insert(nodes.end(), pipeline.begin(), pipeline.end());
  }
  std::sort(nodes.begin(), nodes.end());
  if (std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end()) return true;
  return plan.virtualStages() > 2 && arrivalsOverlap(plan, timeline);
}

}  // namespace evsim
