#!/usr/bin/env python3
"""Writes docs/scale.md and docs/scale/tables.md from the sweeps of scripts/scale-study.sh.

Usage: scale_report.py JSON_DIR INTRO.md OUT.md TABLES.md SVG_REL_DIR SECONDS

JSON_DIR holds one `omgs-plan --workers-sweep --format json` document per model and fabric,
named MODEL__FABRIC.json, and for each node shape MODEL__MACHINE__flat.json and
MODEL__MACHINE__nodes.json (the same P, flat and with --ranks-per-node). INTRO.md
(scripts/scale-study.md: inputs, sources, reading) is copied to the top of OUT.md; the
summary at P = 64, 512 and 4096 and at 8, 64 and 512 nodes follows it, and TABLES.md gets
every P. Python 3 standard library only.
"""

import json
import os
import sys

MODELS = [  # (file stem, label), in the order of the report
    ("gpt2_xl", "GPT-2 XL (1.56 B)"),
    ("llama_7b", "LLaMA-7B (6.74 B)"),
    ("vit_l16", "ViT-L/16 (304 M)"),
    ("resnet50", "ResNet-50 (25.6 M)"),
    ("bert_base", "BERT-base (110 M)"),
    ("gpt2_small", "GPT-2 small (124 M)"),
    ("vgg16", "VGG-16 (138 M)"),
]
FABRICS = [
    ("ethernet_10g", "10 GbE"),
    ("ethernet_25g", "25 GbE"),
    ("infiniband_hdr200", "HDR IB 200G"),
    ("slingshot11", "Slingshot-11 200G"),
    ("infiniband_ndr400", "NDR IB 400G"),
]
SUMMARY_P = [64, 512, 4096]
MACHINES = [  # (file stem, label, ranks per node)
    ("dgx_h100", "DGX H100", 8),
    ("frontier", "Frontier", 8),
    ("aurora", "Aurora", 6),
    ("perlmutter", "Perlmutter", 4),
]
SUMMARY_NODES = [8, 64, 512]


def ms(v):
    return "%.1f" % (1e3 * v) if v < 10 else "%.0f" % (1e3 * v)


def speedup(dense, mixed):
    """'1.74x' when omgs (mixed) is faster, '0.58x' when it is slower."""
    return "**%.2fx**" % (dense / mixed) if dense / mixed >= 1.005 else "%.2fx" % (dense / mixed)


def load(json_dir):
    runs = {}
    for stem, _ in MODELS:
        for fab, _ in FABRICS:
            path = os.path.join(json_dir, "%s__%s.json" % (stem, fab))
            if os.path.exists(path):
                with open(path) as f:
                    runs[(stem, fab)] = json.load(f)
    return runs


def row_cells(r):
    mixed = r["mixed_s"]
    sar = r.get("sparse_allreduce_s")
    return [
        str(r["workers"]),
        ms(r["backward_s"]),
        ms(r["dense_s"]),
        ms(r["dense_bf16_s"]),
        ms(r["mgs_s"]),
        ms(sar) if sar else "-",
        "%s (%d/%d/%d)" % (ms(mixed), r["mixed_dense_groups"],
                           r.get("mixed_sparse_allreduce_groups", 0), r["mixed_groups"]),
        ms(r["exposed_comm_s"]["mixed"]),
        speedup(r["dense_s"], mixed),
        speedup(r["dense_bf16_s"], mixed),
        speedup(r["dense_s"], r["mgs_s"]),
        speedup(r["dense_s"], sar) if sar else "-",
    ]


HEADER = ["P", "backward ms", "dense fp32 ms", "dense bf16 ms", "all-allgather ms",
          "all-sparse-allreduce ms", "mixed ms (dense/sparse allreduce/groups)",
          "mixed exposed comm ms", "mixed vs fp32", "mixed vs bf16", "all-allgather vs fp32",
          "all-sparse-allreduce vs fp32"]


def table(rows, first=None):
    head = ([first] if first else []) + HEADER
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lead, r in rows:
        out.append("| " + " | ".join(([lead] if first else []) + row_cells(r)) + " |")
    return out


