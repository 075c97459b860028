#!/usr/bin/env python3
"""Checks spack/spack_repo/omgs/packages/omgs/package.py against the CMake build.

The recipe cannot be run here (no Spack, no network), so it is parsed with `ast` and
compared with the options the CMake files really define:
  - every CMake variable the recipe defines (self.define / define_from_variant) exists as an
    option() or cache variable of the build (or is a standard CMake / Kokkos variable);
  - every OMGS_ENABLE_* option of the build is set by the recipe, unless it is a developer
    option listed below;
  - every variant named in define_from_variant exists;
  - the required base classes, dependencies, methods and the repository layout are there;
  - the recipe's directives pass the dependency rules of `spack audit packages` (variants,
    values, versions of kokkos and kokkos-kernels): audit_dependencies.py;
  - per backend, the compiler cmake_args() picks (nvcc_wrapper, hipcc, the host compiler)
    and the Kokkos / Kokkos Kernels variants asked for: device_specs.py.

  check_package.py [--spack-packages DIR [--write-snapshot]]
DIR (or $OMGS_SPACK_PACKAGES) is a spack/spack-packages checkout to audit against instead of
the snapshot; --write-snapshot records it in builtin_snapshot.json.
"""
import argparse
import json
import ast
import os
import re
import sys

import audit_dependencies
import device_specs

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PACKAGE = os.path.join(ROOT, "spack", "spack_repo", "omgs", "packages", "omgs", "package.py")
REPO_YAML = os.path.join(ROOT, "spack", "spack_repo", "omgs", "repo.yaml")
STANDARD_VARIABLES = {"BUILD_SHARED_LIBS", "CMAKE_CXX_COMPILER", "Kokkos_ROOT",
                      "KokkosKernels_ROOT", "MPIEXEC_EXECUTABLE", "MPIEXEC_NUMPROC_FLAG",
                      "MPIEXEC_PREFLAGS"}
DEVELOPER_OPTIONS = {"OMGS_ENABLE_WARNINGS_AS_ERRORS"}  # not for installs
REQUIRED_DEPENDENCIES = ["cxx", "mpi", "kokkos@3.4:4", "kokkos-kernels@3.4:4", "hwloc@2:", "catch2"]
REQUIRED_VARIANTS = {"openmp", "hwloc", "examples", "shared"}

errors = []


def error(msg):
    errors.append(msg)


def cmake_options():
    names = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "build")) and d != "spack"]
        for f in filenames:
            if f == "CMakeLists.txt" or f.endswith(".cmake"):
                text = open(os.path.join(dirpath, f)).read()
                names.update(re.findall(r"\boption\(\s*([A-Za-z0-9_]+)", text))
                names.update(re.findall(r"\bset\(\s*([A-Za-z0-9_]+)\s+[^)]*\bCACHE\b", text))
    return names


def literal(node):
    return node.value if isinstance(node, ast.Constant) else None


