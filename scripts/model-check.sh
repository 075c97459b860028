#!/usr/bin/env bash
# The model check (issue 46, docs/model-check.md): on the emulated cluster (scripts/cluster.sh,
# as root), for each hosts x rate, omgs-bench-model-check calibrates the model as the runtime
# does and sets each collective's predicted time beside the time measured in the same run;
# then, for MAIN_HOSTS, the main job's fixed plans: predicted iteration beside measured.
#
#   ./scripts/model-check.sh                                   the full matrix
#   HOSTS="2 4" RATES=1gbit REPS=3 MAIN_HOSTS= ./scripts/model-check.sh     reduced
#
# Environment: HOSTS (2 4 8 16), RATES (1gbit 10gbit), SIZES (1e4,1e5,1e6,1e7), DENSITY
# (0.001), REPS (7), PER_HOST (1: ranks per emulated host), MAIN_HOSTS (2 4), MAIN_MODEL
# (resnet50), MAIN_PLANNERS (layerwise,single,mgs,optimal,dense), BENCH_ARGS (more arguments
# for the benchmark, e.g. --inline), BUILD (build), OUT (a folder for the logs; default a new
# one). The tables are printed as they come; logs stay in OUT.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

hosts=(${HOSTS:-2 4 8 16})
rates=(${RATES:-1gbit 10gbit})
main_hosts=(${MAIN_HOSTS-2 4})
sizes="${SIZES:-1e4,1e5,1e6,1e7}"
build="${BUILD:-$OMGS_ROOT/build}"
out="${OUT:-$(mktemp -d /tmp/omgs-model-check.XXXXXX)}"
bench="$build/tests/benchmarks/omgs-bench-model-check"
main="$build/examples/omgs-train-synthetic"
for exe in "$bench" "$main"; do
  [ -x "$exe" ] || {
    omgs_log "$exe not found: build first (./scripts/test.sh, benchmarks on)"
    exit 2
  }
done
mkdir -p "$out"
omgs_log "logs in $out"
status=0
# run LOG HOSTS RATE COMMAND...: one job on a private emulated cluster, its output in LOG.
run() {
  local log="$1" n="$2" r="$3"
  shift 3
  echo "=== $n hosts x ${PER_HOST:-1} ranks, $r (load: $(cut -d' ' -f1-3 /proc/loadavg)): $*"
  if ! "$OMGS_ROOT/scripts/cluster.sh" run "$n" --private --rate "$r" \
    --ranks-per-host "${PER_HOST:-1}" -- "$@" >"$log" 2>&1; then
    status=1
    echo "  failed; the end of $log:"
    tail -n 5 "$log" | sed 's/^/  /'
    return 0
  fi
}
for r in "${rates[@]}"; do
  for n in "${hosts[@]}"; do
    log="$out/collectives.$n.$r.log"
    run "$log" "$n" "$r" "$bench" --sizes "$sizes" --density "${DENSITY:-0.001}" \
      --reps "${REPS:-7}" --save "$out/model.$n.$r.json" ${BENCH_ARGS:-} &&
      grep -v '^\[' "$log" || true
  done
  for n in "${main_hosts[@]}"; do
    log="$out/main.$n.$r.log"
    run "$log" "$n" "$r" "$main" --model "${MAIN_MODEL:-resnet50}" --iterations "${REPS:-7}" \
      --warmup 1 --planners "${MAIN_PLANNERS:-layerwise,single,mgs,optimal,dense}" &&
      sed -n '/timed iterations each/,$p' "$log" || true
  done
done
python3 "$OMGS_ROOT/scripts/model_check_report.py" "$out" >"$out/collectives.md"
omgs_log "the collectives' table in Markdown: $out/collectives.md"
exit "$status"
