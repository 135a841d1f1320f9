// Pieces shared by the algorithm files; algorithm.h states them.
#include "modeler/network/algorithm.h"

#include <algorithm>
#include <string>

#include "common/units.h"

namespace evsim {

double AlgorithmCost::timeUs(int64_t bytes) const {
  return latency_us + double(bytes) / bytesPerUs(algbw_gb_s);
}

namespace algorithms {

bool protocolEnabled(const GroupOnFabric& group, NcclProtocol protocol) {
  if (!group.tuning->protocols[static_cast<int>(protocol)]) return false;
  return protocol != NcclProtocol::kLL128 || group.nvswitch;
}

double stepUs(const GroupOnFabric& group, std::string_view algorithm, NcclProtocol protocol,
              bool network) {
  const HopTuning& hop = network ? group.tuning->net : group.tuning->intra;
  return hop.latencyOf(algorithm, protocol);
}

double hopBandwidthGBs(const GroupOnFabric& group, std::string_view algorithm) {
  double bw = group.intra_bw_gb_s * group.tuning->intra.efficiencyOf(algorithm);
  if (group.nodes > 1) {
    bw = std::min(bw, group.net_bw_gb_s * group.tuning->net.efficiencyOf(algorithm));
  }
  return bw;
}

int log2Ceil(int n) {
  int levels = 0;
  while ((1 << levels) < n) ++levels;
  return levels;
}

}  // namespace algorithms
}  // namespace evsim
