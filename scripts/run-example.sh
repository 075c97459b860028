#!/usr/bin/env bash
# The main job: builds omgs, then plans ResNet-50 for 16 workers at density 0.001 with every
# planner and prints the comparison (omgs-plan on a bundled model).
# Extra arguments replace the default omgs-plan arguments, e.g.
#   ./scripts/run-example.sh --model examples/models/gpt2_small.csv --workers 4 --density 0.01
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

omgs_ensure_packages
cd "$OMGS_ROOT"
omgs_build "$OMGS_ROOT/build" -DOMGS_ENABLE_TESTS=OFF -DOMGS_ENABLE_BENCHMARKS=OFF >&2
args=("$@")
if [ "${#args[@]}" -eq 0 ]; then
  args=(--model "$OMGS_ROOT/examples/models/resnet50.csv" --workers 16 --density 0.001 --planner all)
fi
exec "$OMGS_ROOT/build/src/tools/omgs-plan" "${args[@]}"
