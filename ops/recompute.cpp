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
  }
  return "?";
}

Recompute parseRecompute(std::string_view text, std::string_view flag) {
  std::string lower = toLower(trim(text));
  if (lower == "none") return Recompute::kNone;
  if (lower == "full") return Recompute::kFull;
  if (lower == "selective") return Recompute::kSelective;
  EVSIM_THROW(InputError, "{} '{}': unknown recomputation (none, full or selective)", flag, text);
}

}  // namespace evsim
