// The chain of cost sources; see cost_model.h for the contract.
#include "modeler/cost_model.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "modeler/estimated_source.h"
#include "modeler/profile_sources.h"

namespace evsim {

namespace {

// Most signatures a missing-cost error lists before it only counts the rest: the message must stay
// one readable line even when a whole model is missing from the profile.
constexpr size_t kMaxListedMissing = 10;

// Names the database in error messages. ProfileDb does not keep the path it was loaded from, so
// the metadata is the best identification available here.
std::string describeProfile(const ProfileDb* db) {
  if (db == nullptr) return "none";
  return fmt::format("({} backend, {}, {} records)",
                     db->metadata.backend.empty() ? "unknown" : db->metadata.backend,
                     db->metadata.date.empty() ? "undated" : db->metadata.date,
                     db->size());
}

}  // namespace

std::string_view provenanceName(Provenance p) {
  switch (p) {
    case Provenance::kMeasured:
      return "measured";
    case Provenance::kDerived:
      return "derived";
    case Provenance::kEstimated:
      return "estimated";
  }
  return "?";
}

CostModel::CostModel(const ClusterConfig& cluster, const ProfileDb* db, bool analytic_fallback)
    : device_(cluster), db_(db) {
  if (db_ == nullptr && !analytic_fallback) {
    EVSIM_THROW(InputError,
                "no source of event costs: give a profile database or enable the analytic "
                "fallback");
  }
  if (db_ != nullptr) {
    sources_.push_back(std::make_unique<MeasuredSource>(*db_));
    sources_.push_back(std::make_unique<DerivedSource>(*db_, cluster));
  }
  if (analytic_fallback) sources_.push_back(std::make_unique<EstimatedSource>(device_));
}

CostModel::CostModel(const ClusterConfig& cluster, std::vector<std::unique_ptr<CostSource>> sources)
    : device_(cluster), sources_(std::move(sources)) {
  EVSIM_CHECK(!sources_.empty(), "a cost model needs at least one source");
}

std::optional<EventCost> CostModel::cost(const Event& event) const {
  for (const std::unique_ptr<CostSource>& source : sources_) {
    if (std::optional<EventCost> c = source->cost(event)) {
      // Values inside their bounds can still divide to infinity (a bandwidth of 1e-300 GB/s).
      if (!std::isfinite(c->time_us)) {
        EVSIM_THROW(InputError,
                    "event '{}': its time is not finite (a bandwidth, peak or efficiency near 0 in "
                    "the device, cluster or profile?)",
                    event.signature());
      }
      c->host_us = device_.hostUs(event);
      c->host_call_us = device_.hostCallUs();
      return c;
    }
  }
  return std::nullopt;
}

std::vector<EventCost> CostModel::costAll(const EventTable& table) const {
  std::vector<EventCost> costs;
  costs.reserve(table.size());
  std::vector<std::string> missing;
  for (const UniqueEvent& u : table.events()) {
    std::optional<EventCost> c = cost(u.event);
    if (!c) {
      missing.push_back(u.signature.empty() ? u.event.signature() : u.signature);
      costs.push_back(EventCost{});
      continue;
    }
    costs.push_back(*c);
  }
  if (missing.empty()) return costs;

  std::string list;
  for (size_t i = 0; i < missing.size() && i < kMaxListedMissing; ++i) {
    if (i > 0) list += "; ";
    list += missing[i];
  }
  if (missing.size() > kMaxListedMissing) {
    list += fmt::format("; and {} more", missing.size() - kMaxListedMissing);
  }
  EVSIM_THROW(MissingCostsError, "{} event{} no cost in profile {}: {}", missing.size(),
              missing.size() == 1 ? " has" : "s have", describeProfile(db_), list);
}

}  // namespace evsim
