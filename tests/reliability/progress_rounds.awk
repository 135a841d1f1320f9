# The compute phase of an eventprof run, from its progress lines (profiler/progress.cpp: rank 0
# prints "[eventprof] K/N done | now: WHAT | E s elapsed, ..." as each round starts, E to 0.1 s).
# Compute rounds start at the lines before the all-reduce's, which ends the phase; each round ends
# where the next line starts. Prints "LONGEST MEAN PHASE ROUNDS" (seconds; LONGEST with the 0.1-s
# print resolution added: each E is rounded, so a difference is within 0.1 s of the truth).
# Exit 1 without a compute round or an all-reduce line. Used by long_compute_phase.sh.
/^\[eventprof\] [0-9]+\/[0-9]+ done \| now: / {
  if (!match($0, /\| [0-9.]+ s elapsed/)) next
  t = substr($0, RSTART + 2, RLENGTH - 12) + 0
  if (index($0, "now: allreduce ") > 0) { end = t; found = 1; exit }
  start[n++] = t
}
END {
  if (!found || n == 0) exit 1
  longest = 0
  for (k = 0; k < n; k++) {
    step = (k + 1 < n ? start[k + 1] : end) - start[k]
    if (step > longest) longest = step
  }
  phase = end - start[0]
  printf "%.3f %.3f %.3f %d\n", longest + 0.1, phase / n, phase, n
}
