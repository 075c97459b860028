"""Loads Spack package recipes without Spack, to read their directives.

A recipe's class body is executed with a stand-in for `spack.package`: the directives
(variant, depends_on, conflicts, requires, version, build_system and `with when(...)`) are
recorded on the class, every other name the module uses starts as an inert placeholder. The build-system base
classes (CMakePackage, CudaPackage, ROCmPackage) come either from a checkout of
spack/spack-packages (executed the same way, so their variants and values are the real
ones) or from a snapshot of them (builtin_snapshot.json), so the check runs without it.
"""
import builtins
import contextlib
import importlib.abc
import importlib.util
import os
import sys
from dataclasses import dataclass

PENDING = []  # directives of the class body being executed
WHEN = []  # the conditions of the enclosing `with when(...)` blocks


@dataclass
class Directive:
    kind: str
    args: tuple
    kwargs: dict
    when: str


class Placeholder:
    """Anything of Spack's that is not a directive: callable, usable as decorator and base."""

    def __call__(self, *args, **kwargs):
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # a decorator
        return Placeholder()

    def __getattr__(self, name):
        return Placeholder()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def __iter__(self):
        return iter(())

    def __mro_entries__(self, bases):
        return (object,)


class PackageMeta(type):
    def __new__(mcs, name, bases, namespace):
        cls = super().__new__(mcs, name, bases, namespace)
        cls.directives = list(PENDING)
        PENDING.clear()
        cls.versions = {str(d.args[0]): d for d in cls.directives if d.kind == "version"}
        return cls

    def all_directives(cls, kind):
        return [d for c in reversed(cls.__mro__) for d in getattr(c, "directives", []) if
                d.kind == kind and "directives" in c.__dict__]

    def variants(cls):
        """name -> the list of allowed values, or None where any value (or a set) is."""
        out = {}
        for d in cls.all_directives("variant"):
            values = d.kwargs.get("values")
            if isinstance(values, (tuple, list)) and all(isinstance(v, str) for v in values):
                out[d.args[0]] = list(values)
            else:
                out.setdefault(d.args[0], None)
        return out


class PackageBase(metaclass=PackageMeta):
    pass


def _directive(kind):
    def record(*args, **kwargs):
        when = " ".join(w for w in [*WHEN, kwargs.get("when") or ""] if w)
        PENDING.append(Directive(kind, args, kwargs, when))

    return record


@contextlib.contextmanager
def when(condition):
    WHEN.append(condition)
    try:
        yield
    finally:
        WHEN.pop()


API = {k: _directive(k) for k in ("variant", "depends_on", "conflicts", "requires", "version")}
API.update(when=when, PackageBase=PackageBase)


def build_system(*names, default=None):
    """Spack's build_system directive: the variant build_system=<one of names>."""
    PENDING.append(Directive("variant", ("build_system",), {"values": names}, ""))


API["build_system"] = build_system


def _names(code):
    """Every global name a module's code (nested code included) may look up."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names(const)
    return names


def placeholders(code):
    """A placeholder for each name that is not a builtin (or is Spack's license directive): what `from spack.package import *`
    would bring is replaced by the star import and by the module's own definitions."""
    return {n: Placeholder() for n in _names(code) if not hasattr(builtins, n) or n == "license"}


class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """spack.*: the stand-in; spack_repo.<ns>.*: files under roots[ns] or stub modules."""

    def __init__(self, roots, stubs):
        self.roots, self.stubs = roots, stubs

    def _file(self, name):
        parts = name.split(".")
        root = self.roots.get(parts[1]) if len(parts) > 1 else None
        if root is None:
            return None
        path = os.path.join(root, *parts[2:])
        if os.path.isdir(path):
            return os.path.join(path, "__init__.py")
        return path + ".py" if os.path.isfile(path + ".py") else None

    def find_spec(self, name, path=None, target=None):
        if name == "spack" or name.startswith("spack."):
            return importlib.util.spec_from_loader(name, self, is_package=True)
        if name != "spack_repo" and not name.startswith("spack_repo."):
            return None
        file = self._file(name)
        if name in self.stubs or file or name.count(".") < 3:
            package = not file or file.endswith("__init__.py")
            return importlib.util.spec_from_loader(name, self, is_package=package)
        return None

    def exec_module(self, module):
        name = module.__name__
        if name == "spack" or name.startswith("spack."):
            module.__dict__.update(API, __all__=list(API))
            module.__getattr__ = lambda attr: Placeholder()
            return
        if name in self.stubs:
            module.__dict__.update(self.stubs[name])
            return
        path = self._file(name)
        if path and os.path.isfile(path):
            code = compile(open(path).read(), path, "exec")
            module.__dict__.update(placeholders(code))
            exec(code, module.__dict__)


def stub_build_systems(snapshot):
    """Modules spack_repo.builtin.build_systems.* with the base classes of the snapshot."""
    modules = {}
    for cls_name, info in snapshot["base_classes"].items():
        attrs = {k: tuple(v) for k, v in info["attributes"].items()}
        cls = PackageMeta(cls_name, (PackageBase,), attrs)
        cls.directives = [Directive("variant", (n,), {"values": v}, "")
                          for n, v in info["variants"].items()]
        modules.setdefault(f"spack_repo.builtin.build_systems.{info['module']}", {})[cls_name] = cls
    return modules


def load_module(module_name, roots, stubs=None):
    """Imports spack_repo.<...> (and what it imports) with the stand-in for Spack."""
    finder = Finder(roots, stubs or {})
    sys.meta_path.insert(0, finder)
    saved = {k: v for k, v in sys.modules.items() if k.split(".")[0] in ("spack", "spack_repo")}
    try:
        return importlib.import_module(module_name)
    finally:
        sys.meta_path.remove(finder)
        for k in [k for k in sys.modules if k.split(".")[0] in ("spack", "spack_repo")]:
            del sys.modules[k]
        sys.modules.update(saved)


def package_class(module):
    """The package class a package.py defines."""
    return next(v for v in vars(module).values()
                if isinstance(v, PackageMeta) and v.__module__ == module.__name__)
