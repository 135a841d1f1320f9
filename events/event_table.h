#pragma once
// The unique events of an iteration with how often each runs. Ops refer to events by index.
//
// Events are deduplicated by a compact key (kind, op, dim values, layout, dtype, bytes, placement)
// hashed without formatting: two events have the same key exactly when they have the same
// signature. The signature string is formatted once per unique event, for output and profile
// look-ups, never for the many repeated interns of plan building.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/checked.h"
#include "events/event.h"

namespace evsim {

struct UniqueEvent {
  Event event;
  std::string signature;
  int64_t count = 0;  // executions per iteration, summed over all devices
};

class EventTable {
 public:
  // Index of `event`, adding it (with count 0) the first time its key is seen.
  int intern(const Event& event);
  // Checked (common/checked.h): counts multiply micro-batches, devices and repeated layers.
  void addCount(int index, int64_t executions) {
    events_[index].count = checkedAdd(events_[index].count, executions, "op executions");
  }

  const std::vector<UniqueEvent>& events() const { return events_; }
  const UniqueEvent& operator[](int index) const { return events_[index]; }
  int size() const { return static_cast<int>(events_.size()); }

 private:
  std::vector<UniqueEvent> events_;
  std::unordered_multimap<uint64_t, int> index_;  // key hash -> indices (collisions compared)
};

// The key's hash, and whether two events have the same key (= the same signature).
uint64_t eventKeyHash(const Event& event);
bool sameEventKey(const Event& a, const Event& b);

}  // namespace evsim
