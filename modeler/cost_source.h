#pragma once
// One source of event costs. The cost model (cost_model.h) asks a chain of them in order —
// measured profile, then derived from it, then the device model — and takes the first answer, so
// a new source (a vendor's kernel table, a learned model) plugs in as one class without touching
// the others. Every answer says where its figure came from.

#include <optional>
#include <string_view>

#include "events/event.h"

namespace evsim {

enum class Provenance { kMeasured, kDerived, kEstimated };
inline constexpr int kProvenanceCount = 3;
std::string_view provenanceName(Provenance p);  // "measured", "derived", "estimated"

struct EventCost {
  double time_us = 0;  // one execution on the device (compute) or its group (communication)
  Provenance provenance = Provenance::kMeasured;
  // Framework (host) time to issue the op inside a task; a kernel cannot start before it is
  // issued (simulation.cpp). 0 where the device model has no host cost.
  double host_us = 0;
  // Host time of one torch call issued from inside a framework call (an op with
  // OpInstance::host_calls, Transformer Engine's ring loop), from the same device model: such an
  // op costs host_calls x this instead of host_us (op_offsets.h). 0 without a device model.
  double host_call_us = 0;
};

class CostSource {
 public:
  virtual ~CostSource() = default;
  // The cost of one execution of `event`, or nullopt when this source does not cover it.
  virtual std::optional<EventCost> cost(const Event& event) const = 0;
};

}  // namespace evsim
