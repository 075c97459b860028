"""The recipe's choices per backend, checked without Spack's concretizer.

For each documented spec (`omgs+openmp`, `omgs+cuda cuda_arch=90`, `omgs+rocm
amdgpu_target=gfx90a`, ...) this works out what the recipe asks of kokkos and kokkos-kernels
(the union of its depends_on directives whose `when` holds, conditions on ^kokkos included,
to a fixed point) and runs the recipe's own cmake_args() against a spec made of those
constraints, with kokkos' kokkos_cxx computed the way the builtin kokkos recipe computes it
(nvcc_wrapper with +wrapper, else Spack's C++ compiler). It then checks the compiler each
backend gets and the Kokkos Kernels variants omgs-train-mlp needs. This is a model of the
concretizer for these few directives only: conflicts inside Kokkos, compiler and CUDA
version limits need `spack spec`.
"""
import re

from audit_dependencies import parse_spec

SPACK_CXX = "/spack/lib/spack/env/gcc/g++"  # stands for Spack's compiler wrapper
NVCC_WRAPPER = "/kokkos-nvcc-wrapper/bin/nvcc_wrapper"
HIPCC = "/hip/bin/hipcc"


class Node:
    """One package of the spec: its variants (True/False or a set of values), its compiler."""

    def __init__(self, name, variants, compiler="gcc"):
        self.name, self.variants, self.compiler = name, dict(variants), compiler
        self.prefix = f"/spack/opt/{name}"

    def satisfies(self, variants):
        for k, v in variants.items():
            have = self.variants.get(k, False)
            if v is None and have is not True:  # +k
                return False
            if v == "~" and have not in (False, None):
                return False
            if v not in (None, "~") and not set(v.split(",")) <= (
                    have if isinstance(have, set) else {str(have)}):
                return False
        return True

    def constrain(self, variants):
        for k, v in variants.items():
            if v is None:
                self.variants[k] = True
            elif v == "~":
                self.variants[k] = False
            else:
                old = self.variants.get(k)
                self.variants[k] = (old if isinstance(old, set) else set()) | set(v.split(","))


def _variants(text):
    """parse_spec's variants, with ~x written as {x: "~"} (parse_spec keeps only +x)."""
    nodes = parse_spec(text)
    for i, part in enumerate(text.split("^")):
        for off in re.findall(r"~([\w-]+)", part):
            nodes[i][2][off] = "~"
    return nodes


class Spec:
    """omgs and its dependencies, answering what cmake_args() asks (satisfies, [name])."""

    def __init__(self, nodes):
        self.nodes = nodes

    def satisfies(self, text):
        for i, part in enumerate(text.split("^")):
            compiler = re.search(r"%(?:cxx=)?([\w-]+)", part)
            name, _, variants = _variants(re.sub(r"%\S+", "", part))[0]
            node = self.nodes.get(name or ("omgs" if i == 0 else None))
            if node is None or not node.satisfies(variants):
                return False
            if compiler and node.compiler != compiler.group(1):
                return False
        return True

    def __getitem__(self, name):
        node = self.nodes[name]
        if name == "hip":
            node.hipcc = HIPCC
        return node


class Package:
    """The `self` of cmake_args(): define, define_from_variant, self[dep].kokkos_cxx."""

    run_tests = False

    def __init__(self, recipe, spec):
        self.recipe, self.spec = recipe, spec

    def __getattr__(self, name):  # the recipe's own helpers, e.g. self._cxx_compiler()
        return getattr(self.recipe, name).__get__(self)

    def define(self, name, value):
        return (name, value)

    def define_from_variant(self, name, variant):
        return (name, self.spec.nodes["omgs"].variants.get(variant))

    def __getitem__(self, name):
        node = self.spec.nodes[name]
        if name == "kokkos":  # the builtin kokkos recipe's kokkos_cxx property
            node.kokkos_cxx = NVCC_WRAPPER if node.variants.get("wrapper") else SPACK_CXX
        return node


