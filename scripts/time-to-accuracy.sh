#!/usr/bin/env bash
# Time to accuracy on the emulated cluster (docs/torch.md, "Time to accuracy"): the wide CNN
# (omgs-train-torch --model wide_cnn, 3.2 M parameters) on Fashion-MNIST, one rank per host,
# for every seed:
#   omgs-train-torch   dense fp32 (one MPI_Allreduce per iteration) and omgs with the
#                      runtime's defaults (planner mixed with the closed loop, bf16 pairs;
#                      density 0.01), same weights and batches
#   scripts/tta_ddp.py PyTorch DDP over gloo: fp32 (default buckets), fp16_compress_hook,
#                      PowerSGD rank 1 and rank 4 (bf16_compress_hook does not run over gloo
#                      in torch 1.13; see tta_ddp.py)
# then prints the table (tta_report.py) and writes OUT/tta.svg. As root, with the torch
# example built (build/examples/omgs-train-torch) and Debian's python3-torch:
#
#   ./scripts/time-to-accuracy.sh [--rate 1gbit] [--hosts 4] [--seeds "1 2 3"] [--epochs 4]
#       [--max-batches 60] [--test-images 2000] [--batch-size 64] [--lr 0.05]
#       [--progress inline|thread] [--out DIR] [--hooks "fp32 fp16 powersgd1 powersgd4"]
#
# An "epoch" is --max-batches batches from a fresh shuffle of the 60,000 training images
# (seeded by seed + epoch, as both programs do), so the run sees epochs x max-batches x
# batch-size images in all; the test accuracy is on the first --test-images test images.
# omgs runs with --progress inline by default: on a machine with fewer cores than ranks the
# progress threads wait for a core (docs/torch.md, section 5). `uptime` before and after every
# run goes to OUT/uptime.log. Output: OUT/*.csv, OUT/*.log, OUT/tta.svg, OUT/table.md.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

rate=1gbit hosts=4 seeds="1 2 3" epochs=4 batches=60 test_images=2000 batch=64 lr=0.05
progress=inline hooks="fp32 fp16 powersgd1 powersgd4" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rate) rate="$2" && shift 2 ;;
    --hosts) hosts="$2" && shift 2 ;;
    --seeds) seeds="$2" && shift 2 ;;
    --epochs) epochs="$2" && shift 2 ;;
    --max-batches) batches="$2" && shift 2 ;;
    --test-images) test_images="$2" && shift 2 ;;
    --batch-size) batch="$2" && shift 2 ;;
    --lr) lr="$2" && shift 2 ;;
    --progress) progress="$2" && shift 2 ;;
    --hooks) hooks="$2" && shift 2 ;;
    --out) out="$2" && shift 2 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' && exit 0 ;;
    *) omgs_log "time-to-accuracy.sh: unknown option '$1' (see --help)" && exit 2 ;;
  esac
done
out="${out:-$OMGS_ROOT/build/tta-$rate}"
job="$OMGS_ROOT/build/examples/omgs-train-torch"
[ -x "$job" ] || { omgs_log "no $job: configure with -DOMGS_ENABLE_TORCH_EXAMPLE=ON and build it"; exit 1; }
/usr/bin/python3 -c 'import torch.distributed' 2>/dev/null ||
  { omgs_log "Debian's python3-torch is missing (apt-get install python3-torch)"; exit 1; }
mkdir -p "$out"
rm -f "$out"/*.csv
cluster="$OMGS_ROOT/scripts/cluster.sh"
name="tta$(($$ % 100000))"  # cluster names are at most 8 characters
"$cluster" --name "$name" up "$hosts" --rate "$rate"
trap '"$cluster" --name "$name" down >/dev/null 2>&1 || true' EXIT
common=(--model wide_cnn --epochs "$epochs" --max-batches "$batches" --batch-size "$batch"
  --lr "$lr" --test-images "$test_images")

# run TAG CMD...: one job on the cluster, its output in OUT/TAG.log, the load around it logged.
run() {
  local tag="$1" && shift
  echo "$tag before: $(uptime)" >>"$out/uptime.log"
  local start=$SECONDS
  "$cluster" --name "$name" run "$hosts" -- "$@" >"$out/$tag.log" 2>&1 ||
    omgs_log "$tag: exit status $? (see $out/$tag.log)"
  echo "$tag after ($((SECONDS - start)) s): $(uptime)" >>"$out/uptime.log"
  omgs_log "$tag: $((SECONDS - start)) s, $(uptime | sed 's/.*load/load/')"
}

for seed in $seeds; do
  # --planner mixed: the runtime's default (the example's own default is mgs).
  run "omgs-$seed" "$job" "${common[@]}" --seed "$seed" --progress "$progress" --planner mixed \
    --tolerance 100 --csv "$out/omgs-$seed.csv"
  for hook in $hooks; do
    # Rank 0 is on host 1 (docs/cluster.md): 10.213.0.1; gloo on the host's eth0.
    run "ddp-$hook-$seed" /usr/bin/python3 "$OMGS_ROOT/scripts/tta_ddp.py" "${common[@]}" \
      --seed "$seed" --hook "$hook" --master-addr 10.213.0.1 --ifname eth0 \
      --master-port $((29500 + seed)) --csv "$out/ddp-$hook-$seed.csv"
  done
done
python3 "$OMGS_ROOT/scripts/tta_report.py" "$out" \
  "Fashion-MNIST, wide_cnn (3.2 M), $hosts emulated hosts at $rate, seeds $seeds" |
  tee "$out/table.md"
omgs_log "plot: $out/tta.svg"