def verdict(runs, stem, fab, p):
    r = next((x for x in runs[(stem, fab)]["sweep"] if x["workers"] == p), None)
    if r is None:
        return None
    return r["dense_s"] / r["mixed_s"], r["dense_bf16_s"] / r["mixed_s"], r["dense_s"] / r["mgs_s"]


def headline(runs):
    """One line per model and fabric: mixed vs fp32 / vs bf16 at the summary P."""
    out = ["| model | fabric | " + " | ".join("P = %d: vs fp32 / vs bf16" % p for p in SUMMARY_P)
           + " |", "|---|---|" + "---|" * len(SUMMARY_P)]
    for stem, label in MODELS:
        for fab, flabel in FABRICS:
            if (stem, fab) not in runs:
                continue
            cells = []
            for p in SUMMARY_P:
                v = verdict(runs, stem, fab, p)
                cells.append("-" if v is None else "%.2fx / %.2fx" % (v[0], v[1]))
            out.append("| %s | %s | %s |" % (label, flabel, " | ".join(cells)))
    return out


def load_nodes(json_dir):
    """(model, machine) -> [(flat row, two-level row)] by P, where both sweeps exist."""
    runs = {}
    for stem, _ in MODELS:
        for mach, _, _ in MACHINES:
            docs = []
            for kind in ("flat", "nodes"):
                path = os.path.join(json_dir, "%s__%s__%s.json" % (stem, mach, kind))
                if os.path.exists(path):
                    with open(path) as f:
                        docs.append(json.load(f))
            if len(docs) == 2:
                flat = {r["workers"]: r for r in docs[0]["sweep"]}
                runs[(stem, mach)] = [(flat[r["workers"]], r) for r in docs[1]["sweep"]
                                      if r["workers"] in flat]
    return runs


NODE_HEADER = ["nodes", "P", "backward ms", "flat dense fp32 ms", "2-level dense fp32 ms",
               "2-level dense bf16 ms", "flat mixed ms", "all node-summed ms",
               "mixed ms (two-level/node-summed/groups)", "mixed exposed comm ms", "mixed vs 2-level fp32",
               "mixed vs 2-level bf16", "mixed vs flat mixed", "2-level vs flat dense fp32"]