def main():
    tree = ast.parse(open(PACKAGE).read(), PACKAGE)
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
    if len(classes) != 1 or classes[0].name != "Omgs":
        error("package.py must define exactly one class, Omgs")
        return
    cls = classes[0]
    bases = {b.id for b in cls.bases if isinstance(b, ast.Name)}
    for b in ("CMakePackage", "CudaPackage", "ROCmPackage"):
        if b not in bases:
            error(f"Omgs must derive from {b}")
    imports = {(n.module, a.name) for n in tree.body if isinstance(n, ast.ImportFrom) for a in n.names}
    for mod, name in [("spack_repo.builtin.build_systems.cmake", "CMakePackage"),
                      ("spack_repo.builtin.build_systems.cuda", "CudaPackage"),
                      ("spack_repo.builtin.build_systems.rocm", "ROCmPackage")]:
        if (mod, name) not in imports:
            error(f"missing 'from {mod} import {name}' (Spack package API v2)")

    variants, depends, defines, from_variant = set(), [], set(), []
    methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    versions = []
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else (f.attr if isinstance(f, ast.Attribute) else None)
        args = [literal(a) for a in node.args]
        if name == "variant" and args and args[0]:
            variants.add(args[0])
        elif name == "version" and args:
            versions.append(args[0])
        elif name == "depends_on" and node.args:
            if isinstance(node.args[0], ast.Constant):
                depends.append(node.args[0].value)
            elif isinstance(node.args[0], ast.JoinedStr):
                depends.append("".join(v.value for v in node.args[0].values if isinstance(v, ast.Constant)))
        elif name == "define" and isinstance(f, ast.Attribute) and args and args[0]:
            defines.add(args[0])
        elif name == "define_from_variant" and len(args) >= 2 and args[0]:
            defines.add(args[0])
            from_variant.append((args[0], args[1]))

    options = cmake_options()
    for d in sorted(defines):
        if d not in options and d not in STANDARD_VARIABLES:
            error(f"package.py sets {d}, which the CMake build does not define")
    for cmake_name, variant in from_variant:
        if variant not in variants:
            error(f"define_from_variant({cmake_name!r}, {variant!r}): no variant {variant!r}")
    for opt in sorted(o for o in options if o.startswith("OMGS_ENABLE_")):
        if opt not in defines and opt not in DEVELOPER_OPTIONS:
            error(f"the CMake option {opt} is not set by package.py")
    for v in sorted(REQUIRED_VARIANTS - variants):
        error(f"missing variant {v!r}")
    # "kokkos@4:+openmp when=..." -> "kokkos@4:": the package name and version range.
    dep_heads = {d.split()[0].split("+")[0].split("~")[0] for d in depends if d}
    for dep in REQUIRED_DEPENDENCIES:
        if dep not in dep_heads:
            error(f"missing depends_on({dep!r})")
    if "main" not in versions:
        error("missing version('main')")
    for m in ("cmake_args", "check"):
        if m not in methods:
            error(f"missing method {m}()")
    if not any(m.startswith("test_") for m in methods):
        error("missing a test_* method for `spack test run`")
    text = open(PACKAGE).read()
    if "kokkos_cxx" not in text:
        error("CMAKE_CXX_COMPILER must come from spec['kokkos'].kokkos_cxx for device builds")
    if not any("cuda_lambda" in d for d in depends):
        error("Kokkos 4 + CUDA needs depends_on('kokkos+cuda_lambda', when='+cuda')")
    if not any("cuda_arch=" in d for d in depends) or not any("amdgpu_target=" in d for d in depends):
        error("cuda_arch / amdgpu_target must be propagated to Kokkos")
    # The programs the spack tests run must be programs the build installs (or the consumer
    # projects the tests build).
    installed = set()
    consumers = [os.path.join("tests", "consumer", d) for d in ("cxx", "c")]
    for sub in ["examples", os.path.join("src", "tools")] + consumers:
        cm = open(os.path.join(ROOT, sub, "CMakeLists.txt")).read()
        installed |= set(re.findall(r"add_executable\(\s*([A-Za-z0-9_-]+)", cm))
    for prog in sorted(set(re.findall(r'"(omgs-[a-z-]+)"', text))):
        if prog not in installed:
            error(f"package.py runs {prog}, which the build does not make")
    repo = open(REPO_YAML).read()
    if not re.search(r"^\s*namespace:\s*omgs\s*$", repo, re.M) or not re.search(r"api:\s*v2\.0", repo):
        error("repo.yaml must declare namespace: omgs and api: v2.0")

    print(f"variants: {sorted(variants)}")
    print(f"cmake variables set: {sorted(defines)}")
    print(f"OMGS options in the build: {sorted(o for o in options if o.startswith('OMGS_'))}")



def audit(args):
    spack_packages = args.spack_packages or os.environ.get("OMGS_SPACK_PACKAGES")
    snapshot = audit_dependencies.load_snapshot(spack_packages)
    if args.write_snapshot:
        if not spack_packages:
            error("--write-snapshot needs --spack-packages DIR")
            return
        with open(audit_dependencies.SNAPSHOT, "w") as f:
            json.dump(snapshot, f, indent=1, sort_keys=True)
            f.write("\n")
    recipe = audit_dependencies.load_recipe(ROOT, snapshot, spack_packages)
    problems = audit_dependencies.audit(recipe, snapshot)
    for p in audit_dependencies.self_test(snapshot):
        error(p)
    for p in problems:
        error(f"audit: {p}")
    print(f"audit against spack-packages {snapshot['spack_packages_commit'][:12]}"
          f" ({'checkout' if spack_packages else 'snapshot'}): {len(problems)} problem(s),"
          f" {len(recipe.directives)} directives read")
    choices = device_specs.check(recipe)
    reasons, wrong = device_specs.device_reasons(recipe)
    for text, reason in reasons.items():
        print(f"spack test run of omgs{text}: {'runs' if reason is None else 'SKIPPED: ' + reason}")
    for p in choices + wrong + device_specs.self_test(recipe):
        error(f"device specs: {p}")
    print(f"compiler and Kokkos Kernels variants per backend: {len(choices)} problem(s) in"
          f" {len(device_specs.CASES)} specs ({', '.join('omgs' + c[0] for c in device_specs.CASES)})")


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--spack-packages", help="a spack/spack-packages checkout")
parser.add_argument("--write-snapshot", action="store_true")
main()
audit(parser.parse_args())
for e in errors:
    print("error:", e, file=sys.stderr)
sys.exit(1 if errors else 0)
