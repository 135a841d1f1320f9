// The NCCL switches; nccl_options.h states the contract.
#include "io/nccl_options.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"

namespace evsim {

void NcclOptions::addOptions(CLI::App& app) {
  app.add_option("--nccl-algo", algo,
                 "force one NCCL algorithm for every collective, as NCCL_ALGO does (ring, tree, "
                 "nvls, nvls_tree, collnet, pat; default: the cluster's, else NCCL's choice)");
  app.add_option("--nccl-pxn-disable", pxn_disable,
                 "1: no PXN (sends between nodes leave through their own NIC), as "
                 "NCCL_PXN_DISABLE does (default: the cluster's nccl.pxn_disable, else 0)");
  app.add_option("--nccl-p2p-pxn-level", p2p_pxn_level,
                 "when a send between nodes goes through PXN, as NCCL_P2P_PXN_LEVEL: 0 never, 1 "
                 "when the receiver's NIC is not on the sender's PCIe switch, 2 always (default: "
                 "the cluster's nccl.p2p_pxn_level, else 2)");
  app.add_option("--nccl-cross-nic", cross_nic,
                 "whether a ring/tree channel may leave a node through another NIC than it came in "
                 "by, as NCCL_CROSS_NIC: 0 never (rail-local), 1 yes, 2 where it is faster "
                 "(default: the cluster's nccl.cross_nic, else 2)");
}

void NcclOptions::apply(NetworkTopology& topology) const {
  if (!algo.empty()) {
    const auto& names = ncclAlgorithmNames();
    if (algo != "auto" && std::find(names.begin(), names.end(), algo) == names.end()) {
      EVSIM_THROW(InputError,
                  "--nccl-algo '{}': must be auto, ring, tree, nvls, nvls_tree, collnet or pat",
                  algo);
    }
    topology.nccl.algorithm = algo;
  }
  if (!pxn_disable.empty()) {
    if (pxn_disable != "0" && pxn_disable != "1") {
      EVSIM_THROW(InputError, "--nccl-pxn-disable '{}': must be 0 or 1 (as NCCL_PXN_DISABLE)",
                  pxn_disable);
    }
    topology.nccl.pxn_disable = pxn_disable == "1";
  }
  if (!p2p_pxn_level.empty()) {
    const std::string& v = p2p_pxn_level;
    if (v != "0" && v != "1" && v != "2") {
      EVSIM_THROW(InputError,
                  "--nccl-p2p-pxn-level '{}': must be 0, 1 or 2 (as NCCL_P2P_PXN_LEVEL)", v);
    }
    topology.nccl.p2p_pxn_level = v[0] - '0';
  }
  if (!cross_nic.empty()) {
    const std::string& v = cross_nic;
    if (v != "0" && v != "1" && v != "2") {
      EVSIM_THROW(InputError, "--nccl-cross-nic '{}': must be 0, 1 or 2 (as NCCL_CROSS_NIC)", v);
    }
    topology.nccl.cross_nic = v[0] - '0';
  }
}

std::string NcclOptions::flags() const {
  std::string out;
  if (!algo.empty()) out += fmt::format(" --nccl-algo {}", algo);
  if (!pxn_disable.empty()) out += fmt::format(" --nccl-pxn-disable {}", pxn_disable);
  if (!p2p_pxn_level.empty()) out += fmt::format(" --nccl-p2p-pxn-level {}", p2p_pxn_level);
  if (!cross_nic.empty()) out += fmt::format(" --nccl-cross-nic {}", cross_nic);
  return out;
}

}  // namespace evsim
