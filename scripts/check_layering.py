#!/usr/bin/env python3
"""Checks every project include against the folder layering of docs/DESIGN.md ("Layout").

Each source folder may include only the folders listed for it (itself included): includes point
down, never up, and no two folders include each other. Prints each offending include and exits 1;
prints a one-line summary and exits 0 when every include is allowed. Run from the repository root.
"""
import pathlib
import re
import sys

BASE = ["common"]
ALLOWED = {
    "common": BASE,
    "events": BASE + ["events"],
    "config": BASE + ["events", "config"],
    "ops": BASE + ["config", "events", "ops"],
    "plan": BASE + ["config", "events", "ops", "plan"],
    "io": BASE + ["config", "events", "ops", "plan", "io"],
    "modeler": BASE + ["config", "events", "ops", "plan", "io", "modeler"],
    "kernels": BASE + ["config", "events", "kernels"],
    "mpi": BASE + ["config", "events", "io", "kernels", "mpi"],
    "platform": BASE + ["config", "events", "io", "kernels", "mpi", "platform"],
    "profiler": BASE + ["config", "events", "ops", "plan", "io", "modeler", "kernels", "mpi",
                        "platform", "profiler"],
    "runner": BASE + ["config", "events", "ops", "plan", "io", "modeler", "kernels", "mpi",
                      "platform", "runner"],
    "python": BASE + ["config", "events", "ops", "plan", "io", "modeler", "python"],
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
SUFFIXES = {".h", ".cpp", ".cu", ".cuh"}


def main() -> int:
    root = pathlib.Path(".")
    bad = []
    checked = 0
    for folder, allowed in ALLOWED.items():
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES:
                continue
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                match = INCLUDE.match(line)
                if not match or not (root / match.group(1)).is_dir():
                    continue
                checked += 1
                if match.group(1) not in allowed:
                    bad.append(f"{path}:{number}: {folder}/ includes {match.group(1)}/")
    if bad:
        print("includes against the layering (docs/DESIGN.md, Layout):")
        print("\n".join(bad))
        return 1
    print(f"{checked} includes follow the layering")
    return 0


if __name__ == "__main__":
    sys.exit(main())
