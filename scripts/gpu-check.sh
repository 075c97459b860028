#!/usr/bin/env bash
# The device check: builds omgs against an installed Kokkos (CUDA, HIP, or any host backend),
# runs the whole test suite, the top-k benchmark and the main job on 1 and 2 ranks, and
# writes a short report, and the measured top-k constants as gpu-topk-measured.json (the
# form omgs-plan --topk reads, docs/scale.md). It never builds Kokkos (docs/portability.md).
#
#   ./scripts/gpu-check.sh KOKKOS_ROOT [KOKKOSKERNELS_ROOT]
#
# KOKKOS_ROOT: the install prefix of Kokkos (it holds lib*/cmake/Kokkos). KOKKOSKERNELS_ROOT:
# that of Kokkos Kernels, for the example omgs-train-mlp (without it, that one is not built).
# The compiler is $CXX if set, else the install's bin/nvcc_wrapper for CUDA (with -arch from
# the Kokkos architecture), hipcc for HIP, else the compiler Kokkos was built with.
# Environment:
#   OMGS_CHECK_DIR      build directory (default build-check-<backend>)
#   OMGS_CHECK_CTEST    extra ctest arguments (default none: the whole suite)
#   OMGS_CHECK_ITERS    iterations of the main job (default 10)
#   OMGS_JOBS           build and ctest jobs (default nproc)
#   OMGS_CHECK_CMAKE_ARGS  extra configure arguments (split at spaces)
#   OMGS_CHECK_TARGETS  "selected": build only the programs of the tests OMGS_CHECK_CTEST
#                       selects, the benchmark and the main job (default: everything)
#   OMGS_CHECK_BUDGET_S    seconds for all the steps together (default 0: no limit); a step
#                          that would start with under 10 s left is skipped, and said so
#   OMGS_CHECK_STEP_BUDGETS  "step=seconds ..." per step (configure, build, ctest, bench-topk,
#                            main-job-1, main-job-2): a step past its budget is stopped
# Exit status: 0 when every step passed; the report names the failed and skipped steps.
set -uo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ "${1:-}" = "-h" ] || [ "${1:-}" = "--help" ]; then
  sed -n '2,26p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
  exit 2
fi
kokkos_root="$(cd "$1" 2>/dev/null && pwd)" || {
  omgs_log "KOKKOS_ROOT '$1' is not a directory"
  exit 2
}
kernels_root=""
if [ $# -eq 2 ]; then
  kernels_root="$(cd "$2" 2>/dev/null && pwd)" || {
    omgs_log "KOKKOSKERNELS_ROOT '$2' is not a directory"
    exit 2
  }
fi
common_cfg="$(find "$kokkos_root"/lib*/cmake/Kokkos -name KokkosConfigCommon.cmake 2>/dev/null | head -n 1)"
if [ -z "$common_cfg" ]; then
  omgs_log "no Kokkos install under $kokkos_root (lib*/cmake/Kokkos/KokkosConfigCommon.cmake)"
  exit 2
fi
# "set(Kokkos_DEVICES SERIAL;CUDA)" -> "SERIAL;CUDA"
kokkos_var() { sed -n "s/^set(Kokkos_$1 \"\{0,1\}\([^\")]*\)\"\{0,1\})$/\1/Ip" "$common_cfg" | head -n 1; }
devices="$(kokkos_var DEVICES)"
archs="$(kokkos_var ARCH)"
backend=host
case ";$devices;" in
  *";CUDA;"*) backend=cuda ;;
  *";HIP;"*) backend=hip ;;
esac

cxx_flags=""
if [ -n "${CXX:-}" ]; then
  cxx="$CXX"
elif [ "$backend" = cuda ]; then
  cxx="$kokkos_root/bin/nvcc_wrapper"
  # nvcc_wrapper's default -arch (sm_70) is gone from CUDA 13: name the install's one, so
  # CMake's compiler check (before Kokkos' flags apply) compiles.
  sm="$(tr ';' '\n' <<<"$archs" | sed -n 's/^\(KEPLER\|MAXWELL\|PASCAL\|VOLTA\|TURING\|AMPERE\|ADA\|HOPPER\|BLACKWELL\)\([0-9]\{2,3\}\)$/sm_\2/p' | head -n 1)"
  [ -n "$sm" ] && cxx_flags="-arch=$sm"
