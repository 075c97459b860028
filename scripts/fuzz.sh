#!/usr/bin/env bash
# Builds the plan module's libFuzzer targets (tests/fuzz) with clang in build-fuzz/ and runs
# each for SECONDS (default 30), with ASan and UBSan.
#
#   ./scripts/fuzz.sh [SECONDS]
#
# Each fuzzer starts from its committed seed corpus tests/fuzz/corpus/<target>/ (read
# only) and writes what it finds to build-fuzz/corpus/<target>/ (kept between runs). Up to
# OMGS_JOBS (default: the number of cores) fuzzers run at once. Exits non-zero if any
# fuzzer finds a crash, a timeout (> 10 s on one input), an out-of-memory (> 2 GiB) or a
# leak, and prints the file that reproduces it: replay it with
#   build-fuzz/fuzz_<target> FILE
# Clang and its fuzzer runtime are installed with apt when missing and run as root.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  omgs_log "usage: $0 [SECONDS] (a positive whole number, default 30)"
  exit 2
fi
targets=(model_csv perf_json planners)

omgs_ensure_apt_packages clang libclang-rt-14-dev cmake make
cxx="${OMGS_FUZZ_CXX:-clang++}"
if ! command -v "$cxx" >/dev/null 2>&1; then
  omgs_log "$cxx not found (set OMGS_FUZZ_CXX to a clang++ with libFuzzer)"
  exit 1
fi

cd "$OMGS_ROOT"
dir="$OMGS_ROOT/build-fuzz"
mkdir -p "$dir"
omgs_log "configuring the fuzzers in ${dir}"
cmake -S "$OMGS_ROOT/tests/fuzz" -B "$dir" -DCMAKE_CXX_COMPILER="$cxx" >"$dir/configure.log" 2>&1 || {
  cat "$dir/configure.log" >&2
  exit 1
}
omgs_log "building with $(omgs_jobs) jobs"
cmake --build "$dir" -j "$(omgs_jobs)"

export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"

# run_fuzzer TARGET: one bounded run; its output goes to build-fuzz/fuzz_TARGET.log and its
# exit status to build-fuzz/fuzz_TARGET.rc.
run_fuzzer() {
  local t="$1"
  local scratch="$dir/corpus/$t"
  local artifacts="$dir/artifacts/$t"
  mkdir -p "$scratch"
  rm -rf "$artifacts"
  mkdir -p "$artifacts"
  local rc=0
  "$dir/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" \
    "$scratch" "$OMGS_ROOT/tests/fuzz/corpus/$t" >"$dir/fuzz_$t.log" 2>&1 || rc=$?
  echo "$rc" >"$dir/fuzz_$t.rc"
}

omgs_log "fuzzing ${targets[*]} for ${seconds} s each, up to $(omgs_jobs) at once"
running=0
for t in "${targets[@]}"; do
  rm -f "$dir/fuzz_$t.rc"
  if [ "$running" -ge "$(omgs_jobs)" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  run_fuzzer "$t" &
  running=$((running + 1))
done
wait

failed=0
for t in "${targets[@]}"; do
  log="$dir/fuzz_$t.log"
  rc="$(cat "$dir/fuzz_$t.rc" 2>/dev/null || echo 1)"
  # The last status line: "#N DONE cov: C ft: F corp: K/Sb lim: ... exec/s: E rss: R".
  done_line="$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true)"
  if [ "$rc" -eq 0 ]; then
    omgs_log "fuzz_$t: ok: ${done_line:-no status line}"
    continue
  fi
  failed=1
  omgs_log "fuzz_$t: FAILED (exit status $rc); the end of $log:"
  tail -n 60 "$log" >&2
  found=0
  for f in "$dir/artifacts/$t"/*; do
    [ -f "$f" ] || continue
    found=1
    omgs_log "fuzz_$t: reproducer: $f   (replay: $dir/fuzz_$t $f)"
  done
  if [ "$found" -eq 0 ]; then
    omgs_log "fuzz_$t: no reproducer written (see $log)"
  fi
done
exit "$failed"
