#!/usr/bin/env python3
"""Runs omgs-plan --workers-sweep --format json (and --svg) on a scale-study model and fabric
and checks the document: it parses, has every field for every P, and is ordered where it
must be: P rising; dense fp32 and bf16 not falling with P (every collective costs more with
more ranks); bf16 <= fp32; every plan at or above the backward pass; exposed communication
within the iteration; mixed (margin 0) <= dense, mgs and optimal. The chart is well-formed
XML with one line per series."""
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

omgs_plan, model, perf, topk = sys.argv[1:5]
PLANS = ["dense", "dense_bf16", "mgs", "optimal", "mixed"]
with tempfile.TemporaryDirectory() as tmp:
    out = subprocess.run([omgs_plan, "--model", model, "--perf", perf, "--topk", topk,
                          "--density", "0.001", "--workers-sweep", "2,4,...,4096",
                          "--choice-margin", "0", "--optimal-work", "3000000",
                          "--format", "json", "--svg", tmp + "/sweep.svg"],
                         check=True, capture_output=True, text=True).stdout
    root = ET.parse(tmp + "/sweep.svg").getroot()
doc = json.loads(out)
assert doc["topk"] == topk and doc["density"] == 0.001, doc
rows = doc["sweep"]
assert [r["workers"] for r in rows] == [2 ** i for i in range(1, 13)], rows
eps = 1e-9
for prev, r in zip([None] + rows[:-1], rows):
    for p in PLANS:
        t = r[p + "_s"]
        assert t >= r["backward_s"] * (1 - eps), (r["workers"], p, t)
        assert 0 <= r["exposed_comm_s"][p] <= t * (1 + eps), (r["workers"], p)
        assert r["compute_end_s"][p] <= t * (1 + eps), (r["workers"], p)
    assert r["dense_bf16_s"] <= r["dense_s"], r["workers"]
    assert r["mixed_s"] <= min(r["dense_s"], r["mgs_s"], r["optimal_s"]) * (1 + eps), r
    if prev is not None:
        for p in ("dense", "dense_bf16"):
            assert r[p + "_s"] >= prev[p + "_s"] * (1 - eps), (r["workers"], p)
ns = "{http://www.w3.org/2000/svg}"
lines = [t.text for t in root.iter(ns + "title")]
for series in ("dense fp32", "dense bf16", "mgs (all allgather)", "sparse allreduce", "optimal", "mixed",
               "backward pass"):
    assert series in lines, series
print("sweep json ok: %d rows, mixed at P = 4096 %.6f s" % (len(rows), rows[-1]["mixed_s"]))
