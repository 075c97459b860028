#!/usr/bin/env bash
# The main job: builds omgs, then runs the example training job with 4 MPI ranks: ResNet-50's
# 161 gradient tensors, backward emulated on the device, communicated by omgs with the
# layerwise, single, mgs and optimal plans, with the runtime's defaults (the "default" row: the
# mixed planner closed-loop, sparse exchange allgather, bf16 pairs) and densely (25 MB buckets
# as DDP, and per layer); prints one line per iteration and the comparison table.
#
# Where the machine allows it (root, network namespaces) the ranks run on an emulated
# cluster: one rank per host, hosts linked at 1 Gbit/s, MPI over TCP (scripts/cluster.sh,
# docs/cluster.md). Elsewhere, or with --shared-memory, all ranks share memory on this
# machine. The first line of output says which.
#
#   ./scripts/run-example.sh [--hosts N] [--ranks-per-host R] [--rate RATE] [--delay D]
#                            [--shared-memory] [JOB ARGS]
#
# JOB ARGS replace the job's default arguments, e.g.
#   ./scripts/run-example.sh --model gpt2_small --density 0.01 --iterations 5
# OMGS_RANKS sets the number of ranks (default 4; --hosts overrides it); --ranks-per-host R
# runs R ranks on each emulated host (N * R ranks in all; shared memory inside a host).
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ranks="${OMGS_RANKS:-4}"
rate=1gbit
delay=0
mode=cluster
per_host=1
while [ $# -gt 0 ]; do
  case "$1" in
    --hosts) ranks="${2:?--hosts needs a number}" && shift 2 ;;
    --rate) rate="${2:?--rate needs a rate, e.g. 1gbit}" && shift 2 ;;
    --delay) delay="${2:?--delay needs a delay, e.g. 100us}" && shift 2 ;;
    --ranks-per-host) per_host="${2:?--ranks-per-host needs a number}" && shift 2 ;;
    --shared-memory) mode=shared && shift ;;
    *) break ;;
  esac
done
case "$per_host" in
  '' | *[!0-9]* | 0) omgs_log "--ranks-per-host '$per_host' must be a positive integer" && exit 2 ;;
esac
args=("$@")
if [ "${#args[@]}" -eq 0 ]; then
  args=(--model resnet50)
fi
# Install first, then ask which MPI is there: on a fresh machine there is none before.
mpi="$(omgs_prepare_mpi)"

cluster="$OMGS_ROOT/scripts/cluster.sh"
if [ "$mode" = cluster ] && ! why="$("$cluster" supported 2>&1)"; then
  mode=shared
  echo "main job on shared memory, $((ranks * per_host)) ranks on this machine (no emulated cluster: ${why#cluster.sh: error: })"
elif [ "$mode" = cluster ]; then
  echo "main job on an emulated cluster: $ranks hosts (network namespaces) x $per_host ranks, $rate links, delay $delay, $mpi over TCP (docs/cluster.md)"
else
  echo "main job on shared memory, $((ranks * per_host)) ranks on this machine (--shared-memory)"
fi

cd "$OMGS_ROOT"
omgs_build "$OMGS_ROOT/build" -DOMGS_ENABLE_TESTS=OFF -DOMGS_ENABLE_BENCHMARKS=OFF \
  -DOMGS_ENABLE_EXAMPLES=ON >&2
job="$OMGS_ROOT/build/examples/omgs-train-synthetic"
if [ "$mode" = cluster ]; then
  exec "$cluster" run "$ranks" --private --ranks-per-host "$per_host" --rate "$rate" \
    --delay "$delay" --mpi "$mpi" -- \
    "$job" "${args[@]}"
fi
# Open MPI refuses to run as root and to place more ranks than cores unless told.
flags=()
if [ "$mpi" = openmpi ]; then
  flags+=(--oversubscribe)
  if [ "$(id -u)" -eq 0 ]; then flags+=(--allow-run-as-root); fi
fi
exec mpiexec -n "$((ranks * per_host))" "${flags[@]}" "$job" "${args[@]}"
