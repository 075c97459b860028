#!/usr/bin/env python3
"""The model check's table in Markdown, from the logs of scripts/model-check.sh.

    python3 scripts/model_check_report.py OUT_DIR

One row per (link rate, P, collective and wire, elements) of OUT_DIR/collectives.P.RATE.log:
the calibrated prediction, the runtime's measured median (min-max), its error against the
prediction, and where the benchmark timed it the bare MPI operation with the two parts of the
error: the fit's (bare against predicted) and the runtime path's (measured against bare).
"""
import glob
import math
import os
import re
import sys


def rows(path):
    for line in open(path):
        f = line.split()
        # name words, elements, k, predicted, min, median, max, error%, bare
        if len(f) < 9 or not re.fullmatch(r"[+-]\d+%", f[-2]):
            continue
        name = " ".join(f[:-8])
        n, _k, pred, lo, med, hi, _err, bare = f[-8:]
        yield name, int(n), float(pred), float(lo), float(med), float(hi), float(bare)


def pct(a, b):
    return f"{100.0 * (a / b - 1.0):+.0f}%" if b > 0 else "-"


def main():
    out = sys.argv[1]
    logs = []
    for path in glob.glob(os.path.join(out, "collectives.*.log")):
        m = re.match(r"collectives\.(\d+)\.(\w+)\.log", os.path.basename(path))
        if m:
            logs.append((m.group(2), int(m.group(1)), path))
    print("| rate | P | collective, wire | elements | predicted s | measured s, median (min-max) "
          "| error | bare s | fit error (bare vs predicted) | runtime path (measured vs bare) |")
    print("|---|---:|---|---:|---:|---|---:|---:|---:|---:|")
    for rate, p, path in sorted(logs):
        for name, n, pred, lo, med, hi, bare in rows(path):
            has_bare = not math.isnan(bare)
            print(f"| {rate} | {p} | {name} | {n:.0e} | {pred:.4f} | {med:.4f} ({lo:.4f}-{hi:.4f}) "
                  f"| {pct(med, pred)} | {f'{bare:.4f}' if has_bare else '-'} "
                  f"| {pct(bare, pred) if has_bare else '-'} | {pct(med, bare) if has_bare else '-'} |")


if __name__ == "__main__":
    main()
