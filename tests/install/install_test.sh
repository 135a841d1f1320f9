#!/usr/bin/env bash
# cmake --install into a temporary prefix, then, from another folder, the installed tools on a
# bundled example: one bin folder with the three tools, the bundled configs read from
# P/share/eventsim/configs (not the source tree), the same prediction as the build tree's
# eventsim, a hint naming the installed eventprof, and the installed Python package.
#   install_test.sh BUILD_DIR CMAKE PYTHON SOURCE_DIR
set -euo pipefail
BUILD="$(cd "$1" && pwd)" CMAKE="$2" PY="$3" SRC="$(cd "$4" && pwd)"
P="$(mktemp -d)"
WORK="$(mktemp -d)"
trap 'rm -rf "$P" "$WORK"' EXIT
"$CMAKE" --install "$BUILD" --prefix "$P" > /dev/null
cd "$WORK"
for tool in eventsim eventprof eventrun; do
  test -x "$P/bin/$tool" || { echo "FAIL: no $P/bin/$tool"; exit 1; }
  "$P/bin/$tool" --version | grep -q "^$tool [0-9]" || { echo "FAIL: $tool --version"; exit 1; }
done
# Every bundled model listed from the prefix's share folder.
"$P/bin/eventsim" list models --json | "$PY" -c '
import json, os, sys
prefix, src = sys.argv[1], sys.argv[2]
models = json.load(sys.stdin)["models"]
paths = [m["path"] for m in models]
want = sorted(f[:-5] for f in os.listdir(src + "/configs/models") if f.endswith(".yaml"))
assert sorted(m["name"] for m in models) == want, models
assert all(p.startswith(prefix + "/share/eventsim/configs/models/") for p in paths), paths[:2]
' "$P" "$SRC"
EXAMPLE=(--model tiny-gpt --cluster cpu-local --strategy 2M2P1D --micro-batch 2 --global-batch 8)
ms() { "$PY" -c 'import json, sys; print(json.load(sys.stdin)["iteration_time_ms"])'; }
installed=$("$P/bin/eventsim" simulate "${EXAMPLE[@]}" --fallback analytic --json | ms)
built=$("$BUILD/eventsim" simulate "${EXAMPLE[@]}" --fallback analytic --json | ms)
test "$installed" = "$built" || { echo "FAIL: installed $installed ms, build tree $built ms"; exit 1; }
# A profile that lacks the events: the hint names the installed eventprof, pasteable.
hint=$("$P/bin/eventsim" simulate "${EXAMPLE[@]}" \
       --profile "$SRC/tests/data/profiles/cost_model_small.yaml" --fallback none 2>&1 || true)
case "$hint" in
  *"np 4 $P/bin/eventprof --model tiny-gpt --cluster cpu-local"*) ;;
  *) echo "FAIL: hint without the installed eventprof: $hint"; exit 1 ;;
esac
if [ ! -e /dev/nvidiactl ]; then
  case "$hint" in
    *"mpirun --oversubscribe -np 4 "*"--backend cpu --ranks-per-node 2"*) ;;
    *) echo "FAIL: hint without the CPU flags: $hint"; exit 1 ;;
  esac
fi
# The Python package, where the module was built.
site=$(ls -d "$P"/lib/python3*/site-packages 2>/dev/null | head -1 || true)
if [ -n "$site" ] && [ -d "$site/eventsim" ]; then
  PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 "$PY" - "$P" "$built" <<'PY'
import sys
import eventsim
prefix, built = sys.argv[1], float(sys.argv[2])
assert eventsim.__file__.startswith(prefix), eventsim.__file__
assert eventsim.config_dir() == prefix + "/share/eventsim/configs", eventsim.config_dir()
r = eventsim.simulate(model="tiny-gpt", cluster="cpu-local", strategy="2M2P1D", micro_batch=2,
                      global_batch=8, fallback="analytic")
assert r.iteration_time_ms == built, (r.iteration_time_ms, built)
PY
  echo "python package: ok"
fi
echo "installed to $P: ok ($installed ms)"
