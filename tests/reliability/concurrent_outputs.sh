#!/bin/sh
# Outputs of one command replace their targets together (issue 33, item 7): rounds of WRITERS
# concurrent `simulate --csv same.csv --trace same.json`, half of one strategy (A) and half of
# another (B), must leave A's CSV with A's trace or B's with B's, never a mix (before: one round in
# five with 20 writers).
# Usage: concurrent_outputs.sh EVENTSIM [ROUNDS] [WRITERS]
set -u
eventsim=$1
rounds=${2:-4}
writers=${3:-8}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
common="simulate --model tiny-gpt --cluster cpu-local --global-batch 8 --fallback analytic"
a="--strategy 1M2P1D --micro-batch 1"
b="--strategy 1M2P1D --micro-batch 2"
# shellcheck disable=SC2086
"$eventsim" $common $a --csv "$dir/a.csv" --trace "$dir/a.json" >/dev/null || exit 1
# shellcheck disable=SC2086
"$eventsim" $common $b --csv "$dir/b.csv" --trace "$dir/b.json" >/dev/null || exit 1
if cmp -s "$dir/a.csv" "$dir/b.csv" || cmp -s "$dir/a.json" "$dir/b.json"; then
  echo "strategies A and B give the same outputs: the test could not tell a mix"; exit 1
fi
round=1
while [ "$round" -le "$rounds" ]; do
  i=1
  while [ "$i" -le "$writers" ]; do
    if [ $((i % 2)) -eq 0 ]; then s=$a; else s=$b; fi
    # shellcheck disable=SC2086
    "$eventsim" $common $s --csv "$dir/same.csv" --trace "$dir/same.json" >/dev/null 2>>"$dir/err" &
    i=$((i + 1))
  done
  wait
  if [ -s "$dir/err" ]; then echo "a writer failed:"; cat "$dir/err"; exit 1; fi
  if cmp -s "$dir/same.csv" "$dir/a.csv"; then
    cmp -s "$dir/same.json" "$dir/a.json" || { echo "round $round: A's CSV with B's trace"; exit 1; }
  elif cmp -s "$dir/same.csv" "$dir/b.csv"; then
    cmp -s "$dir/same.json" "$dir/b.json" || { echo "round $round: B's CSV with A's trace"; exit 1; }
  else
    echo "round $round: the CSV is neither A's nor B's"; exit 1
  fi
  leftovers=$(ls "$dir" | grep -c '\.tmp\.')
  [ "$leftovers" -eq 0 ] || { echo "round $round: $leftovers temp files left"; exit 1; }
  round=$((round + 1))
done
echo "ok: $rounds rounds of $writers writers, every round one command's pair"
