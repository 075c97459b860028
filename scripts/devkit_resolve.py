#!/usr/bin/env python3
"""The Debian packages of the device kit (scripts/device-kit.sh, docs/portability.md).

Resolves the Depends / Pre-Depends closure of the given packages with `apt-cache depends`,
leaving out what any Linux machine with a C++ compiler already has (the C and C++ runtimes,
zlib, Essential packages) and what omgs never uses on the device (Fortran, ssh for remote
launches, documentation scripts, -dev packages that only static linking would need).
Prints one package name a line, sorted.

    devkit_resolve.py [--skip NAME]... PACKAGE...
    devkit_resolve.py --parse FILE     # the choices in a saved `apt-cache depends` output,
                                       # in parentheses those the kit leaves out
"""
import argparse
import re
import subprocess
import sys

# On every machine that can compile C++ (the device's nvcc needs a host g++), with stable sonames.
BASE = {"libc6", "libgcc-s1", "libstdc++6", "zlib1g", "gcc-12-base", "libcrypt1"}
# Not needed by an MPI program built and run on one node: reasons in docs/portability.md.
NOT_NEEDED = re.compile(
    r"^(gfortran.*|libgfortran.*|flang.*|gcc-\d+|cpp-\d+|openssh-client|libjs-.*|"
    r"libibverbs-dev|libevent-dev|libpmix-dev|zlib1g-dev|libnl-.*-dev|libltdl-dev|"
    r"libnuma-dev|libudev-dev|debconf|perl.*|python3.*|adduser|passwd|libhwloc-plugins)$")
DEP_FIELDS = ("Depends", "PreDepends")
CHUNK = 64


def parse_depends(text):
    """{package: [[alternative, ...], ...]} from `apt-cache depends` output.

    A line '|Depends: a' says the next Depends line is an alternative of this one. A virtual
    package ('<name>') is replaced by the providers listed under it, indented further.
    """
    deps = {}
    current = None
    groups = None
    pending_alt = False
    last = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if not line.startswith(" "):
            current = line.strip()
            groups = deps.setdefault(current, [])
            pending_alt = False
            last = None
            continue
        stripped = line.strip()
        m = re.match(r"^(\|?)([A-Za-z]+): (.+)$", stripped)
        if m:
            alt, field, name = m.groups()
            last = None
            if field not in DEP_FIELDS:
                pending_alt = False
                continue
            if pending_alt and groups:
                groups[-1].append(name)
            else:
                groups.append([name])
            last = groups[-1]
            pending_alt = alt == "|"
        elif last is not None and last and last[-1].startswith("<"):
            last.append(stripped)  # a provider of the virtual package before it
    return deps


def choose(group, chosen):
    """One package of an alternative group: one already chosen, else the first real one."""
    real = [n for n in group if not n.startswith("<")]
    for n in real:
        if n in chosen or n in BASE:
            return n
    return real[0] if real else None


def apt_depends(names):
    cmd = ["apt-cache", "depends", "--no-recommends", "--no-suggests", "--no-conflicts",
           "--no-breaks", "--no-replaces", "--no-enhances"] + sorted(names)
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit(f"devkit_resolve: {' '.join(cmd[:2])} failed: {res.stderr.strip()} "
                 "(run 'apt-get update' once first)")
    return parse_depends(res.stdout)


def essential(names):
    res = subprocess.run(["apt-cache", "show", "--no-all-versions"] + sorted(names),
                         capture_output=True, text=True, check=False)
    found, pkg = set(), None
    for line in res.stdout.splitlines():
        if line.startswith("Package: "):
            pkg = line.split(": ", 1)[1].strip()
        elif line.strip() == "Essential: yes" and pkg:
            found.add(pkg)
    return found


def kept(name, skip=frozenset()):
    """Whether the kit carries this package (BASE and NOT_NEEDED are left out)."""
    return bool(name) and name not in BASE and name not in skip and not NOT_NEEDED.match(name)


def resolve(roots, skip):
    chosen, todo = set(), [r for r in roots if kept(r, skip)]
    while todo:
        batch = [n for n in dict.fromkeys(todo) if n not in chosen]
        todo = []
        batch = [n for n in batch if n not in essential(batch)]
        chosen.update(batch)
        for i in range(0, len(batch), CHUNK):
            for groups in apt_depends(batch[i:i + CHUNK]).values():
                for g in groups:
                    n = choose(g, chosen)
                    if kept(n, skip) and n not in chosen:
                        todo.append(n)
    return sorted(chosen)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip", action="append", default=[], help="leave this package out")
    ap.add_argument("--parse", metavar="FILE", help="print the choices in a saved output")
    ap.add_argument("packages", nargs="*")
    a = ap.parse_args()
    if a.parse:
        with open(a.parse, encoding="utf-8") as f:
            for pkg, groups in parse_depends(f.read()).items():
                names = (choose(g, set()) for g in groups)
                print(pkg + ": " + " ".join(n if kept(n) else f"({n})" for n in names))
        return 0
    if not a.packages:
        ap.error("name at least one package")
    print("\n".join(resolve(a.packages, set(a.skip))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
