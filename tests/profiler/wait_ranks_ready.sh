# Sourced by killed_rank.sh and stalled_rank.sh. wait_ranks_ready LAUNCHER NP: waits until mpirun
# (pid LAUNCHER) has NP rank processes that all catch SIGTERM, which they do from the moment
# registerPeers (mpi/peers.cpp) has run, i.e. every rank is past MPI_Init and knows its peers.
# A fixed sleep is not enough: at load 15 on two cores MPI_Init alone takes about 3 s, and a rank
# killed before registerPeers leaves survivors without the handler that names it. Returns 1
# after 60 s.
wait_ranks_ready() {
  waited_tenths=0
  while [ "$waited_tenths" -lt 600 ]; do
    ready=0
    for pid in $(pgrep -P "$1"); do
      # SigCgt is a hex mask of caught signals; SIGTERM (15) is bit 14, 0x4000.
      mask=$(sed -n 's/^SigCgt:[[:space:]]*//p' "/proc/$pid/status" 2>/dev/null)
      [ -n "$mask" ] && [ $((0x$mask & 0x4000)) -ne 0 ] && ready=$((ready + 1))
    done
    [ "$ready" -ge "$2" ] && return 0
    sleep 0.1
    waited_tenths=$((waited_tenths + 1))
  done
  return 1
}