elif [ "$backend" = hip ]; then
  cxx="$(command -v hipcc || echo hipcc)"
else
  cxx="$(kokkos_var CXX_COMPILER)"
  [ -x "$cxx" ] || cxx="$(command -v c++)"
fi

dir="${OMGS_CHECK_DIR:-$OMGS_ROOT/build-check-$backend}"
mkdir -p "$dir"
report="$dir/gpu-check-report.md"
jobs="$(omgs_jobs)"
failed=()
skipped=()
times=()
declare -A budget=()
for b in ${OMGS_CHECK_STEP_BUDGETS:-}; do budget["${b%%=*}"]="${b#*=}"; done
total="${OMGS_CHECK_BUDGET_S:-0}"
t0=$SECONDS
step() { # step NAME LOG COMMAND...: runs it within its budget, records a failure
  local name="$1" log="$2" limit="${budget[$1]:-0}" left rc=0 start=$SECONDS
  shift 2
  if [ "$total" -gt 0 ]; then
    left=$((total - (SECONDS - t0)))
    if [ "$left" -lt 10 ]; then
      skipped+=("$name")
      omgs_log "$name SKIPPED: ${left}s left of the ${total}s budget"
      return 1
    fi
    if [ "$limit" -eq 0 ] || [ "$limit" -gt "$left" ]; then limit=$left; fi
  fi
  omgs_log "$name (log: $log; budget ${limit/#0/none} s)"
  if [ "$limit" -gt 0 ]; then
    timeout -k 10 "$limit" "$@" >"$log" 2>&1 || rc=$?
  else
    "$@" >"$log" 2>&1 || rc=$?
  fi
  times+=("$name $((SECONDS - start)) ${limit/#0/-} $rc")
  if [ "$rc" -ne 0 ]; then
    failed+=("$name")
    [ "$rc" -eq 124 ] && failed[-1]="$name (stopped at its ${limit} s budget)"
    omgs_log "${failed[-1]} FAILED (tail of $log):"
    tail -n 20 "$log" >&2
    return 1
  fi
}

# The measured top-k constants in the form omgs-plan --topk reads (examples/perf/
# gpu_topk_*.json hold the modelled ones; docs/scale.md): a least-squares line c0 + c1 n
# through the one-read feedback form's times ("fb 1-rd") of omgs-bench-topk on gradient-like
# data at density 0.001, sampled path only. Fails (no output) with fewer than two such rows.
topk_json() {
  local device="none"
  if command -v nvidia-smi >/dev/null 2>&1; then
    device="$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
  elif command -v rocm-smi >/dev/null 2>&1; then
    device="$(rocm-smi --showproductname 2>/dev/null | grep -m 1 -i 'card series' | sed 's/.*: *//')"
  fi
  tr -d '|' <"$1" | awk -v device="$device ($backend)" '
    BEGIN { m = 0 }
    $1 == "grad" && $3 == "0.001" && $11 == "sampled" {
      n[m] = $2; t[m] = $10 / 1000; m++
    }
    END {
      if (m < 2) exit 1
      for (i = 0; i < m; i++) { sx += n[i]; sy += t[i]; sxx += n[i] * n[i]; sxy += n[i] * t[i] }
      c1 = (m * sxy - sx * sy) / (m * sxx - sx * sx)
      c0 = (sy - c1 * sx) / m
      if (c0 < 0) c0 = 0
      if (c1 < 0) exit 1
      printf "{\n  \"type\": \"topk\",\n  \"device\": \"%s\",\n", device
      printf "  \"status\": \"MEASURED by scripts/gpu-check.sh: omgs-bench-topk, one-read feedback form, gradient-like data, density 0.001, sampled path; least-squares c0 + c1 n (the runtime adds a pack kernel and a fence per group)\",\n"
      printf "  \"topk\": {\"form\": \"linear\", \"c0_s\": %.4g, \"c1_s\": %.4g},\n", c0, c1
      printf "  \"points\": ["
      for (i = 0; i < m; i++) printf "%s[%d, %.6g]", (i ? ", " : ""), n[i], t[i]
      printf "]\n}\n"
    }'
}

launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cfg=(-S "$OMGS_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=Release "-DCMAKE_CXX_COMPILER=$cxx"
  "-DKokkos_ROOT=$kokkos_root" -DOMGS_ENABLE_TESTS=ON -DOMGS_ENABLE_BENCHMARKS=ON
  -DOMGS_ENABLE_EXAMPLES=ON "${launcher[@]}")
[ -n "$cxx_flags" ] && cfg+=("-DCMAKE_CXX_FLAGS=$cxx_flags")
[ -n "$kernels_root" ] && cfg+=("-DKokkosKernels_ROOT=$kernels_root")
# shellcheck disable=SC2206
cfg+=(${OMGS_CHECK_CMAKE_ARGS:-})
# libtorch (Debian's) is a host library: its example is for host builds.
[ "$backend" != host ] && cfg+=(-DOMGS_ENABLE_TORCH_EXAMPLE=OFF)

# The programs of the tests OMGS_CHECK_CTEST selects (their names from CTest's JSON listing,
# their commands from the CTestTestfile.cmake files: the listing leaves out the command of a
# program not built yet), the benchmark, the main job and the device probe.
selected_targets() {
  # shellcheck disable=SC2086
  ctest --test-dir "$dir" --show-only=json-v1 ${OMGS_CHECK_CTEST:-} | python3 -c '
import json, os, re, shlex, sys
build = sys.argv[1]
wanted = {t["name"] for t in json.load(sys.stdin).get("tests", [])}
names = {"omgs-bench-topk", "omgs-train-synthetic", "omgs_device_probe"}
for top, _, files in os.walk(build):
    if "CTestTestfile.cmake" not in files:
        continue
    for line in open(os.path.join(top, "CTestTestfile.cmake"), encoding="utf-8"):
        m = re.match(r"add_test\(\[=\[(.*?)\]=\] (.*)\)$", line.strip())
        if m and m.group(1) in wanted:
            for a in shlex.split(m.group(2)):
                if a.startswith(build + "/") and os.path.basename(a) != "cmake":
                    names.add(os.path.basename(a))
print("\n".join(sorted(names)))' "$dir"
}
build_cmd=(cmake --build "$dir" -j "$jobs")
built=0
if step configure "$dir/check-configure.log" cmake "${cfg[@]}"; then
  if [ "${OMGS_CHECK_TARGETS:-}" = selected ]; then
    mapfile -t targets < <(selected_targets)
    omgs_log "building ${#targets[@]} targets: ${targets[*]}"
    build_cmd+=(--target "${targets[@]}")
  fi
  step build "$dir/check-build.log" "${build_cmd[@]}" && built=1
fi
# Warnings reported in omgs' own files (not in Kokkos, MPI or the system headers); paths are
# absolute, or relative to the build directory where ccache's base_dir rewrote them.
warnings="$(grep -E '(\([0-9]+\): warning|:[0-9]+:[0-9]+: warning)' "$dir/check-build.log" 2>/dev/null |
  grep -E "^($OMGS_ROOT/|(\.\./)+)(src|include|tests|examples)/" | sort -u)"
nwarn=0
[ -n "$warnings" ] && nwarn="$(wc -l <<<"$warnings")"

mpi_flags=()
if mpiexec --version 2>&1 | grep -q -e "Open MPI" -e "OpenRTE"; then
  mpi_flags+=(--oversubscribe)
  [ "$(id -u)" -eq 0 ] && mpi_flags+=(--allow-run-as-root)
