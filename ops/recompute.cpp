#include "ops/recompute.h"

#include <string>

#include "common/error.h"
#include "common/strings.h"

namespace evsim {

std::string_view recomputeName(Recompute recompute) {
  switch (recompute) {
    case Recompute::kNone:
      return "none";
    case Recompute::kFull:
      return "full";
    case Recompute::kSelective:
      return "selective";
    case Recompute::kSelectiveOp:
      return "selective-op";
  }
  return "?";
}

Recompute parseRecompute(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "none") return Recompute::kNone;
  if (lower == "full") return Recompute::kFull;
  if (lower == "selective") return Recompute::kSelective;
  if (lower == "selective-op") return Recompute::kSelectiveOp;
  EVSIM_THROW(InputError, "{} '{}': unknown recomputation (none, full, selective or selective-op)",
              flag, text);
}

}  // namespace evsim
