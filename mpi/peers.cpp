#include "mpi/peers.h"

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <ctime>
#include <vector>

#include "common/error.h"
#include "mpi/mpi_check.h"

namespace evsim {

namespace {

struct Peer {
  int rank = 0;
  int pid = 0;
  bool same_node = false;
  char stat_path[32] = {};  // "/proc/<pid>/stat", formatted up front for the signal handler
};

// Filled once by registerPeers, then only read (the signal handler reads it too).
std::vector<Peer> g_peers;
int g_rank = -1;
bool g_all_same_node = false;

enum class PeerState { kRunning, kStopped, kGone };

// Async-signal-safe: open, read and close only. A pid whose /proc entry is missing, or a zombie,
// is gone (mpirun reaps its dead children at once, so a killed rank's entry disappears).
PeerState stateOf(const Peer& peer) {
  const int fd = open(peer.stat_path, O_RDONLY);
  if (fd < 0) return PeerState::kGone;
  char buffer[512];
  const ssize_t n = read(fd, buffer, sizeof(buffer) - 1);
  close(fd);
  if (n <= 0) return PeerState::kGone;
  buffer[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')' (comm may itself contain ')').
  const char* paren = nullptr;
  for (const char* p = buffer; *p != '\0'; ++p) {
    if (*p == ')') paren = p;
  }
  if (paren == nullptr || paren[1] == '\0' || paren[2] == '\0') return PeerState::kRunning;
  const char state = paren[2];
  if (state == 'T' || state == 't') return PeerState::kStopped;
  if (state == 'Z' || state == 'X' || state == 'x') return PeerState::kGone;
  return PeerState::kRunning;
}

// Async-signal-safe appending to a fixed buffer.
struct Line {
  char text[1024];
  size_t length = 0;
  void add(const char* s) {
    while (*s != '\0' && length + 1 < sizeof(text)) text[length++] = *s++;
  }
  void add(long value) {
    char digits[24];
    int n = 0;
    const bool negative = value < 0;
    unsigned long v = negative ? 0UL - static_cast<unsigned long>(value) : value;
    do {
      digits[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v != 0);
    if (negative) add("-");
    while (n > 0 && length + 1 < sizeof(text)) text[length++] = digits[--n];
  }
};

// mpirun ends the job with SIGTERM (then SIGKILL) when a rank died or aborted. Snapshot which
// peers of this node are gone, let the lowest-numbered live rank of the node say so in one line,
// and stay a moment before exiting: a rank that left at once would look gone to a slower peer's
// snapshot and be blamed too.
extern "C" void onTerminate(int) {
  Line line;
  bool lowest_live = true;
  int gone = 0;
  line.add("rank ");
  line.add(static_cast<long>(g_rank));
  line.add(": mpirun is ending the job: ");
  for (const Peer& peer : g_peers) {
    if (!peer.same_node || peer.rank == g_rank) continue;
    const PeerState state = stateOf(peer);
    if (state == PeerState::kGone) {
      line.add(gone == 0 ? "rank " : ", rank ");
      line.add(static_cast<long>(peer.rank));
      line.add(" (pid ");
      line.add(static_cast<long>(peer.pid));
      line.add(")");
      ++gone;
    } else if (peer.rank < g_rank) {
      lowest_live = false;
    }
  }
  if (gone == 0) {
    line.add(g_all_same_node ? "no peer rank is gone (ended by a signal)"
                             : "a peer rank on another node died or failed");
  } else {
    line.add(gone == 1 ? " is gone" : " are gone");
    line.add(" (killed, or exited on an error of its own)");
  }
  line.add("\n");
  if (lowest_live) {
    const ssize_t ignored = write(STDERR_FILENO, line.text, line.length);
    (void)ignored;
  }
  const timespec pause{0, 300'000'000};
  nanosleep(&pause, nullptr);
  _exit(kEnvironmentErrorExitCode);
}

}  // namespace

void registerPeers(int rank, int size, int host_key) {
  const int mine[2] = {static_cast<int>(getpid()), host_key};
  std::vector<int> all(2 * static_cast<size_t>(size));
  EVSIM_MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD));
  std::vector<Peer> peers(static_cast<size_t>(size));
  bool all_same = true;
  for (int r = 0; r < size; ++r) {
    Peer& p = peers[static_cast<size_t>(r)];
    p.rank = r;
    p.pid = all[2 * static_cast<size_t>(r)];
    p.same_node = all[2 * static_cast<size_t>(r) + 1] == host_key;
    all_same = all_same && p.same_node;
    const std::string path = fmt::format("/proc/{}/stat", p.pid);
    std::strncpy(p.stat_path, path.c_str(), sizeof(p.stat_path) - 1);
  }
  g_peers = std::move(peers);
  g_rank = rank;
  g_all_same_node = all_same;
  struct sigaction action {};
  action.sa_handler = onTerminate;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
}

std::string silentPeersOnThisNode() {
  std::string out;
  for (const Peer& peer : g_peers) {
    if (!peer.same_node || peer.rank == g_rank) continue;
    const PeerState state = stateOf(peer);
    if (state == PeerState::kRunning) continue;
    out += fmt::format("{}rank {} (pid {}) is {}", out.empty() ? "" : "; ", peer.rank, peer.pid,
                       state == PeerState::kStopped ? "stopped" : "gone");
  }
  return out;
}

bool allPeersOnThisNode() { return g_all_same_node; }

}  // namespace evsim
