#include "plan/core_bin.h"

#include <utility>

namespace evsim {

CoreBin& CoreBin::instance() {
  static CoreBin* const bin = new CoreBin;
  return *bin;
}

std::unique_ptr<PlanCore> CoreBin::take() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!kept_.empty()) {
      std::unique_ptr<PlanCore> core = std::move(kept_.back());
      kept_.pop_back();
      return core;
    }
  }
  return std::make_unique<PlanCore>();
}

void CoreBin::put(PlanCore* core) {
  std::unique_ptr<PlanCore> owned(core);
  std::lock_guard<std::mutex> lock(mutex_);
  if (kept_.size() < kCapacity) kept_.push_back(std::move(owned));
  // else freed here (when the lock is let go), as without the bin
}

size_t CoreBin::kept() {
  std::lock_guard<std::mutex> lock(mutex_);
  return kept_.size();
}

}  // namespace evsim
