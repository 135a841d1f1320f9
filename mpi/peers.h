#pragma once
// Which peer rank went silent (issue 17, item 5). Every rank publishes its pid and node at
// start-up; a rank that times out waiting (mpi_wait.h), or that mpirun is ending because a peer
// died, looks at the peers on its own node in /proc and names the one that is stopped (SIGSTOP:
// state T) or gone. Peers on other nodes cannot be seen from here: the line then says a peer on
// another node.

#include <string>

namespace evsim {

// Collective over MPI_COMM_WORLD, once, from queryMpiWorld (right after MPI_Init). `host_key`
// identifies this rank's node (MpiWorld::host_key). Installs the SIGTERM handler: when a rank dies,
// mpirun sends SIGTERM to the others (then SIGKILL); the handler prints, from the lowest-numbered
// live rank of each node, one line naming the ranks that are gone, and exits with code 1.
void registerPeers(int rank, int size, int host_key);

// "rank 3 (pid 1234) is stopped", "rank 3 (pid 1234) is gone", joined by "; "; "" when no peer on
// this node is stopped or gone (or before registerPeers). Reads /proc; not for signal handlers.
std::string silentPeersOnThisNode();

// Whether every peer runs on this node (so silentPeersOnThisNode saw them all).
bool allPeersOnThisNode();

}  // namespace evsim
