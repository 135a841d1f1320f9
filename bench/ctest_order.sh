#!/usr/bin/env bash
# The order `ctest -j 2` starts the suite's tests in, with no cost data (as on a clean clone), in
# seconds rather than minutes: every CTestTestfile.cmake of BUILD (and the GoogleTest lists they
# include) is copied to OUT with each test's command replaced by a sleep (0.1 s; the fuzz build
# 20 s, the fuzz smoke 10 s) and its properties (DEPENDS, fixtures, COST, PROCESSORS, ...) kept.
# Prints where the fuzz build and smoke started and the wall. Tests that expect output fail and
# their fixtures' dependents do not run; the order of the others is ctest's own.
# Usage: bench/ctest_order.sh [BUILD (build)] [OUT (/tmp/ctest-order)] [PROCESSORS for the build]
# (session 17, ci37: PROCESSORS 2 started the build #1075 of 1082, PROCESSORS 1 #4).
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
out=${2:-/tmp/ctest-order}
processors=${3:-}
rm -rf "$out"
mkdir -p "$out"
python3 - "$build" "$out" "$processors" <<'PY'
import glob, os, re, sys
build, out, processors = sys.argv[1:4]
def stub(name):
    secs = {'fuzz.libfuzzer_build': '20', 'fuzz.libfuzzer_smoke': '10'}.get(name, '0.1')
    return (f'add_test([=[{name}]=] "sh" "-c" '
            f'"echo {name} $(date +%s.%N) >> {out}/starts.log; sleep {secs}")\n')
call = re.compile(r'add_test\(\[=\[(.+?)\]=\].*?\)\n(?=set_tests_properties\(\[=\[\1\]=\])', re.S)
def rewrite(text):
    text = call.sub(lambda m: stub(m.group(1)), text)
    text = re.sub(r' WORKING_DIRECTORY ("[^"]*"|\S+)', '', text)
    if processors:
        text = re.sub(r'(set_tests_properties\(\[=\[fuzz\.libfuzzer_build\]=\] PROPERTIES )',
                      rf'\1 PROCESSORS "{processors}"', text)
    return text
def include(m):
    tests = m.group(1).replace('_include.cmake', '_tests.cmake')
    if not os.path.exists(tests):
        return ''
    copy = os.path.join(out, os.path.relpath(tests, build))
    with open(copy, 'w') as f:
        f.write(rewrite(open(tests).read()))
    return f'include("{copy}")'
for path in glob.glob(os.path.join(build, '**', 'CTestTestfile.cmake'), recursive=True):
    rel = os.path.relpath(path, build)
    if rel.startswith('fuzz-smoke'):
        continue
    os.makedirs(os.path.join(out, os.path.dirname(rel)), exist_ok=True)
    text = re.sub(r'include\("([^"]*_include\.cmake)"\)', include, open(path).read())
    with open(os.path.join(out, rel), 'w') as f:
        f.write(rewrite(text))
PY
start=$(date +%s.%N)
(cd "$out" && ctest -j 2 >ctest.txt 2>&1) || true
end=$(date +%s.%N)
python3 - "$out" "$start" "$end" <<'PY'
import sys
out, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
rows = sorted((float(t), n) for n, t in (l.split() for l in open(f'{out}/starts.log')))
names = [n for _, n in rows]
for test in ('fuzz.libfuzzer_build', 'fuzz.libfuzzer_smoke'):
    if test in names:
        i = names.index(test)
        print(f'{test}: started #{i + 1} of {len(rows)} at {rows[i][0] - start:.1f} s')
print(f'first: {", ".join(names[:4])}; wall {end - start:.1f} s')
PY
