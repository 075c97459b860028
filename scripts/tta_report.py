#!/usr/bin/env python3
"""Time to accuracy: the table and the plot of scripts/time-to-accuracy.sh's runs.

Usage: tta_report.py DIR [TITLE]

Reads every DIR/*.csv (rows method,seed,epoch,train_s,test_acc from omgs-train-torch --csv and
scripts/tta_ddp.py --csv), prints a Markdown table to stdout and writes DIR/tta.svg. The
target of a seed is dense fp32's final accuracy in that seed (omgs-train-torch's own dense
run, method "dense": every method starts from the same weights and sees the same batches in
a seed) minus 0.5 points; a run's time to target is the training time (evaluation excluded)
at the end of the first epoch whose test accuracy reaches its seed's target. Python 3
standard library only.
"""

import csv
import glob
import os
import sys

LABELS = {  # method in the CSV -> label, colour; in the order of the table
    "dense": ("omgs dense fp32 (MPI_Allreduce)", "#000000"),
    "omgs": ("omgs defaults (top-k 0.01)", "#d62728"),
    "ddp_fp32": ("DDP fp32", "#1f77b4"),
    "ddp_fp16": ("DDP fp16_compress_hook", "#2ca02c"),
    "ddp_bf16": ("DDP bf16_compress_hook", "#17becf"),
    "ddp_powersgd1": ("DDP PowerSGD rank 1", "#ff7f0e"),
    "ddp_powersgd4": ("DDP PowerSGD rank 4", "#9467bd"),
}


def load(directory):
    """{method: {seed: [(epoch, train_s, acc), ...]}}"""
    runs = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.csv"))):
        with open(path) as f:
            for r in csv.DictReader(f):
                curve = runs.setdefault(r["method"], {}).setdefault(int(r["seed"]), [])
                curve.append((int(r["epoch"]), float(r["train_s"]), float(r["test_acc"])))
    for seeds in runs.values():
        for curve in seeds.values():
            curve.sort()
    return runs


def mean(v):
    return sum(v) / len(v)


def spread(v, fmt):
    return (fmt + " (" + fmt + "-" + fmt + ")") % (mean(v), min(v), max(v))


def time_to(curve, target):
    """target: {seed: accuracy}; curve: (seed, [(epoch, train_s, acc)])."""
    seed, points = curve
    return next((t for _, t, acc in points if acc >= target[seed]), None)


def table(runs, target):
    dense_tt = [time_to(c, target) for c in sorted(runs["dense"].items())]
    dense_final = mean([c[-1][2] for c in runs["dense"].values()])
    out = ["| method | seeds | time to target s: mean (min-max) | reached | speed-up vs dense "
           "fp32 (mean; worst seed) | final acc %: mean (min-max) | final gap, points |",
           "|---|---|---|---|---|---|---|"]
    for m in [m for m in LABELS if m in runs] + sorted(set(runs) - set(LABELS)):
        seeds = runs[m]
        tt = [time_to(c, target) for c in sorted(seeds.items())]
        hit = [t for t in tt if t is not None]
        final = [c[-1][2] for c in seeds.values()]
        speed = "-"
        if len(hit) == len(tt) == len(dense_tt) and None not in dense_tt:
            worst = min(d / t for d, t in zip(dense_tt, tt))
            speed = "%.2fx; %.2fx" % (mean(dense_tt) / mean(hit), worst)
        out.append("| %s | %d | %s | %d/%d | %s | %s | %+.2f |" % (
            LABELS.get(m, (m,))[0], len(seeds), spread(hit, "%.0f") if hit else "never",
            len(hit), len(tt), speed, spread(final, "%.2f"), mean(final) - dense_final))
    return out