fi
if [ "$built" -eq 1 ]; then
  # shellcheck disable=SC2086
  step ctest "$dir/check-ctest.log" ctest --test-dir "$dir" --output-on-failure -j "$jobs" \
    ${OMGS_CHECK_CTEST:-}
  # shellcheck disable=SC2206
  bench=("$dir/tests/benchmarks/omgs-bench-topk" ${OMGS_CHECK_BENCH_ARGS:---reps 5})
  [ "$backend" != host ] && bench+=(--large)  # n = 1e8 takes minutes on 2 host cores
  step bench-topk "$dir/check-bench-topk.log" "${bench[@]}"
  topk_json "$dir/check-bench-topk.log" >"$dir/gpu-topk-measured.json" ||
    rm -f "$dir/gpu-topk-measured.json"
  job=("$dir/examples/omgs-train-synthetic" --model resnet50 --iterations "${OMGS_CHECK_ITERS:-10}"
    --warmup 2)
  step main-job-1 "$dir/check-main-1.log" mpiexec -n 1 "${mpi_flags[@]}" "${job[@]}"
  step main-job-2 "$dir/check-main-2.log" mpiexec -n 2 "${mpi_flags[@]}" "${job[@]}"
fi

fence="$(printf '\140\140\140')"
code() { printf '%s\n%s\n%s\n' "$fence" "$1" "$fence"; }
{
  echo "# omgs device check ($(date -u '+%Y-%m-%d %H:%M UTC'), $(hostname))"
  echo
  echo "- omgs: $(git -C "$OMGS_ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "- Kokkos: $kokkos_root (devices $devices; arch ${archs:-none})"
  echo "- Kokkos Kernels: ${kernels_root:-not given (omgs-train-mlp not built)}"
  echo "- compiler: $cxx $cxx_flags"
  echo "- MPI: $(mpiexec --version 2>&1 | head -n 1)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -n 1)"
  elif command -v rocm-smi >/dev/null 2>&1; then
    echo "- GPU: $(rocm-smi --showproductname 2>&1 | grep -m 1 -i 'card series')"
  else
    echo "- GPU: none found (no nvidia-smi / rocm-smi)"
  fi
  echo "- load at the end: $(cut -d ' ' -f 1-3 /proc/loadavg), $(nproc) cores"
  echo "- steps failed: ${failed[*]:-none}"
  echo "- steps skipped (no time left): ${skipped[*]:-none}"
  echo
  echo "## Steps (seconds taken, budget, exit status)"
  code "$(printf '%s\n' "${times[@]}" | awk '{ printf "%-12s %6s s %6s %4s\n", $1, $2, $3, $4 }')"
  echo
  echo "## Build: $nwarn warning(s) in omgs' own files"
  [ -n "$warnings" ] && code "$warnings"
  if [ -f "$dir/check-ctest.log" ]; then
    echo
    echo "## Test suite"
    code "$(grep -E '^[0-9]+% tests passed|^Total Test time|\((Failed|Timeout|SEGFAULT|Not Run)\)|\*\*\*' "$dir/check-ctest.log")"
  fi
  if [ -f "$dir/check-bench-topk.log" ]; then
    echo
    echo "## omgs-bench-topk (ms; 'read' is the one-read bandwidth baseline on the same data)"
    code "$(cat "$dir/check-bench-topk.log")"
  fi
  if [ -f "$dir/gpu-topk-measured.json" ]; then
    echo
    echo "## Measured top-k constants (omgs-plan --topk $dir/gpu-topk-measured.json; docs/scale.md)"
    code "$(cat "$dir/gpu-topk-measured.json")"
  fi
  for r in 1 2; do
    if [ -f "$dir/check-main-$r.log" ]; then
      echo
      echo "## Main job, $r rank(s): omgs-train-synthetic --model resnet50"
      code "$(grep -v '^ *iteration ' "$dir/check-main-$r.log" | tail -n 25)"
    fi
  done
} >"$report"
omgs_log "report: $report"
cat "$report"
[ "${#failed[@]}" -eq 0 ]
