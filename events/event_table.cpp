#include "events/event_table.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include "common/error.h"

namespace evsim {

namespace {

// 64-bit FNV-1a style mixing; quality only matters for bucket spread, collisions are compared.
inline void mix(uint64_t& h, uint64_t value) {
  h ^= value + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
}

inline void mixText(uint64_t& h, std::string_view text) {
  mix(h, std::hash<std::string_view>{}(text));
}

}  // namespace

uint64_t eventKeyHash(const Event& e) {
  uint64_t h = static_cast<uint64_t>(e.kind);
  mixText(h, e.op);
  mix(h, static_cast<uint64_t>(e.dtype));
  if (e.kind == EventKind::kCompute) {
    for (const Dim& d : e.dims) mix(h, static_cast<uint64_t>(d.value));
    mixText(h, e.layout);
  } else {
    mix(h, static_cast<uint64_t>(e.message_bytes));
    mix(h, static_cast<uint64_t>(e.placement.group_size));
    mix(h, static_cast<uint64_t>(e.placement.nodes));
    mix(h, static_cast<uint64_t>(e.placement.ranks_per_node));
  }
  return h;
}

bool sameEventKey(const Event& a, const Event& b) {
  // Exactly the fields Event::signature() prints.
  if (a.op != b.op || a.dtype != b.dtype) return false;
  if (a.kind == EventKind::kCompute) return a.dims == b.dims && a.layout == b.layout;
  return a.message_bytes == b.message_bytes && a.placement == b.placement;
}

int EventTable::find(const Event& event, uint64_t hash) const {
  if (slots_.empty()) return -1;
  const size_t mask = slots_.size() - 1;
  for (size_t at = static_cast<size_t>(hash) & mask; slots_[at] != 0; at = (at + 1) & mask) {
    const int index = slots_[at] - 1;
    if (hashes_[index] == hash && sameEventKey(events_[index].event, event)) return index;
  }
  return -1;
}

size_t EventTable::freeSlot(uint64_t hash) const {
  const size_t mask = slots_.size() - 1;
  size_t at = static_cast<size_t>(hash) & mask;
  while (slots_[at] != 0) at = (at + 1) & mask;
  return at;
}

void EventTable::rehash(size_t events) {
  size_t size = 16;
  while (size < 2 * events) size *= 2;
  if (size <= slots_.size()) return;
  slots_.assign(size, 0);
  for (size_t i = 0; i < hashes_.size(); ++i) slots_[freeSlot(hashes_[i])] = static_cast<int>(i) + 1;
}

int EventTable::intern(const Event& event) {
  const uint64_t h = eventKeyHash(event);
  const int found = find(event, h);
  if (found >= 0) return found;
  if (spare_.empty()) {
    // Moved in: the event's dims and signature are copied once, not twice.
    return appendNew(UniqueEvent{event, event.signature(), 0}, h);
  }
  UniqueEvent& reused = spare_.back();
  reused.event = event;  // into its strings' and dims' storage
  reused.signature = event.signature();
  reused.count = 0;
  return appendSpare(h);
}

int EventTable::appendNew(const UniqueEvent& unique, uint64_t hash) {
  if (spare_.empty()) return appendNew(UniqueEvent(unique), hash);
  spare_.back() = unique;  // into its strings' and dims' storage
  return appendSpare(hash);
}

int EventTable::appendSpare(uint64_t hash) {
  const int index = appendNew(std::move(spare_.back()), hash);
  spare_.pop_back();
  return index;
}

int EventTable::appendNew(UniqueEvent&& unique, uint64_t hash) {
  const int index = static_cast<int>(events_.size());
  events_.push_back(std::move(unique));
  hashes_.push_back(hash);
  if (2 * events_.size() > slots_.size()) {
    rehash(events_.size());  // places the new event too
  } else {
    slots_[freeSlot(hash)] = index + 1;
  }
  return index;
}

void EventTable::clear() {
  // The events' buffers move to spare_ (whose husks of a clear before have none left).
  spare_.clear();
  spare_.reserve(events_.size());
  for (UniqueEvent& e : events_) spare_.push_back(std::move(e));
  events_.clear();
  hashes_.clear();
  std::fill(slots_.begin(), slots_.end(), 0);
}

void EventTable::reorder(const std::vector<int>& order) {
  EVSIM_CHECK(order.size() == events_.size(), "{} events reordered as {}", events_.size(),
              order.size());
  std::vector<int> position(events_.size(), -1);  // old index -> new (checked before any move)
  for (size_t i = 0; i < order.size(); ++i) {
    const int old = order[i];
    EVSIM_CHECK(old >= 0 && static_cast<size_t>(old) < events_.size() && position[old] < 0,
                "event {} reordered twice or out of range", old);
    position[old] = static_cast<int>(i);
  }
  std::vector<UniqueEvent> events;
  std::vector<uint64_t> hashes;
  events.reserve(events_.size());
  hashes.reserve(events_.size());
  for (const int old : order) {
    events.push_back(std::move(events_[old]));
    hashes.push_back(hashes_[old]);
  }
  events_ = std::move(events);
  hashes_ = std::move(hashes);
  for (int& slot : slots_) slot = slot == 0 ? 0 : position[slot - 1] + 1;
}

void EventTable::reserve(size_t events) {
  events_.reserve(events);
  hashes_.reserve(events);
  rehash(events);
}

}  // namespace evsim
