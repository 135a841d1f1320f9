#include "plan/core_bin.h"

#include <utility>

namespace evsim {

CoreBin& CoreBin::instance() {
  static CoreBin* const bin = new CoreBin;
  return *bin;
}

std::unique_ptr<PlanCore> CoreBin::take() {
  std::unique_ptr<PlanCore> core = kept_.take();
  return core ? std::move(core) : std::make_unique<PlanCore>();
}

void CoreBin::put(PlanCore* core) { kept_.put(std::unique_ptr<PlanCore>(core)); }

size_t CoreBin::kept() { return kept_.size(); }

}  // namespace evsim
