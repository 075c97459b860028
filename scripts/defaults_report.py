#!/usr/bin/env python3
"""The defaults check's table (scripts/defaults-check.sh): one row per model x hosts x rate,
the runtime's default row against the best fixed configuration of the same run.

    python3 scripts/defaults_report.py OUT > defaults.md
"""
import pathlib
import re
import sys

CONFIG = re.compile(r"^\s+(\S+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s+x ([0-9.]+)")
NAME = re.compile(r"defaults\.(.+)\.(\d+)\.(\w+)\.log$")


def cell(path):
    """The configurations of one log: name -> (min, median, max), and the loads."""
    text = path.read_text(errors="replace")
    rows, inside = {}, False
    for line in text.splitlines():
        if line.startswith("configurations, alternated"):
            inside = True
            continue
        if inside:
            m = CONFIG.match(line)
            if not m:
                inside = False
                continue
            rows[m.group(1)] = tuple(float(m.group(i)) for i in (2, 3, 4))
    loads = re.findall(r"ended at load ([0-9.]+)", text)
    defaults = re.search(r"the runtime's defaults: ([^;]*?)(?:, settled on (\w+))?(?:;|$)", text,
                         re.M)
    return rows, loads, defaults.group(1) if defaults else "?"


def main(out):
    def order(path):
        model, hosts, rate = NAME.search(path.name).groups()
        digits = re.match(r"[0-9]+", rate)
        return (model, int(digits.group(0)) if digits else 0, rate, int(hosts))

    files = sorted(pathlib.Path(out).glob("defaults.*.log"), key=order)
    print("| model | hosts | rate | default: median s (min-max) | best fixed | its median s "
          "(min-max) | default / best | verdict | all-dense plan / default | load at the end |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for f in files:
        model, hosts, rate = NAME.search(f.name).groups()
        rows, loads, _ = cell(f)
        if "default" not in rows:
            print(f"| {model} | {hosts} | {rate} | no table (failed or running) | | | | | | |")
            continue
        fixed = {k: v for k, v in rows.items() if k != "default"}
        best = min(fixed, key=lambda k: fixed[k][1])
        d, b = rows["default"], fixed[best]
        ratio = d[1] / b[1]
        dense = f"{rows['dense'][1] / d[1]:.2f}x" if "dense" in rows else "-"
        verdict = ("within 5%" if ratio <= 1.05 else
                   "inside the best's spread" if d[1] <= b[2] else
                   f"{(ratio - 1) * 100:.0f}% behind")
        print(f"| {model} | {hosts} | {rate} | {d[1]:.4f} ({d[0]:.4f}-{d[2]:.4f}) | {best} | "
              f"{b[1]:.4f} ({b[0]:.4f}-{b[2]:.4f}) | {ratio:.3f} | {verdict} | {dense} | "
              f"{loads[-1] if loads else '?'} |")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: defaults_report.py OUT")
    main(sys.argv[1])
