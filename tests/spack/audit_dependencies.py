"""The part of `spack audit packages` a recipe's dependencies can fail, without Spack.

Spack refuses a directive that names a variant its package does not have ("No such variant
'rocm' in package kokkos-kernels"), a value outside a variant's values, or a version range
no version of the package satisfies. These checks apply the same rules to omgs' recipe,
against the builtin kokkos and kokkos-kernels recipes: read from a spack/spack-packages
checkout when one is given, else from builtin_snapshot.json (written from one by
`check_package.py --spack-packages DIR --write-snapshot`).
"""
import json
import os
import re
import subprocess

from recipe_loader import (Directive, PackageBase, PackageMeta, load_module, package_class,
                           stub_build_systems)

HERE = os.path.dirname(os.path.abspath(__file__))
SNAPSHOT = os.path.join(HERE, "builtin_snapshot.json")
AUDITED = {"kokkos": "spack_repo.builtin.packages.kokkos.package",
           "kokkos-kernels": "spack_repo.builtin.packages.kokkos_kernels.package"}
ARCHITECTURE = {"platform", "os", "target", "arch"}  # key=value parts that are not variants
BASES = {"CMakePackage": ("cmake", []), "CudaPackage": ("cuda", ["cuda_arch_values"]),
         "ROCmPackage": ("rocm", ["amdgpu_targets"])}


def snapshot_from(spack_packages):
    """The variants and versions of the audited packages and base classes, read live."""
    roots = {"builtin": os.path.join(spack_packages, "repos", "spack_repo", "builtin")}
    snap = {"packages": {}, "base_classes": {}}
    try:
        snap["spack_packages_commit"] = subprocess.run(
            ["git", "-C", spack_packages, "rev-parse", "HEAD"], capture_output=True, text=True,
            check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        snap["spack_packages_commit"] = "unknown"
    for name, module in AUDITED.items():
        cls = package_class(load_module(module, roots))
        snap["packages"][name] = {"variants": cls.variants(), "versions": sorted(cls.versions)}
        for base in cls.__mro__:
            if base.__name__ in BASES:
                module_name, attributes = BASES[base.__name__]
                snap["base_classes"][base.__name__] = {
                    "module": module_name, "variants": base.variants(),
                    "attributes": {a: list(getattr(base, a)) for a in attributes}}
    return snap


def load_snapshot(spack_packages=None):
    if spack_packages:
        return snapshot_from(spack_packages)
    with open(SNAPSHOT) as f:
        return json.load(f)


def load_recipe(repo_root, snapshot, spack_packages=None):
    """omgs' package class, its base classes from the checkout or the snapshot."""
    roots = {"omgs": os.path.join(repo_root, "spack", "spack_repo", "omgs")}
    stubs = {}
    if spack_packages:
        roots["builtin"] = os.path.join(spack_packages, "repos", "spack_repo", "builtin")
    else:
        stubs = stub_build_systems(snapshot)
    return package_class(load_module("spack_repo.omgs.packages.omgs.package", roots, stubs))


def parse_spec(text):
    """'kokkos@4: +cuda cuda_arch=90 ^hip' -> [(name or None, version, {variant: value})]."""
    nodes = []
    for part in text.split("^"):
        part = re.sub(r"%\S+", "", part)  # compilers are not variants
        m = re.match(r"\s*([a-z0-9][a-z0-9-]*)?(?:@([\w.:,]+))?", part)
        rest = part[m.end():]
        values = dict(re.findall(r"([\w-]+)==?(\S+)", rest))  # gfx90a:xnack+ is one value
        rest = re.sub(r"[\w-]+==?\S+", "", rest)
        variants = {v: None for v in re.findall(r"[+~]([\w-]+)", rest)}
        variants.update((k, v) for k, v in values.items() if k not in ARCHITECTURE)
        version = m.group(2) or re.search(r"@([\w.:,]+)", rest) and re.search(
            r"@([\w.:,]+)", rest).group(1)
        nodes.append((m.group(1), version, variants))
    return nodes


def _key(version):
    return tuple(int(x) for x in version.split("."))


def satisfiable(constraint, versions):
    """Whether some numeric version satisfies a range list such as '3.4:4' or '4:'."""
    numeric = [_key(v) for v in versions if re.fullmatch(r"\d+(\.\d+)*", v)]
    for part in constraint.split(","):
        lo, sep, hi = part.partition(":")
        for v in numeric:
            if sep and (not lo or v >= _key(lo)) and (not hi or v[:len(_key(hi))] <= _key(hi)):
                return True
            if not sep and v[:len(_key(lo))] == _key(lo):
                return True
    return False


def check_node(where, name, version, variants, known, errors):
    """One spec node against a package's variants and versions (Spack's audit rules)."""
    for variant, value in variants.items():
        if variant not in known["variants"]:
            errors.append(f"{where}: no such variant '{variant}' in package {name}")
            continue
        allowed = known["variants"][variant]
        for v in (value.split(",") if value else []):
            if allowed is not None and v not in allowed:
                errors.append(f"{where}: '{v}' is not a value of {name}'s variant '{variant}'")
    if version and known["versions"] is not None and not satisfiable(version, known["versions"]):
        errors.append(f"{where}: no version of {name} satisfies @{version}")


def audit(recipe, snapshot):
    """The errors `spack audit packages` would report for these rules; [] when clean. Only
    the recipe's own directives: the inherited ones are audited with their classes."""
    errors = []
    own = {"variants": recipe.variants(), "versions": None}  # omgs: branch versions only
    packages = dict(snapshot["packages"], omgs=own)
    dependencies = {parse_spec(d.args[0])[0][0] for d in recipe.all_directives("depends_on")}
    for kind in ("depends_on", "conflicts", "requires", "variant"):
        for d in (d for d in recipe.directives if d.kind == kind):
            specs = [("when", d.when)] if d.when else []
            if kind in ("depends_on", "conflicts", "requires"):
                specs.append((kind, d.args[0]))
            for role, text in specs:
                for i, (name, version, variants) in enumerate(parse_spec(text)):
                    name = name or ("omgs" if i == 0 and role != "depends_on" else name)
                    where = f"{kind}({d.args[0]!r}, when={d.when!r})"
                    if i > 0 and name not in dependencies:
                        errors.append(f"{where}: omgs does not depend on {name}")
                    if name in packages:
                        check_node(where, name, version, variants, packages[name], errors)
    return errors


def self_test(snapshot):
    """The audit must report the directive that broke `spack audit` (issue 17)."""
    bad = PackageMeta("Bad", (PackageBase,), {})
    bad.directives = [Directive("variant", ("rocm",), {}, ""),
                      Directive("depends_on", ("kokkos-kernels+rocm",), {}, "+rocm"),
                      Directive("depends_on", ("kokkos@9:",), {}, "")]
    found = audit(bad, snapshot)
    expected = ["no such variant 'rocm' in package kokkos-kernels",
                "no version of kokkos satisfies @9:"]
    return [f"self-test: the audit misses \"{e}\" ({found})" for e in expected
            if not any(e in f for f in found)]
