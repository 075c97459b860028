#!/usr/bin/env bash
# The main job: builds omgs, then runs the example training job on 4 MPI ranks: ResNet-50's
# 161 gradient tensors, backward emulated on the device, communicated by omgs with the
# layerwise, single, mgs and optimal plans and by a dense MPI_Iallreduce per layer; prints
# one line per iteration and the comparison table.
# Extra arguments replace the job's default arguments, e.g.
#   ./scripts/run-example.sh --model gpt2_small --density 0.01 --iterations 5
# OMGS_RANKS sets the number of ranks (default 4).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

omgs_ensure_packages
cd "$OMGS_ROOT"
omgs_build "$OMGS_ROOT/build" -DOMGS_ENABLE_TESTS=OFF -DOMGS_ENABLE_BENCHMARKS=OFF \
  -DOMGS_ENABLE_EXAMPLES=ON >&2
args=("$@")
if [ "${#args[@]}" -eq 0 ]; then
  args=(--model resnet50)
fi
# Open MPI refuses to run as root and to place more ranks than cores unless told.
flags=()
if mpiexec --version 2>&1 | grep -q -e "Open MPI" -e "OpenRTE"; then
  flags+=(--oversubscribe)
  if [ "$(id -u)" -eq 0 ]; then flags+=(--allow-run-as-root); fi
fi
exec mpiexec -n "${OMGS_RANKS:-4}" "${flags[@]}" "$OMGS_ROOT/build/examples/omgs-train-synthetic" \
  "${args[@]}"