def node_cells(flat, r):
    mixed = r["mixed_s"]
    return [
        str(r["workers"] // r["ranks_per_node"]),
        str(r["workers"]),
        ms(r["backward_s"]),
        ms(flat["dense_s"]),
        ms(r["dense_s"]),
        ms(r["dense_bf16_s"]),
        ms(flat["mixed_s"]),
        ms(r["sparse_node_s"]),
        "%s (%d/%d/%d)" % (ms(mixed), r["mixed_node_groups"], r["mixed_sparse_node_groups"],
                           r["mixed_groups"]),
        ms(r["exposed_comm_s"]["mixed"]),
        speedup(r["dense_s"], mixed),
        speedup(r["dense_bf16_s"], mixed),
        speedup(flat["mixed_s"], mixed),
        speedup(flat["dense_s"], r["dense_s"]),
    ]


def node_table(rows, first=None):
    head = ([first] if first else []) + NODE_HEADER
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for lead, (flat, r) in rows:
        out.append("| " + " | ".join(([lead] if first else []) + node_cells(flat, r)) + " |")
    return out


def node_section(nodes):
    """The node shapes' headline and tables for OUT.md, and every P for TABLES.md."""
    if not nodes:
        return [], []
    text = ["", "## Node shapes: two levels at 8, 64 and 512 nodes", "",
            "Each machine's file with its ranks per node (`--ranks-per-node`; inputs and "
            "sources in \"Node shapes\" above). *2-level dense*: each group the faster of the "
            "flat and the two-level allreduce (what NCCL does on nodes); *mixed*: omgs' best plan "
            "with the two-level rows allowed per group; *flat*: the same file swept without a "
            "node shape. Speed-ups are the baseline's time over mixed's (above 1: mixed is "
            "faster; *2-level vs flat dense fp32*: the flat ring's over the two-level "
            "baseline's). Times in ms; every node count from 1 to 512: "
            "[scale/tables.md](scale/tables.md#node-shapes-every-p). MODELLED, not measured.",
            "",
            "| model | machine | " + " | ".join(
                "%d nodes: vs 2-level fp32 / bf16 / flat mixed" % n for n in SUMMARY_NODES)
            + " |", "|---|---|" + "---|" * len(SUMMARY_NODES)]
    full = ["", "# Node shapes: every P", ""]
    for stem, label in MODELS:
        for mach, mlabel, g in MACHINES:
            if (stem, mach) not in nodes:
                continue
            cells = []
            for n in SUMMARY_NODES:
                pair = next((x for x in nodes[(stem, mach)] if x[1]["workers"] == n * g), None)
                cells.append("-" if pair is None else "%.2fx / %.2fx / %.2fx" % (
                    pair[1]["dense_s"] / pair[1]["mixed_s"],
                    pair[1]["dense_bf16_s"] / pair[1]["mixed_s"],
                    pair[0]["mixed_s"] / pair[1]["mixed_s"]))
            text.append("| %s | %s | %s |" % (label, mlabel, " | ".join(cells)))
    for mach, mlabel, g in MACHINES:
        have = [(stem, label) for stem, label in MODELS if (stem, mach) in nodes]
        if not have:
            continue
        text += ["", "### %s (%d ranks per node)" % (mlabel, g), ""]
        rows = []
        for stem, label in have:
            rows += [(label, x) for x in nodes[(stem, mach)]
                     if x[1]["workers"] // g in SUMMARY_NODES]
        text += node_table(rows, "model")
        full += ["## %s (%d ranks per node)" % (mlabel, g), ""]
        for stem, label in have:
            full += ["### %s on %s" % (label, mlabel), ""]
            full += node_table([(None, x) for x in nodes[(stem, mach)]]) + [""]
    return text, full


def main(argv):
    json_dir, intro, out_md, tables_md, svg_rel, seconds = argv
    runs = load(json_dir)
    if not runs:
        sys.exit("scale_report.py: no sweeps in " + json_dir)
    with open(intro) as f:
        text = f.read().replace("@SECONDS@", seconds).rstrip("\n").split("\n")
    text += ["", "## Headline: omgs' mixed plan against dense, P = 64, 512, 4096", "",
             "Speed-up of the predicted iteration (dense / mixed: above 1, omgs is faster; "
             "below 1, slower).", ""]
    text += headline(runs)
    text += ["", "## Per model, P = 64, 512, 4096", "",
             "Times in ms. *mixed exposed comm*: the part of mixed's communication not hidden "
             "behind the backward pass (and the top-k). Bold: omgs faster. Every P from 2 to "
             "4096: [scale/tables.md](scale/tables.md).", ""]
    full = ["# Scale study: every P", "",
            "Generated by `scripts/scale-study.sh` with docs/scale.md (inputs and sources "
            "there). Times in ms.", ""]
    for stem, label in MODELS:
        have = [(fab, fl) for fab, fl in FABRICS if (stem, fab) in runs]
        if not have:
            continue
        text += ["### " + label, ""]
        rows = []
        for fab, flabel in have:
            rows += [(flabel, r) for r in runs[(stem, fab)]["sweep"] if r["workers"] in SUMMARY_P]
        text += table(rows, "fabric")
        text += [""] + ["Charts: " + ", ".join("[%s](%s/%s__%s.svg)" % (fl, svg_rel, stem, fab)
                                               for fab, fl in have), ""]
        full += ["## " + label, ""]
        for fab, flabel in have:
            doc = runs[(stem, fab)]
            full += ["### %s on %s" % (label, flabel), "", "`%s`" % doc["describe"], "",
                     "![%s on %s](%s__%s.svg)" % (label, flabel, stem, fab), ""]
            full += table([(None, r) for r in doc["sweep"]]) + [""]
    node_text, node_full = node_section(load_nodes(json_dir))
    text += node_text
    full += node_full
    with open(out_md, "w") as f:
        f.write("\n".join(text) + "\n")
    with open(tables_md, "w") as f:
        f.write("\n".join(full) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
