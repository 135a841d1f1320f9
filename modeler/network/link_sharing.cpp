// Link sharing's entry points; link_sharing.h states the model, sharing_pass.h runs it.
#include "modeler/network/link_sharing.h"

#include <memory>

#include "modeler/network/sharing_pass.h"

namespace evsim {

SharingResult shareLinks(std::span<const SharedFlow> input,
                         std::span<const double> capacity_bytes_per_us, bool record_load) {
  auto list = std::make_shared<const FlowList>(FlowList::of(input));
  SharingResult out = shareLinks(*list, capacity_bytes_per_us, record_load);
  out.end_us.keep(std::move(list));
  return out;
}

SharingResult shareLinks(const FlowList& input, std::span<const double> capacity_bytes_per_us,
                         bool record_load, bool whole_chains) {
  return sharing::SharingPass(input, capacity_bytes_per_us, record_load, whole_chains).run();
}

}  // namespace evsim
