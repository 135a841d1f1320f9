#!/usr/bin/env bash
# The pip route end to end (slow: a full Release build, ~10-20 min on 2 cores): `pip install .`
# into a fresh virtual environment, then, from another folder, the installed tools on the venv's
# PATH and the Python package on a bundled example. Not in ctest's default run; run by hand:
#   scripts/pip_install_test.sh [VENV_DIR]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$(mktemp -d)/venv}"
python3 -m venv "$VENV"
# ccache, where there is one, makes a rebuild of the same tree quick.
if command -v ccache > /dev/null; then
  export CMAKE_ARGS="${CMAKE_ARGS:-} -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"
fi
"$VENV/bin/pip" install -q "$ROOT"
cd "$(mktemp -d)"
export PATH="$VENV/bin:$PATH"
for tool in eventsim eventprof eventrun; do
  test "$(command -v $tool)" = "$VENV/bin/$tool" || { echo "FAIL: $tool not in $VENV/bin"; exit 1; }
  $tool --version
done
# The bundled names resolve from the venv's share/eventsim/configs, not the source tree.
eventsim list models --json | "$VENV/bin/python" -c '
import json, sys
paths = [m["path"] for m in json.load(sys.stdin)["models"]]
assert paths and all(p.startswith(sys.argv[1] + "/share/eventsim/configs/") for p in paths), paths[:2]
' "$VENV"
EXAMPLE="--model tiny-gpt --cluster cpu-local --strategy 2M2P1D --micro-batch 2 --global-batch 8"
cli_ms=$(eventsim simulate $EXAMPLE --fallback analytic --json |
         "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["iteration_time_ms"])')
"$VENV/bin/python" - "$cli_ms" "$VENV" <<'PY'
import sys
import eventsim
assert eventsim.config_dir().startswith(sys.argv[2] + "/share/eventsim"), eventsim.config_dir()
r = eventsim.simulate(model="tiny-gpt", cluster="cpu-local", strategy="2M2P1D", micro_batch=2,
                      global_batch=8, fallback="analytic")
assert r.iteration_time_ms == float(sys.argv[1]), (r.iteration_time_ms, sys.argv[1])
assert [m.name for m in eventsim.list("models")], "no bundled models"
print(f"pip install OK: eventsim {eventsim.version()}, tiny-gpt 2M2P1D {r.iteration_time_ms:.3f} ms")
PY
