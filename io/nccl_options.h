#pragma once
// The NCCL switches of the network model, as NCCL's environment variables set them, for every
// command that costs collectives (simulate, search, events, eventrun through RunOptions;
// `eventsim collective` on its own): --nccl-algo (NCCL_ALGO), --nccl-pxn-disable
// (NCCL_PXN_DISABLE), --nccl-p2p-pxn-level (NCCL_P2P_PXN_LEVEL), --nccl-cross-nic
// (NCCL_CROSS_NIC). Each overrides the cluster file's topology.nccl key of the same meaning
// (config/network_topology.h); a flag not given leaves the file's value. One set of names and
// one validation, so a command cannot take a value another refuses.

#include <CLI/CLI.hpp>
#include <string>

#include "config/network_topology.h"

namespace evsim {

struct NcclOptions {
  // The flags' text as given; empty: not given (the cluster's value stands).
  std::string algo;
  std::string pxn_disable;
  std::string p2p_pxn_level;
  std::string cross_nic;

  // Registers the four flags on `app`.
  void addOptions(CLI::App& app);
  // Sets the given ones on `topology.nccl`; a bad value is an InputError naming the flag and the
  // values it takes (one line, exit 2).
  void apply(NetworkTopology& topology) const;
  // The given ones as a command-line fragment (" --nccl-algo ring --nccl-cross-nic 1"), in the
  // order above; empty when none was given.
  std::string flags() const;
};

}  // namespace evsim
