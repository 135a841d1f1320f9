// Pieces shared by the algorithm files; algorithm.h states them.
#include "modeler/network/algorithm.h"

#include <algorithm>
#include <string>

#include "common/units.h"
#include "modeler/network/nccl_estimate.h"

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

double hopBandwidthGBs(const GroupOnFabric& group, std::string_view algorithm, double net_bw_gb_s) {
  double bw = group.intra_bw_gb_s * group.tuning->intra.efficiencyOf(algorithm);
  if (group.nodes > 1) {
    const double net = net_bw_gb_s >= 0 ? net_bw_gb_s : group.net_bw_gb_s;
    bw = std::min(bw, net * group.tuning->net.efficiencyOf(algorithm));
  }
  return bw;
}

int llChannels(const GroupOnFabric& group, int64_t bytes, int64_t bytes_per_channel) {
  const int64_t most = 2 * int64_t{ncclGraphOf(group).channels};
  return static_cast<int>(std::clamp<int64_t>(bytes / bytes_per_channel, 1, most));
}

double llChannelsUs(const GroupOnFabric& group, NcclProtocol protocol, int64_t bytes,
                    int64_t bytes_per_channel) {
  if (protocol != NcclProtocol::kLL || group.nodes < 2) return 0;
  const double per_channel = group.tuning->net.ll_channel_us;
  return per_channel > 0 ? per_channel * llChannels(group, bytes, bytes_per_channel) : 0;
}

int log2Ceil(int n) {
  int levels = 0;
  while ((1 << levels) < n) ++levels;
  return levels;
}

}  // namespace algorithms
}  // namespace evsim
