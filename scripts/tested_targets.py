#!/usr/bin/env python3
"""Prints the build targets whose programs the selected CTest tests run, one per line.

    python3 scripts/tested_targets.py BUILD_DIR [ctest selection...]   e.g. -L threads

scripts/test.sh builds only these (and what they depend on) when it is given a selection,
so a sanitizer build that runs one label does not compile every other test program.
Reads `ctest --show-only=json-v1`: every argument of a test's command that names a file in
the build tree (a program, or KEY=path) whose name is a target of the build; for a test
whose program is not built yet (CTest then shows no command), the target of its name.
"""
import json
import os
import subprocess
import sys


def build_targets(build_dir):
    out = subprocess.run(["cmake", "--build", build_dir, "--target", "help"], check=True,
                         capture_output=True, text=True).stdout
    # Makefiles: "... name"; Ninja: "name: phony".
    names = set()
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("... "):
            names.add(line[4:].split()[0])
        elif line.endswith(": phony"):
            names.add(line[: -len(": phony")])
    return names


def main():
    build_dir = os.path.realpath(sys.argv[1])
    tests = json.loads(subprocess.run(["ctest", "--show-only=json-v1"] + sys.argv[2:],
                                      cwd=build_dir, check=True, capture_output=True,
                                      text=True).stdout)["tests"]
    targets = build_targets(build_dir)
    wanted = set()
    for test in tests:
        if "command" not in test:
            # CTest leaves out the command of a program not built yet; the serial tests of
            # omgs_add_test are named for their program (NAME, or NAME.BACKEND).
            name = test["name"]
            found = [c for c in (name, name.rsplit(".", 1)[0]) if c in targets]
            if not found:
                sys.exit(f"tested_targets.py: no program known for test {name}")
            wanted.add(found[0])
            continue
        for arg in test["command"]:
            path = arg.split("=", 1)[-1]
            if path.startswith(build_dir + os.sep):
                name = os.path.basename(path)
                if name in targets:
                    wanted.add(name)
    print("\n".join(sorted(wanted)))


if __name__ == "__main__":
    main()
