// Flows held compactly and one flow's loads alone; link_sharing.h.
#include "modeler/network/link_sharing.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "common/error.h"

namespace evsim {

int flowLoads(const SharedFlow& flow, std::vector<double>& capacity, FlowLoads& at) {
  if (flow.uses.empty() || flow.bytes <= 0 || flow.duration_us <= 0) return 0;
  const double demand = flow.bytes / flow.duration_us;
  int count = 0;
  for (const LinkUse& u : flow.uses) {
    const size_t r = static_cast<size_t>(u.resource);
    EVSIM_CHECK(u.resource >= 0 && r < capacity.size() && u.copies > 0,
                "a flow uses resource {} x{} of {}", u.resource, u.copies, capacity.size());
    capacity[r] = std::max(capacity[r], demand * u.copies);
    at[static_cast<size_t>(count++)] = {r, demand * u.copies};
  }
  return count;
}

LinkUses::LinkUses(std::initializer_list<LinkUse> uses) {
  for (const LinkUse& u : uses) push_back(u);
}

void LinkUses::push_back(LinkUse use) {
  EVSIM_CHECK(size_ < kMax, "a flow over more than {} links", kMax);
  at_[size_++] = use;
}

int FlowList::addShape(double duration_us, double bytes, const LinkUses& uses, bool queued) {
  if (on_tick_) duration_us = onTick(duration_us);
  shapes_.push_back({duration_us, bytes, static_cast<uint32_t>(uses_.size()),
                     static_cast<uint16_t>(uses.size()), queued});
  uses_.insert(uses_.end(), uses.begin(), uses.end());
  return static_cast<int>(shapes_.size()) - 1;
}

int FlowList::add(double start_us, int shape, int after) {
  const int f = static_cast<int>(size());
  EVSIM_CHECK(shape >= 0 && static_cast<size_t>(shape) < shapes_.size(), "flow of shape {} of {}",
              shape, shapes_.size());
  EVSIM_CHECK(after >= -1 && after < f, "flow {} after flow {} (not an earlier one)", f, after);
  EVSIM_CHECK(after < 0 || follower(static_cast<size_t>(after)) < 0, "two flows after flow {}",
              after);
  addStart(start_us);
  if (!wide_ && shape > UINT16_MAX) {
    wide_ = true;
    wide_shape_.reserve(ticks_ ? start_ticks_.capacity() : start_us_.capacity());
    wide_shape_.assign(shape_.begin(), shape_.end());
    std::vector<uint16_t>().swap(shape_);  // freed, not only emptied
  }
  if (wide_) {
    wide_shape_.push_back(shape);
  } else {
    shape_.push_back(static_cast<uint16_t>(shape));
  }
  if (static_cast<size_t>(f) % 64 == 0) follows_previous_.push_back(0);
  if (after >= 0 && after == f - 1) follows_previous_.back() |= uint64_t{1} << (f % 64);
  if (after >= 0 && after != f - 1) {
    aside_.emplace_back(f, after);
    const std::pair<int, int> by_after{after, f};
    aside_by_after_.insert(
        std::upper_bound(aside_by_after_.begin(), aside_by_after_.end(), by_after), by_after);
  }
  return f;
}

inline void FlowList::addStart(double start_us) {
  if (ticks_) {
    const double ticks = start_us / kStartTickUs;  // exact: a power of two
    if (fitsTicks(ticks)) {
      start_ticks_.push_back(static_cast<uint32_t>(ticks));  // truncated: onTick's floor
      return;
    }
    ticks_ = false;  // every start in 8 bytes from now on, still on the tick
    start_us_.reserve(start_ticks_.capacity());
    for (const uint32_t t : start_ticks_) start_us_.push_back(ticksUs(t));
    std::vector<uint32_t>().swap(start_ticks_);  // freed, not only emptied
  }
  start_us_.push_back(on_tick_ ? onTick(start_us) : start_us);
}

int FlowList::afterAside(size_t f) const {
  const int key = static_cast<int>(f);
  const auto it = std::lower_bound(aside_.begin(), aside_.end(), std::pair<int, int>{key, -1});
  return it != aside_.end() && it->first == key ? it->second : -1;
}

int FlowList::followerAside(size_t f) const {
  const int key = static_cast<int>(f);
  const auto it = std::lower_bound(aside_by_after_.begin(), aside_by_after_.end(),
                                   std::pair<int, int>{key, -1});
  return it != aside_by_after_.end() && it->first == key ? it->second : -1;
}

void FlowList::reserve(size_t flows) {
  if (size() == 0 && flows >= kTickedFromFlows && !on_tick_) {
    on_tick_ = ticks_ = true;
    for (Shape& s : shapes_) s.duration_us = onTick(s.duration_us);  // any added before
  }
  if (ticks_) {
    start_ticks_.reserve(flows);
  } else {
    start_us_.reserve(flows);
  }
  if (wide_) {
    wide_shape_.reserve(flows);
  } else {
    shape_.reserve(flows);
  }
  follows_previous_.reserve((flows + 63) / 64);
}

FlowList FlowList::of(std::span<const SharedFlow> flows) {
  FlowList out;
  out.reserve(flows.size());
  for (const SharedFlow& f : flows) {
    out.add(f.start_us, out.addShape(f.duration_us, f.bytes, f.uses, f.queued), f.after);
  }
  return out;
}

SharedFlow FlowList::flow(size_t f) const {
  const Shape& s = shape(shapeOf(f));
  SharedFlow out{startUs(f), s.duration_us, s.bytes, {}, after(f), s.queued};
  for (const LinkUse& u : uses(shapeOf(f))) out.uses.push_back(u);
  return out;
}

double FlowEnds::operator[](size_t f) const {
  const int key = static_cast<int>(f);
  const auto it = std::lower_bound(moved_.begin(), moved_.end(), std::pair<int, double>{key, 0},
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return it != moved_.end() && it->first == key ? it->second : standaloneUs(f);
}

void FlowEnds::done() {
  std::sort(moved_.begin(), moved_.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  // Each flow ends once: a second end for one flow would make the reads pick either.
  const auto twice = std::adjacent_find(moved_.begin(), moved_.end(),
                                        [](const auto& a, const auto& b) { return a.first == b.first; });
  EVSIM_CHECK(twice == moved_.end(), "flow {} was given two ends", twice->first);
  moved_.shrink_to_fit();
}

}  // namespace evsim