def per_seed(runs, target, method="omgs"):
    """For every other method: the per-seed ratio of its time to target to `method`'s."""
    if method not in runs:
        return []
    mine = {seed: time_to((seed, c), target) for seed, c in runs[method].items()}
    out = ["", "Per seed, time to target of each method / %s's (above 1: %s sooner):" % (method, method)]
    for m in [m for m in LABELS if m in runs and m != method]:
        cells = []
        for seed in sorted(mine):
            other = time_to((seed, runs[m][seed]), target) if seed in runs[m] else None
            if mine[seed] is None:
                cells.append("seed %d: %s never" % (seed, method))
            elif other is None:
                cells.append("seed %d: other never" % seed)
            else:
                cells.append("seed %d: %.2fx" % (seed, other / mine[seed]))
        out.append("- %s: %s" % (LABELS[m][0], ", ".join(cells)))
    return out


def svg(runs, targets, title, path):
    target = mean(list(targets.values()))
    w, h, left, right, top, bottom = 820, 500, 60, 250, 30, 45
    tmax = max(t for s in runs.values() for c in s.values() for _, t, _ in c) * 1.02
    accs = [a for s in runs.values() for c in s.values() for _, _, a in c]
    lo, hi = min(min(accs), target) - 1, max(accs) + 1
    x = lambda t: left + (w - left - right) * t / tmax
    y = lambda a: top + (h - top - bottom) * (hi - a) / (hi - lo)
    e = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
         'font-family="sans-serif" font-size="12">' % (w, h),
         '<rect width="100%" height="100%" fill="white"/>',
         '<text x="%d" y="18" font-size="14">%s</text>' % (left, title)]
    for i in range(6):
        a, t = lo + (hi - lo) * i / 5, tmax * i / 5
        e.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>' % (left, w - right, y(a), y(a)))
        e.append('<text x="%d" y="%.1f" text-anchor="end">%.0f%%</text>' % (left - 4, y(a) + 4, a))
        e.append('<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>' % (x(t), h - bottom + 16, t))
    e.append('<text x="%d" y="%d" text-anchor="middle">training wall time, s (evaluation excluded)'
             '</text>' % ((left + w - right) / 2, h - 8))
    e.append('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#888" stroke-dasharray="5,4"/>'
             % (left, w - right, y(target), y(target)))
    e.append('<text x="%d" y="%.1f" fill="#888">target %.2f%% (mean)</text>'
             % (w - right + 4, y(target) + 4, target))
    for k, m in enumerate([m for m in LABELS if m in runs]):
        colour = LABELS[m][1]
        for curve in runs[m].values():  # every seed thin: the spread
            pts = " ".join("%.1f,%.1f" % (x(t), y(a)) for _, t, a in curve)
            e.append('<polyline points="%s" fill="none" stroke="%s" stroke-opacity="0.35" '
                     'stroke-width="1"/>' % (pts, colour))
        n = min(len(c) for c in runs[m].values())
        mean_pts = [(mean([c[i][1] for c in runs[m].values()]), mean([c[i][2] for c in runs[m].values()]))
                    for i in range(n)]
        e.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"/>'
                 % (" ".join("%.1f,%.1f" % (x(t), y(a)) for t, a in mean_pts), colour))
        ly = top + 20 + 18 * k
        e.append('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="2.5"/>'
                 % (w - right + 4, w - right + 24, ly, ly, colour))
        e.append('<text x="%d" y="%d">%s</text>' % (w - right + 28, ly + 4, LABELS[m][0][:34]))
    e.append('<text x="%d" y="%d" fill="#555">thick: mean of the seeds; thin: each seed</text>'
             % (w - right + 4, top + 30 + 18 * len(runs)))
    e.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(e) + "\n")


def main(argv):
    directory, title = argv[0], argv[1] if len(argv) > 1 else "Time to accuracy"
    runs = load(directory)
    if "dense" not in runs:
        sys.exit("tta_report.py: no dense runs (omgs-train-torch --csv) in " + directory)
    target = {seed: c[-1][2] - 0.5 for seed, c in runs["dense"].items()}
    print("Targets: dense fp32's final accuracy minus 0.5 points, per seed: %s\n"
          % ", ".join("seed %d %.2f%%" % (s, t) for s, t in sorted(target.items())))
    print("\n".join(table(runs, target) + per_seed(runs, target)))
    svg(runs, target, title, os.path.join(directory, "tta.svg"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
