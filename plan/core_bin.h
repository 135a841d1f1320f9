#pragma once
// Plan cores no cache or plan holds any more, kept for the next buildPlanCore (plan_core.h) to
// build into, so that their op lists and per-layer arrays keep their storage. A search keeps two
// cores (PrunedSearch) and builds one for nearly every simulation (Llama 3 70B on 1,024 GPUs:
// ~700 builds for ~730 simulations), each chunk's op lists and per-layer arrays allocated anew,
// most under the search heap's lock, and freed when the next evicts it (bench/RESULTS.md, session
// 29, alloc29). Under AddressSanitizer it keeps none (kCapacity 0): a core freed and used again
// must stay a use-after-free that the sanitizer build reports, not a read of a recycled core.

#include <cstddef>
#include <memory>

#include "common/kept_objects.h"
#include "plan/plan_core.h"

namespace evsim {

#if defined(__SANITIZE_ADDRESS__)
#define EVSIM_CORE_BIN_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EVSIM_CORE_BIN_UNDER_ASAN 1
#endif
#endif

class CoreBin {
 public:
  // At most this many cores' storage is kept: 0.3-0.7 MB each for Llama 3.1 405B (plan_cache.h).
#ifdef EVSIM_CORE_BIN_UNDER_ASAN
  static constexpr size_t kCapacity = 0;
#else
  static constexpr size_t kCapacity = 2;
#endif

  // The process's bin. Never destroyed (a core freed by a static's destructor at exit would find
  // it gone): what it holds at exit is reachable, not leaked.
  static CoreBin& instance();

  // A kept core (its contents a previous plan's, to be overwritten), or a new one.
  std::unique_ptr<PlanCore> take();
  // Takes `core` (no one else holds it): kept while fewer than kCapacity are, else freed.
  void put(PlanCore* core);
  // How many are kept now.
  size_t kept();

 private:
  KeptObjects<PlanCore> kept_{kCapacity};
};

}  // namespace evsim
