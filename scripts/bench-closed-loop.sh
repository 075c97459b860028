#!/usr/bin/env bash
# The closed-loop benchmark (issue 18, docs/planner.md "Closed loop"): omgs-train-synthetic
# on the emulated cluster (scripts/cluster.sh, as root) for each model x hosts x rate,
# printing for each case dense, every fixed planner, and the closed-loop run (after it
# settles) with predicted and measured iteration times.
#
#   ./scripts/bench-closed-loop.sh                         the full matrix (hours when loaded)
#   MODELS=resnet50 HOSTS=2 RATES=1gbit ITERATIONS=3 ./scripts/bench-closed-loop.sh   reduced
#
# Environment: MODELS (resnet50 vgg16 bert_base), HOSTS (2 4), RATES (1gbit 10gbit),
# ITERATIONS (5), WARMUP (1), REFIT (5: the closed loop's window), PLANNERS
# (layerwise,single,threshold,mgs,optimal,mgs+loop,automatic+loop), BUILD (build), EXTRA
# (more arguments for omgs-train-synthetic), OUT (a folder for the logs; default a new one).
# Each case's full log is kept in OUT; the table rows are printed as they come.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

models=(${MODELS:-resnet50 vgg16 bert_base})
hosts=(${HOSTS:-2 4})
rates=(${RATES:-1gbit 10gbit})
iterations="${ITERATIONS:-5}"
warmup="${WARMUP:-1}"
refit="${REFIT:-5}"
planners="${PLANNERS:-layerwise,single,threshold,mgs,optimal,mgs+loop,automatic+loop}"
build="${BUILD:-$OMGS_ROOT/build}"
out="${OUT:-$(mktemp -d /tmp/omgs-bench-closed-loop.XXXXXX)}"
exe="$build/examples/omgs-train-synthetic"
[ -x "$exe" ] || {
  omgs_log "$exe not found: build first (./scripts/test.sh or cmake --build $build)"
  exit 2
}
mkdir -p "$out"
omgs_log "logs in $out"
status=0
for m in "${models[@]}"; do
  for n in "${hosts[@]}"; do
    for r in "${rates[@]}"; do
      log="$out/$m.$n.$r.log"
      echo "=== $m, $n hosts, $r (load: $(cut -d' ' -f1-3 /proc/loadavg))"
      # No MPI variable set: the dense rows and dense groups choose their allreduce at start-up
      # (libnbc's ring through MPI_T where Open MPI's default is slower: docs/comm.md).
      if "$OMGS_ROOT/scripts/cluster.sh" run "$n" \
        --private --rate "$r" -- "$exe" --model "$m" --iterations "$iterations" \
        --warmup "$warmup" --refit "$refit" --planners "$planners" ${EXTRA:-} >"$log" 2>&1; then
        # The table (from "timed iterations each") and the closed loop's refits.
        sed -n '/timed iterations each/,$p' "$log"
        grep -E '\] refit:' "$log" | sed 's/^/  /' || true
      else
        status=1
        echo "  failed (exit status $?); the end of $log:"
        tail -n 5 "$log" | sed 's/^/  /'
      fi
    done
  done
done
exit "$status"
