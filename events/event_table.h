#pragma once
// The unique events of an iteration with how often each runs. Ops refer to events by index.

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "events/event.h"

namespace evsim {

struct UniqueEvent {
  Event event;
  std::string signature;
  int64_t count = 0;  // executions per iteration, summed over all devices
};

class EventTable {
 public:
  // Index of `event`, adding it (with count 0) the first time its signature is seen.
  int intern(const Event& event);
  void addCount(int index, int64_t executions) { events_[index].count += executions; }

  const std::vector<UniqueEvent>& events() const { return events_; }
  const UniqueEvent& operator[](int index) const { return events_[index]; }
  int size() const { return static_cast<int>(events_.size()); }

 private:
  std::vector<UniqueEvent> events_;
  std::unordered_map<std::string, int> index_;
};

}  // namespace evsim
