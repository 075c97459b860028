#!/usr/bin/env python3
"""Cross-checks omgs-plan's MGS groups against the specification itself.

The seed (shared/seed/mgs_reference.py) is Python taken from the original OMGS-SGD code.
This script runs it unchanged, with the reference performance model of the original code
and the context it assumes (self._seq_layernames, ...), on random models and on the bundled
ones, runs `omgs-plan --format json` on the same inputs, and requires identical groups.
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import types

SMALL = {2: (1.6e-3, 1.0e-8), 4: (2.7e-3, 1.3e-8), 8: (4.0e-3, 1.5e-8), 16: (1.7e-3, 1.7e-8)}
LARGE = {2: (4.4e-3, 5.8e-9), 4: (5.6e-3, 7.4e-9), 8: (7.68e-3, 8.2e-9), 16: (2.1e-3, 1.7e-8)}


def topk_perf_model(x):
    if x == 0:
        return 0
    return 2.18896957e-10 * x * math.log2(x)


def allgather_perf_model(x, P, density):
    if x == 0:
        return 0
    size = x * P * 4 * density
    a, b = SMALL[P] if size < 1024 * 1024 else LARGE[P]
    return (a + b * size) * 2


def load_seed(path, workers):
    ns = {
        "utils": types.SimpleNamespace(topk_perf_model=topk_perf_model,
                                       allgather_perf_model=allgather_perf_model),
        "size": lambda: workers["P"],
    }
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), ns)
    return ns["_generate_groups_mgs"]


class Tensor:
    def __init__(self, n):
        self.data = types.SimpleNamespace(numel=lambda: n)


def seed_groups(fn, layers, density):
    self = types.SimpleNamespace(
        _seq_layernames=[name for name, _, _ in layers],
        _named_parameters={name: Tensor(n) for name, n, _ in layers},
        _layerwise_times=[t for _, _, t in layers],
        _density=density)
    groups, _ = fn(self)
    return groups


def read_csv(path):
    layers = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#") or line.startswith("name,"):
                continue
            name, n, t = line.split(",")
            layers.append((name, int(n), float(t)))
    return layers


def omgs_groups(exe, layers, workers, density, tmpdir):
    path = os.path.join(tmpdir, "model.csv")
    with open(path, "w") as f:
        f.write("name,numel,backward_s\n")
        for name, n, t in layers:
            f.write(f"{name},{n},{t!r}\n")
    out = subprocess.run([exe, "--model", path, "--workers", str(workers), "--density",
                          repr(density), "--perf", "reference", "--planner", "mgs",
                          "--format", "json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)["groups"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", required=True, help="path of mgs_reference.py")
    ap.add_argument("--omgs-plan", required=True)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "examples", "models"))
    args = ap.parse_args()
    workers = {"P": 2}
    fn = load_seed(args.seed, workers)
    rng = random.Random(2020)
    cases = []
    for i in range(args.cases):
        L = rng.randint(2, 80) if i % 10 else rng.randint(200, 600)
        layers = []
        for l in range(L):
            n = rng.randint(1, 4096) if rng.random() < 0.3 else rng.randint(1, 20_000_000)
            r = rng.random()
            t = 0.0 if r < 0.1 else (1e-3 if r < 0.2 else rng.uniform(0, 5e-3))
            layers.append((f"t{l}", n, t))
        cases.append((f"random#{i}", layers, rng.choice([2, 4, 8, 16]),
                      rng.choice([0.001, 0.005, 0.01, 0.05, 0.3])))
    for name in sorted(os.listdir(args.models)):
        if name.endswith(".csv"):
            layers = read_csv(os.path.join(args.models, name))
            for P in (2, 4, 8, 16):
                for d in (0.001, 0.01):
                    cases.append((f"{name} P={P} d={d}", layers, P, d))
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for label, layers, P, d in cases:
            workers["P"] = P
            want = seed_groups(fn, layers, d)
            got = omgs_groups(args.omgs_plan, layers, P, d, tmp)
            if want != got:
                failures += 1
                print(f"MISMATCH {label}: seed {len(want)} groups, omgs {len(got)}", file=sys.stderr)
                for g, (a, b) in enumerate(zip(want, got)):
                    if a != b:
                        print(f"  first difference at group {g}: seed {a[:6]} omgs {b[:6]}",
                              file=sys.stderr)
                        break
    print(f"{len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