def concretize(recipe, text, kokkos_compiler="gcc"):
    """omgs' spec `text` and what the recipe's directives ask of its dependencies."""
    _, _, asked = _variants(text)[0]
    omgs = Node("omgs", {})
    for d in recipe.all_directives("variant"):  # defaults, conditional ones included
        default = d.kwargs.get("default", False)
        omgs.variants[d.args[0]] = default if isinstance(default, bool) else None
    omgs.constrain(asked)
    nodes = {"omgs": omgs, "kokkos": Node("kokkos", {}, kokkos_compiler),
             "kokkos-kernels": Node("kokkos-kernels", {}), "hip": Node("hip", {})}
    spec = Spec(nodes)
    applied = set()
    while True:  # conditions on ^kokkos may hold once other directives applied
        new = [d for d in recipe.all_directives("depends_on")
               if id(d) not in applied and (not d.when or spec.satisfies(d.when))]
        if not new:
            return spec
        for d in new:
            applied.add(id(d))
            name, _, variants = _variants(d.args[0])[0]
            if name in nodes:
                nodes[name].constrain(variants)


# spec, Kokkos' compiler -> the CMAKE_CXX_COMPILER expected, and Kokkos / Kokkos Kernels
# variants the spec must carry.
CASES = [
    ("+openmp", "gcc", SPACK_CXX, "+openmp", "+openmp+execspace_openmp scalars=float layouts=right"),
    ("+cuda cuda_arch=90", "gcc", NVCC_WRAPPER, "+cuda+wrapper+cuda_lambda cuda_arch=90",
     "+cuda+execspace_cuda+memspace_cudaspace cuda_arch=90 scalars=float layouts=right"),
    ("+rocm amdgpu_target=gfx90a", "gcc", HIPCC, "+rocm amdgpu_target=gfx90a",
     "scalars=float layouts=right"),
    ("+rocm amdgpu_target=gfx90a", "clang", SPACK_CXX, "+rocm", ""),
    ("+cuda cuda_arch=80 ~kernels_eti", "gcc", NVCC_WRAPPER, "+cuda+wrapper cuda_arch=80",
     "+cuda cuda_arch=80"),
]


def check(recipe, cases=CASES):
    """The errors for each case; [] when the recipe makes the expected choices."""
    errors = []
    for text, compiler, cxx, kokkos, kernels in cases:
        spec = concretize(recipe, text, compiler)
        where = f"omgs{text} ^kokkos%{compiler}"
        args = dict(recipe.cmake_args(Package(recipe, spec)))
        if args.get("CMAKE_CXX_COMPILER") != cxx:
            errors.append(f"{where}: CMAKE_CXX_COMPILER is {args.get('CMAKE_CXX_COMPILER')}, "
                          f"expected {cxx}")
        for name, wanted in (("kokkos", kokkos), ("kokkos-kernels", kernels)):
            if not spec.nodes[name].satisfies(_variants(wanted)[0][2]):
                errors.append(f"{where}: {name} is asked for {spec.nodes[name].variants}, "
                              f"which is not {wanted}")
        if "kernels_eti" in text and "scalars" in spec.nodes["kokkos-kernels"].variants:
            errors.append(f"{where}: Kokkos Kernels' scalars are constrained")
    return errors


def device_reasons(recipe):
    """The recipe's _no_device() on this machine for a host, a CUDA and a ROCm spec: None
    for the host spec; for the device specs None only where such a device is usable."""
    reasons = {text: recipe._no_device(Package(recipe, concretize(recipe, text)))
               for text in ("+openmp", "+cuda cuda_arch=90", "+rocm amdgpu_target=gfx90a")}
    errors = [] if reasons["+openmp"] is None else [f"omgs+openmp: skipped ({reasons['+openmp']})"]
    return reasons, errors


def self_test(recipe):
    """A recipe that gives +rocm the host compiler (the issue-21 bug) must be reported."""

    class HostCompilerOnly(recipe):
        def cmake_args(self):
            return [self.define("CMAKE_CXX_COMPILER", self["kokkos"].kokkos_cxx)]

    found = check(HostCompilerOnly, CASES[2:3])
    if not any("expected /hip/bin/hipcc" in e for e in found):
        return [f"self-test: the +rocm compiler check misses the host compiler ({found})"]
    return []
