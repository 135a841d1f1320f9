#pragma once
// The last source of the chain: the device model's estimate, for any event.

#include "modeler/cost_source.h"
#include "modeler/device_model.h"

namespace evsim {

class EstimatedSource : public CostSource {
 public:
  explicit EstimatedSource(const DeviceModel& device) : device_(device) {}
  std::optional<EventCost> cost(const Event& event) const override {
    return EventCost{device_.estimateUs(event), Provenance::kEstimated};
  }

 private:
  const DeviceModel& device_;
};

}  // namespace evsim
