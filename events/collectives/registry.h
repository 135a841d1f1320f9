#pragma once
// The collectives of events/collectives/*.cpp, one object each, for registry.cpp to list.

#include "events/collective.h"

namespace evsim::collectives {

extern const Collective kSendRecv;
extern const Collective kAllReduce;
extern const Collective kReduceScatter;
extern const Collective kAllGather;
extern const Collective kAllToAll;
extern const Collective kBroadcast;

// (n-1)/n: the share of the buffer each rank of a ring sends per pass.
inline double ringShare(int n) { return double(n - 1) / double(n); }

}  // namespace evsim::collectives
