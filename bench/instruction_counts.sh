#!/usr/bin/env bash
# Instruction counts (callgrind, load-independent) of the benches the brief budgets, for side-by-side
# comparisons of two builds: bench/instruction_counts.sh SIMULATE_BENCH SEARCH_BENCH
# (e.g. build/bench/simulate_bench build/bench/search_bench). Needs valgrind.
# The 2,048-GPU simulate: evsim::simulate (the timing) and the whole benchmark body inclusive
# (plan, events, costs and timing: runOnce), one iteration.
sim=$1 search=$2
valgrind --tool=callgrind --callgrind-out-file=${TMPDIR:-/tmp}/cg.sim.$$ \
  "$sim" --benchmark_filter='Gpt3_8M16P16D_Summary$' --benchmark_min_time=0.0001 >/dev/null 2>&1
ann=$(callgrind_annotate --inclusive=yes ${TMPDIR:-/tmp}/cg.sim.$$ 2>/dev/null)
echo "simulate 2048: evsim::simulate $(echo "$ann" | grep -m1 ' ???:evsim::simulate(' | awk '{print $1}'), whole body $(echo "$ann" | grep -m1 'BM_Gpt3_8M16P16D_Summary' | awk '{print $1}')"
for f in 'BM_Llama405b_16384Gpus_Every_Pruned/1/1/' 'BM_Llama70b_Every_Pruned/2/16384/'; do
  valgrind --tool=callgrind --callgrind-out-file=${TMPDIR:-/tmp}/cg.s.$$ "$search" --benchmark_filter="$f" \
    --benchmark_min_time=0.0001 >/dev/null 2>&1
  echo "$f: $(callgrind_annotate ${TMPDIR:-/tmp}/cg.s.$$ 2>/dev/null | grep -m1 'PROGRAM TOTALS')"
  /usr/bin/time -f "  wall %e s, user %U s, peak %M KB" "$search" --benchmark_filter="$f" \
    --benchmark_min_time=0.0001 2>&1 >/dev/null | tail -1
done
rm -f ${TMPDIR:-/tmp}/cg.sim.$$ ${TMPDIR:-/tmp}/cg.s.$$
