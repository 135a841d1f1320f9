#include "events/event_table.h"

namespace evsim {

int EventTable::intern(const Event& event) {
  std::string signature = event.signature();
  auto [it, inserted] = index_.try_emplace(signature, static_cast<int>(events_.size()));
  if (inserted) events_.push_back(UniqueEvent{event, std::move(signature), 0});
  return it->second;
}

}  // namespace evsim
