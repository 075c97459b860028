#!/usr/bin/env python3
"""Runs omgs-plan --svg and checks the chart: well-formed XML, one block per planner, three
lanes (compute, top-k, communication) of one bar per group each."""
import json
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

omgs_plan, model = sys.argv[1], sys.argv[2]
base = ["--model", model, "--workers", "4", "--density", "0.01"]
with tempfile.TemporaryDirectory() as tmp:
    svg = tmp + "/plan.svg"
    subprocess.run([omgs_plan, *base, "--planner", "all", "--svg", svg], check=True,
                   stdout=subprocess.DEVNULL)
    root = ET.parse(svg).getroot()
plans = json.loads(subprocess.run([omgs_plan, *base, "--planner", "all", "--format", "json"],
                                  check=True, capture_output=True, text=True).stdout)["plans"]
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
titles = [t.text for t in root.iter(ns + "title")]
texts = "".join("".join(t.itertext()) for t in root.iter(ns + "text"))
expected = 0
for name, plan in plans.items():
    assert f"{name} (predicted)" in texts, f"no block for {name}"
    expected += 3 * len(plan["groups"])
assert len(titles) == expected, f"{len(titles)} bars, expected {expected}"
for lane in ("compute", "top-k", "communication"):
    assert any(lane in t for t in titles), lane
print(f"svg ok: {len(plans)} planners, {expected} bars")
