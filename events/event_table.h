#pragma once
// The unique events of an iteration with how often each runs. Ops refer to events by index.
//
// Events are deduplicated by a compact key (kind, op, dim values, layout, dtype, bytes, placement)
// hashed without formatting: two events have the same key exactly when they have the same
// signature. The signature string is formatted once per unique event, for output and profile
// look-ups, never for the many repeated interns of plan building.

#include <cstdint>
#include <string>
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
  EventTable() = default;
  // A copy holds the events only: the spare storage a cleared table keeps (clear()) is for that
  // table's own next build, and copying it would copy strings no one reads.
  EventTable(const EventTable& other)
      : events_(other.events_), hashes_(other.hashes_), slots_(other.slots_) {}
  EventTable& operator=(const EventTable& other) {
    if (this != &other) {
      events_ = other.events_;
      hashes_ = other.hashes_;
      slots_ = other.slots_;
    }
    return *this;
  }
  EventTable(EventTable&&) noexcept = default;
  EventTable& operator=(EventTable&&) noexcept = default;

  // Index of `event`, adding it (with count 0) the first time its key is seen.
  int intern(const Event& event);
  // Adds `unique` (its count included) at the end without looking for it: the caller knows its
  // key is not in the table yet, and that `hash` is its eventKeyHash (finishing a cached plan core
  // copies events whose hashes and signatures were computed once). Returns its index.
  int appendNew(const UniqueEvent& unique, uint64_t hash);
  int appendNew(UniqueEvent&& unique, uint64_t hash);
  // Puts the events in the order `order` gives (new index -> old index, each old index once):
  // moved, and their index entries renumbered in place, so nothing is copied or allocated anew
  // but the two arrays.
  void reorder(const std::vector<int>& order);
  // Room for `events` events without growing (a plan finished from its core knows how many).
  void reserve(size_t events);
  // Empties the table but keeps its storage: the next events added copy into the strings and
  // dims of the ones it held. A search rebuilds a plan and a plan core for nearly every
  // simulation (plan_core.h: rebuildIterationPlan); each event copied anew was ~3 allocations,
  // most under the search heap's lock (bench/RESULTS.md, session 29, alloc29).
  void clear();
  // Index of the event with `event`'s key, whose eventKeyHash is `hash`, or -1.
  int find(const Event& event, uint64_t hash) const;
  // eventKeyHash of the event at `index`, as computed when it was added.
  uint64_t hashAt(int index) const { return hashes_[index]; }
  // Checked (common/checked.h): counts multiply micro-batches, devices and repeated layers.
  void addCount(int index, int64_t executions) {
    events_[index].count = checkedAdd(events_[index].count, executions, "op executions");
  }

  const std::vector<UniqueEvent>& events() const { return events_; }
  const UniqueEvent& operator[](int index) const { return events_[index]; }
  int size() const { return static_cast<int>(events_.size()); }

 private:
  // Where an event with `hash` goes in slots_ (the first free slot from its home).
  size_t freeSlot(uint64_t hash) const;
  // slots_ for `events` events (at most half full), every event placed again.
  void rehash(size_t events);
  // Appends spare_'s last event, just filled with a new event whose eventKeyHash is `hash`.
  int appendSpare(uint64_t hash);

  std::vector<UniqueEvent> events_;
  std::vector<uint64_t> hashes_;  // eventKeyHash of each of events_
  // Open addressing by key hash, linear probing: an event's index + 1, 0 for a free slot; a power
  // of two in size (or empty), at most half full. (A hash map node per event was an allocation.)
  std::vector<int> slots_;
  // A cleared table's events, moved here: appends copy into them (clear()).
  std::vector<UniqueEvent> spare_;
};

// The key's hash, and whether two events have the same key (= the same signature).
uint64_t eventKeyHash(const Event& event);
bool sameEventKey(const Event& a, const Event& b);

}  // namespace evsim
