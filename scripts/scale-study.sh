#!/usr/bin/env bash
# The scale study (docs/scale.md): every bundled model on every example fabric, predicted by
# omgs-plan --workers-sweep for P = 2 ... 4096 with one GPU's top-k model, and on four node
# shapes (DGX H100, Frontier, Aurora, Perlmutter: 1 to 512 nodes, flat and two-level),
# written as docs/scale.md (summary at P = 64, 512, 4096 and at 8, 64, 512 nodes),
# docs/scale/tables.md (every P) and one SVG chart per model and fabric under docs/scale/. Prediction only: nothing is run on a GPU or
# a network; every input is a file of examples/ (docs/scale.md names their sources).
#
#   ./scripts/scale-study.sh [BUILD_DIR]
#
# BUILD_DIR: where omgs-plan is built (default build; built there if missing).
# Environment:
#   GPU        make_models.py --gpu and examples/perf/gpu_topk_<GPU>*.json (default h100)
#   DENSITY    top-k density (default 0.001)
#   WORKERS    the P list (default 2,4,...,4096)
#   OUT        output directory (default docs)
#   OMGS_JOBS  sweeps run at once (default nproc)
#   DENSE_WIRE omgs' own dense groups: fp32 (default) or bf16 / fp16 (omgs-plan --dense-wire;
#              the dense fp32 and bf16 baselines stay as they are)
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

build="${1:-$OMGS_ROOT/build}"
case "$build" in /*) ;; *) build="$PWD/$build" ;; esac  # the sweeps run in a work directory
gpu="${GPU:-h100}"
density="${DENSITY:-0.001}"
workers="${WORKERS:-2,4,...,4096}"
dense_wire="${DENSE_WIRE:-fp32}"
out="${OUT:-$OMGS_ROOT/docs}"
case "$out" in /*) ;; *) out="$PWD/$out" ;; esac
jobs="$(omgs_jobs)"
fabrics=(ethernet_10g ethernet_25g infiniband_hdr200 slingshot11 infiniband_ndr400)
models=(gpt2_xl llama_7b vit_l16 resnet50 bert_base gpt2_small vgg16)
machines=(dgx_h100:8 frontier:8 aurora:6 perlmutter:4)  # node shapes: file:ranks per node

plan="$build/src/tools/omgs-plan"
if [ ! -x "$plan" ]; then
  omgs_log "building omgs-plan in $build"
  cmake --build "$build" --target omgs-plan -j "$jobs" >&2
fi
topk="$(ls "$OMGS_ROOT"/examples/perf/gpu_topk_"$gpu"*.json 2>/dev/null | head -n 1)"
[ -n "$topk" ] || { omgs_log "no examples/perf/gpu_topk_$gpu*.json"; exit 2; }

SECONDS=0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# Relative paths inside the work directory, so that the charts' titles do not name it.
mkdir -p "$work/json" "$out/scale"
python3 "$OMGS_ROOT/examples/models/make_models.py" --gpu "$gpu" --out-dir "$work/models" >&2
ln -s "$OMGS_ROOT/examples/perf" "$work/perf"
cp "$topk" "$work/topk.json"

# One sweep per model and fabric, $jobs at a time. 3e6: the optimal and dense searches'
# budget; on GPT-2 XL it gives the default budget's (3e7) times within 0.3% at a quarter of
# the time (docs/scale.md, "Reproducing"). automatic: each sparse group takes the faster of
# the allgather and the sparse allreduce (issue 33).
export PLAN="$plan" DENSITY_="$density" WORKERS_="$workers" OUT_="$out" DENSE_WIRE_="$dense_wire"
for m in "${models[@]}"; do
  for f in "${fabrics[@]}"; do
    echo "$m $f"
  done
done | (cd "$work" && xargs -P "$jobs" -n 2 bash -c '
  "$PLAN" --model "models/$0.csv" --perf "perf/$1.json" --topk topk.json --density "$DENSITY_" \
    --workers-sweep "$WORKERS_" --optimal-work 3000000 --choice-margin 0 --sparse-exchange automatic --dense-wire "$DENSE_WIRE_" --format json \
    --svg "$OUT_/scale/$0__$1.svg" > "json/$0__$1.json"')
# Node shapes (issue 45): each machine's file (examples/perf/<machine>.json, its intra-node
# link in "node_link") with its ranks per node G, P = G ... 512 G (1 to 512 nodes), swept
# twice: flat (every rank a peer on its share of the NICs, as above) and in two levels
# (--ranks-per-node G: the two-level rows and dense baselines). No charts.
for m in "${models[@]}"; do
  for s in "${machines[@]}"; do
    echo "$m ${s%%:*} ${s##*:}"
  done
done | (cd "$work" && xargs -P "$jobs" -n 3 bash -c '
  for g in 1 "$2"; do
    "$PLAN" --model "models/$0.csv" --perf "perf/$1.json" --topk topk.json --density "$DENSITY_" \
      --workers-sweep "$2,$(($2 * 2)),...,$(($2 * 512))" --ranks-per-node "$g" \
      --optimal-work 3000000 --choice-margin 0 --sparse-exchange automatic \
      --dense-wire "$DENSE_WIRE_" --format json \
      > "json/$0__$1__$([ "$g" = 1 ] && echo flat || echo nodes).json"
  done')
seconds="$SECONDS"
omgs_log "${#models[@]} models x (${#fabrics[@]} fabrics + ${#machines[@]} node shapes x 2) swept in $seconds s ($jobs at a time; load $(cut -d ' ' -f 1 /proc/loadavg))"
python3 "$OMGS_ROOT/scripts/scale_report.py" "$work/json" "$OMGS_ROOT/scripts/scale-study.md" \
  "$out/scale.md" "$out/scale/tables.md" scale "$seconds s on $(nproc) cores (load $(cut -d ' ' -f 1 /proc/loadavg))"
omgs_log "wrote $out/scale.md, $out/scale/tables.md and $out/scale/*.svg"
