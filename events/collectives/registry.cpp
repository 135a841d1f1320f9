// The one list of collectives: adding one is its file in this folder, its EventKind, and a line
// here.
#include "events/collectives/registry.h"

#include "common/error.h"

namespace evsim {

const std::vector<const Collective*>& allCollectives() {
  static const std::vector<const Collective*> all = {
      &collectives::kSendRecv,  &collectives::kAllReduce, &collectives::kReduceScatter,
      &collectives::kAllGather, &collectives::kAllToAll,  &collectives::kBroadcast};
  return all;
}

const Collective& collectiveOf(EventKind kind) {
  for (const Collective* c : allCollectives()) {
    if (c->kind == kind) return *c;
  }
  EVSIM_THROW(Error, "internal: event kind {} is not a collective", static_cast<int>(kind));
}

const Collective* findCollective(std::string_view name) {
  for (const Collective* c : allCollectives()) {
    if (c->name == name) return c;
  }
  return nullptr;
}

}  // namespace evsim
