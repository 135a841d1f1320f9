#!/usr/bin/env python3
"""Fails when two files of one unity batch define a namespace-scope name (a helper function, a
constant, a type) of the same name.

EVSIM_UNITY_BUILD (top-level CMakeLists.txt) compiles the test programs and the CLI libraries in
batches of 8 files (CMake's Unity/unity_N_cxx.cxx, which #include the files). The files of a batch
then share one translation unit, anonymous namespaces included. Two constants, types or helpers of
the same name and signature fail to compile (a redefinition: loud, but found one batch at a time
by a slow build; this check lists them all at configure time). Two of the same name and different
signatures become overloads of each other, and a call in one file may silently pick the other
file's helper: this check catches that. It reads the Unity/unity_*_cxx.cxx sources that the build
compiles (compile_commands.json; CMake leaves stale batch files behind after a reconfigure) and,
in each batch, the function definitions that start a line (Google style: namespace bodies are not
indented, so a column-0 definition is a namespace-scope one). It also fails on a column-0
`using namespace` directive in any file of a batch but its last: the directive reaches the files
included after it (a helper there could then silently take a name the directive brought in).

A file that collides is renamed apart, or taken out of unity batches with
  set_source_files_properties(F PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)

Usage: check_unity_batches.py BUILD_DIR   (exit 1 and one line per collision; 0 when none)
"""
import collections
import json
import pathlib
import re
import sys

# A column-0 function definition: optional specifiers, a return type, then `name(`; lines ending
# with ';' are declarations or statements and are skipped.
DEFINITION = re.compile(
    r'^(?:static\s+|inline\s+|constexpr\s+|\[\[nodiscard\]\]\s+)*(?:[\w:<>,]+[\s*&]+)+(\w+)\s*\(')
# Column-0 constants and variables, and types (struct, class, enum). A type alias may be
# declared twice when both name the same type (`using V = std::vector<int64_t>;`) and fails to
# compile otherwise, so aliases are not listed.
CONSTANT = re.compile(r'^(?:static\s+|inline\s+)*(?:constexpr|const)\s')
TYPE = re.compile(r'^(?:struct|class|enum(?:\s+class)?)\s+(\w+)\s*(?:final\b|:(?!:)|\{)')
USING_DIRECTIVE = re.compile(r'^using\s+namespace\s+[\w:]+\s*;')
NOT_FUNCTIONS = {'TEST', 'TEST_F', 'TEST_P', 'TYPED_TEST', 'INSTANTIATE_TEST_SUITE_P', 'if', 'for',
                 'while', 'switch', 'return', 'main'}


def defined_names(source):
    names = set()
    for line in source.read_text(errors='replace').splitlines():
        match = DEFINITION.match(line)
        if match and match.group(1) not in NOT_FUNCTIONS and not line.rstrip().endswith(';'):
            names.add(match.group(1))
        if CONSTANT.match(line):  # `constexpr int64_t kH = 64, kF = 256;`: every declarator
            names.update(re.findall(r'(\w+)\s*(?:=|\{)', line.split('//')[0]))
        match = TYPE.match(line)
        if match:
            names.add(match.group(1))
    return names


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1])
        return 2
    build = pathlib.Path(sys.argv[1])
    batches = sorted({pathlib.Path(entry['file'])
                      for entry in json.loads((build / 'compile_commands.json').read_text())
                      if re.search(r'/Unity/unity_\d+_cxx\.cxx$', entry['file'])})
    collisions = 0
    for batch in batches:
        files = re.findall(r'#include "([^"]+)"', batch.read_text())
        where = collections.defaultdict(list)
        for f in files:
            for name in defined_names(pathlib.Path(f)):
                where[name].append(pathlib.Path(f).name)
        for f in files[:-1]:
            if any(USING_DIRECTIVE.match(line)
                   for line in pathlib.Path(f).read_text(errors='replace').splitlines()):
                collisions += 1
                print(f'{batch.relative_to(build.resolve())}: a using-directive in '
                      f'{pathlib.Path(f).name} reaches the files after it')
        for name, in_files in sorted(where.items()):
            if len(in_files) > 1:
                collisions += 1
                print(f'{batch.relative_to(build.resolve())}: {name} defined in {", ".join(in_files)}')
    print(f'{len(batches)} unity batches, {collisions} names defined twice or directives '
          f'leaking in a batch')
    return 1 if collisions else 0


if __name__ == '__main__':
    sys.exit(main())
