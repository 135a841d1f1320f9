#pragma once
// The cost of each event, with where it came from: a chain of cost sources (cost_source.h) asked
// in order, the first answer winning —
//   measured  — the profile database (MeasuredSource, profile_sources.h);
//   derived   — scaled or interpolated from measured records (DerivedSource);
//   estimated — the cluster's device model (device_model.h), only with the fallback on.
// Every answer also carries the op's host issue time from the device model (0 without one): the
// framework's launch floor applies to measured kernels too.
// Without the fallback, a missing event is an InputError listing every missing signature and the
// eventprof command that would measure them.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "config/cluster_config.h"
#include "events/event.h"
#include "events/event_table.h"
#include "io/profile_db.h"
#include "modeler/cost_source.h"
#include "modeler/device_model.h"

namespace evsim {

// Events no cost source covers: one message listing every missing signature. Commands that know
// which eventprof run would measure them say so (withEventprofHint, modeler/cli/).
class MissingCostsError : public InputError {
 public:
  using InputError::InputError;
};

// Runs `work`; a MissingCostsError from it becomes one InputError that ends with `hint`, the
// command that would measure the missing events (kept on one line).
template <typename Work>
auto withEventprofHint(const std::string& hint, Work work) -> decltype(work()) {
  try {
    return work();
  } catch (const MissingCostsError& e) {
    std::string one_line = hint;
    std::replace(one_line.begin(), one_line.end(), '\n', ' ');
    EVSIM_THROW(InputError, "{} — measure them with: {}", e.what(), one_line);
  }
}

class CostModel {
 public:
  // `db` may be null (device model only); `analytic_fallback` enables estimates. At least one
  // source. `cluster` and `db` must outlive the model.
  CostModel(const ClusterConfig& cluster, const ProfileDb* db, bool analytic_fallback);
  // A chain of any sources, asked in order, over `cluster`'s device model for host costs.
  CostModel(const ClusterConfig& cluster, std::vector<std::unique_ptr<CostSource>> sources);
  // The model keeps a reference to the cluster: a temporary would dangle.
  CostModel(ClusterConfig&&, const ProfileDb*, bool) = delete;
  // EstimatedSource refers to device_: the model stays where it was built.
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // The cost of one event, or nullopt when no source covers it.
  std::optional<EventCost> cost(const Event& event) const;

  // Costs of every event of `table`, by index. Throws MissingCostsError listing all missing
  // signatures.
  std::vector<EventCost> costAll(const EventTable& table) const;

  // The device model's estimate alone (what EstimatedSource answers), for tests and reports.
  double estimateUs(const Event& event) const { return device_.estimateUs(event); }
  const DeviceModel& device() const { return device_; }

 private:
  DeviceModel device_;
  const ProfileDb* db_ = nullptr;  // for error messages
  std::vector<std::unique_ptr<CostSource>> sources_;
};

}  // namespace evsim
