#include "ops/cp_comm.h"

#include <cctype>
#include <string>

#include "common/error.h"

namespace evsim {

std::string_view cpCommName(CpComm comm) {
  switch (comm) {
    case CpComm::kP2p:
      return "p2p";
    case CpComm::kA2a:
      return "a2a";
    case CpComm::kAllGather:
      return "allgather";
    case CpComm::kA2aP2p:
      return "a2a+p2p";
  }
  return "?";
}

CpComm parseCpComm(std::string_view text, std::string_view flag) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "p2p") return CpComm::kP2p;
  if (lower == "a2a") return CpComm::kA2a;
  if (lower == "allgather" || lower == "all_gather" || lower == "all-gather") {
    return CpComm::kAllGather;
  }
  if (lower == "a2a+p2p") return CpComm::kA2aP2p;
  if (lower.find_first_of(" ,") != std::string::npos) {
    EVSIM_THROW(InputError,
                "{} '{}': a per-layer list of types is not modelled; give one type for every "
                "layer (p2p, a2a, allgather or a2a+p2p)",
                flag, text);
  }
  EVSIM_THROW(InputError, "{} '{}': unknown type (p2p, a2a, allgather or a2a+p2p)", flag, text);
}

int cpA2aSize(CpComm comm, int cp, int a2a) {
  if (cp <= 1) return 1;
  if (comm == CpComm::kA2a) return cp;
  return comm == CpComm::kA2aP2p && a2a > 0 ? a2a : 1;
}

int cpRingSize(CpComm comm, int cp, int a2a) {
  if (cp <= 1 || comm == CpComm::kA2a || comm == CpComm::kAllGather) return 1;
  return cp / cpA2aSize(comm, cp, a2a);
}

}  // namespace evsim
