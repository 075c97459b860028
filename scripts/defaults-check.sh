#!/usr/bin/env bash
# The defaults check (issue 46, docs/planner.md "Defaults"): on the emulated cluster
# (scripts/cluster.sh, as root), for each rate x hosts x model, one main job runs the runtime
# with nothing set (the "default" row: its planner closed-loop, its sparse exchange and pair
# wire) beside every fixed combination of planner x sparse exchange x pair wire, round after
# round, and prints each configuration's median against the best's.
#
#   ./scripts/defaults-check.sh                                     the full matrix
#   HOSTS="2 4" RATES=1gbit MODELS=resnet50 ./scripts/defaults-check.sh      reduced
#
# Environment: HOSTS (2 4 8 16), RATES (1gbit 10gbit), MODELS (resnet50 gpt2_small),
# PLANNERS (mgs,optimal,mgs_mixed,dense), EXCHANGES (allgather,allreduce), WIRES
# (pairs8,bf16), ROUNDS (3), ITERATIONS (6), DENSITY (0.001), NUMEL_SCALE (resnet50 0.25,
# gpt2_small 0.1: the machine's 2 cores run every rank), BACKWARD_SCALE (1; 0.25 from 8
# hosts on, where the ranks outnumber the cores), PER_HOST (1), BUILD (build), OUT (a folder
# for the logs; default a new one). scripts/defaults_report.py OUT writes the Markdown table.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

hosts=(${HOSTS:-2 4 8 16})
rates=(${RATES:-1gbit 10gbit})
models=(${MODELS:-resnet50 gpt2_small})
build="${BUILD:-$OMGS_ROOT/build}"
out="${OUT:-$(mktemp -d /tmp/omgs-defaults-check.XXXXXX)}"
main="$build/examples/omgs-train-synthetic"
[ -x "$main" ] || {
  omgs_log "$main not found: build first (./scripts/test.sh)"
  exit 2
}
mkdir -p "$out"
omgs_log "logs in $out"
status=0
numel_scale() {
  case "$1" in
    resnet50) echo "${NUMEL_SCALE:-0.25}" ;;
    *) echo "${NUMEL_SCALE:-0.1}" ;;
  esac
}
for r in "${rates[@]}"; do
  for n in "${hosts[@]}"; do
    for m in "${models[@]}"; do
      log="$out/defaults.$m.$n.$r.log"
      bw="${BACKWARD_SCALE:-}"
      [ -n "$bw" ] || { [ "$((n * ${PER_HOST:-1}))" -ge 8 ] && bw=0.25 || bw=1; }
      args=(--model "$m" --numel-scale "$(numel_scale "$m")" --backward-scale "$bw"
        --density "${DENSITY:-0.001}" --iterations "${ITERATIONS:-6}" --warmup 1
        --planners "default,${PLANNERS:-mgs,optimal,mgs_mixed,dense}"
        --sparse-exchange "${EXCHANGES:-allgather,allreduce}" --pair-wire "${WIRES:-pairs8,bf16}"
        --rounds "${ROUNDS:-3}" --no-dense --quiet)
      echo "=== $m, $n hosts x ${PER_HOST:-1} ranks, $r (load: $(cut -d' ' -f1-3 /proc/loadavg)):" \
        "omgs-train-synthetic ${args[*]}"
      if ! "$OMGS_ROOT/scripts/cluster.sh" run "$n" --private --rate "$r" \
        --ranks-per-host "${PER_HOST:-1}" -- "$main" "${args[@]}" >"$log" 2>&1; then
        status=1
        echo "  failed; the end of $log:"
        tail -n 5 "$log" | sed 's/^/  /'
        continue
      fi
      echo "  (ended at load $(cut -d' ' -f1-3 /proc/loadavg))" >>"$log"
      sed -n '/^configurations, alternated/,$p' "$log"
    done
  done
done
python3 "$OMGS_ROOT/scripts/defaults_report.py" "$out" >"$out/defaults.md"
omgs_log "the table in Markdown: $out/defaults.md"
exit "$status"
