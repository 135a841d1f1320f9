// Cost lookup in three tiers: measured (the profile database), derived (measured records scaled by
// the ring volume factor and/or interpolated log-log in message size), estimated (analytic, only
// with the fallback on). See cost_model.h for the contract.
#include "modeler/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/error.h"
#include "common/units.h"

namespace evsim {

namespace {

// Most signatures a missing-cost error lists before it only counts the rest: the message must stay
// one readable line even when a whole model is missing from the profile.
constexpr size_t kMaxListedMissing = 10;

bool sameShapeForScaling(const Placement& a, const Placement& b) {
  // Ring scaling keeps what decides the per-rank link: intra-node groups all use the GPU's own link
  // (ranks_per_node == group_size there, so it cannot be compared); inter-node groups must keep the
  // ranks per node, which decides both the intra/inter traffic split and the NIC share per rank.
  if (a.interNode() != b.interNode()) return false;
  return !a.interNode() || a.ranks_per_node == b.ranks_per_node;
}

bool sameCollective(const Event& a, const Event& b) {
  return a.kind == b.kind && a.dtype == b.dtype;
}

// Time at `bytes` from records of one collective at one placement: the exact size, or log-log
// interpolation between the nearest measured sizes below and above. Never extrapolates: outside
// the measured range there is no data to trust (protocol and algorithm switches happen there).
std::optional<double> timeAtBytes(const std::vector<const ProfileRecord*>& records, int64_t bytes) {
  const ProfileRecord* below = nullptr;
  const ProfileRecord* above = nullptr;
  for (const ProfileRecord* r : records) {
    int64_t b = r->event.message_bytes;
    if (b == bytes) return r->time.median_us;
    if (b < bytes && (below == nullptr || b > below->event.message_bytes)) below = r;
    if (b > bytes && (above == nullptr || b < above->event.message_bytes)) above = r;
  }
  if (below == nullptr || above == nullptr) return std::nullopt;
  double x0 = std::log(double(below->event.message_bytes));
  double x1 = std::log(double(above->event.message_bytes));
  double y0 = std::log(below->time.median_us);
  double y1 = std::log(above->time.median_us);
  double fraction = (std::log(double(bytes)) - x0) / (x1 - x0);
  return std::exp(y0 + fraction * (y1 - y0));
}

// Names the database in error messages. ProfileDb does not keep the path it was loaded from, so
// the metadata is the best identification available here.
std::string describeProfile(const ProfileDb* db) {
  if (db == nullptr) return "none";
  return fmt::format("({} backend, {}, {} records)",
                     db->metadata.backend.empty() ? "unknown" : db->metadata.backend,
                     db->metadata.date.empty() ? "undated" : db->metadata.date,
                     db->records().size());
}

// Link a collective runs over and its bandwidth per rank. Intra-node: the GPU's own link.
// Inter-node: the node's network is shared by every group that communicates at once — one per
// rank of the group on that node out of gpus_per_node — so each rank gets
// network * ranks_per_node / gpus_per_node (a DP group with one rank per node on 8-GPU nodes gets
// 1/8), never more than its intra-node link. The share is capped at 1 for placements from a
// profile whose nodes hold more ranks than this cluster's.
struct LinkShare {
  double bandwidth_gb_s = 0;
  double latency_us = 0;
};

LinkShare linkFor(const ClusterConfig& cluster, const Placement& placement) {
  if (!placement.interNode()) {
    return {cluster.intra_link.bandwidth_gb_s, cluster.intra_link.latency_us};
  }
  double share = std::min(1.0, double(placement.ranks_per_node) / cluster.gpus_per_node);
  return {std::min(cluster.intra_link.bandwidth_gb_s, cluster.network.bandwidth_gb_s * share),
          cluster.network.latency_us};
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
    : cluster_(cluster), db_(db), analytic_fallback_(analytic_fallback) {
  if (db_ == nullptr && !analytic_fallback_) {
    EVSIM_THROW(InputError,
                "no source of event costs: give a profile database or enable the analytic "
                "fallback");
  }
}

std::optional<EventCost> CostModel::cost(const Event& event) const {
  if (db_ != nullptr) {
    if (const ProfileRecord* r = db_->find(event.signature())) {
      // A record the profiler scaled from a smaller group holds a computed time, not a measured
      // one: it is reported as derived so that provenance counts what was really measured.
      return EventCost{r->time.median_us, r->scaled ? Provenance::kDerived : Provenance::kMeasured};
    }
    if (std::optional<EventCost> derived = derive(event)) return derived;
  }
  if (analytic_fallback_) return EventCost{estimateUs(event), Provenance::kEstimated};
  return std::nullopt;
}

// Only communication is derived: a compute event of another shape may run a different kernel
// (tile sizes, split-K, tensor-core eligibility), so neighbouring shapes say little about it.
std::optional<EventCost> CostModel::derive(const Event& event) const {
  if (db_ == nullptr || !isCommunication(event.kind)) return std::nullopt;
  const Placement& target = event.placement;

  // Message size between two measured sizes at the same placement (p2p included).
  std::vector<const ProfileRecord*> same_placement;
  for (const ProfileRecord& r : db_->records()) {
    if (sameCollective(r.event, event) && r.event.placement == target) same_placement.push_back(&r);
  }
  if (!same_placement.empty()) {
    std::optional<double> t = timeAtBytes(same_placement, event.message_bytes);
    if (!t) return std::nullopt;
    return EventCost{*t, Provenance::kDerived};
  }
  if (event.kind == EventKind::kP2P) return std::nullopt;

  // A group larger than every measured group of the same shape: scale from the largest one (after
  // interpolating in size there if needed). Only the largest is used, as cost_model.h specifies,
  // so every derived size of a group comes from one base series. A target that is not larger than
  // every measured group is a gap in the profile, left for eventprof (or the fallback) to fill.
  // Records the profiler itself scaled count as bases too: ring scaling composes, so scaling a
  // scaled record equals scaling its measurement directly.
  int largest = 0;
  for (const ProfileRecord& r : db_->records()) {
    if (sameCollective(r.event, event) && sameShapeForScaling(r.event.placement, target)) {
      largest = std::max(largest, r.event.placement.group_size);
    }
  }
  if (largest < 2 || largest >= target.group_size) return std::nullopt;
  // Inter-node groups of one size and ranks per node may still sit on different node counts
  // (uneven placements); each is a separate series, tried fewest nodes first for determinism.
  std::map<int, std::vector<const ProfileRecord*>> by_nodes;
  for (const ProfileRecord& r : db_->records()) {
    if (sameCollective(r.event, event) && sameShapeForScaling(r.event.placement, target) &&
        r.event.placement.group_size == largest) {
      by_nodes[r.event.placement.nodes].push_back(&r);
    }
  }
  for (const auto& [nodes, series] : by_nodes) {
    if (std::optional<double> t = timeAtBytes(series, event.message_bytes)) {
      return EventCost{*t * ringScaleFactor(event.kind, largest, target.group_size),
                       Provenance::kDerived};
    }
  }
  return std::nullopt;
}

// Analytic estimate, in microseconds:
//   compute: roofline, max(flops / peak[dtype], memory_bytes / memory bandwidth);
//   communication: alpha-beta with the nccl-tests volume factors over the link of linkFor():
//     all-reduce over n          2(n-1) * alpha + 2(n-1)/n * bytes / bw
//     reduce-scatter, all-gather  (n-1) * alpha +  (n-1)/n * bytes / bw   (bytes: full buffer)
//     p2p                              alpha +            bytes / bw
double CostModel::estimateUs(const Event& event) const {
  if (event.kind == EventKind::kCompute) {
    double flops_per_us = cluster_.device.peakTflops(event.dtype) * kFlopsPerTflop / kUsPerSecond;
    double compute_us = event.flops / flops_per_us;
    double memory_us =
        double(event.memory_bytes) / bytesPerUs(cluster_.device.memory_bandwidth_gb_s);
    return std::max(compute_us, memory_us);
  }
  LinkShare link = linkFor(cluster_, event.placement);
  int n = event.placement.group_size;
  double transfer_us = busBandwidthFactor(event.kind, n) * double(event.message_bytes) /
                       bytesPerUs(link.bandwidth_gb_s);
  double steps = 1;  // latency-bound steps of the ring
  switch (event.kind) {
    case EventKind::kAllReduce:
      steps = 2.0 * (n - 1);
      break;
    case EventKind::kReduceScatter:
    case EventKind::kAllGather:
      steps = n - 1;
      break;
    case EventKind::kP2P:
    case EventKind::kCompute:
      steps = 1;
      break;
  }
  return steps * link.latency_us + transfer_us;
}

std::vector<EventCost> CostModel::costAll(const EventTable& table,
                                          std::string_view eventprof_hint) const {
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
  // The hint is a command line; keep the message on one line whatever the caller passed.
  std::string hint(eventprof_hint.empty() ? std::string_view("eventprof") : eventprof_hint);
  std::replace(hint.begin(), hint.end(), '\n', ' ');
  EVSIM_THROW(InputError, "{} event{} no cost in profile {}: {} — measure them with: {}",
              missing.size(), missing.size() == 1 ? " has" : "s have", describeProfile(db_), list,
              hint);
}

}  // namespace evsim
