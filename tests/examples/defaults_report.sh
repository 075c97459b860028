#!/bin/sh
# The defaults check's report on a real run: the command after REPORT (the main job's
# configurations, under mpiexec) writes its log where scripts/defaults-check.sh would, then
# scripts/defaults_report.py makes the table of it.
#   defaults_report.sh REPORT COMMAND...
set -eu
report="$1"
shift
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$@" >"$dir/defaults.resnet50.2.shared.log" 2>&1 || {
  tail -n 20 "$dir/defaults.resnet50.2.shared.log"
  exit 1
}
python3 "$report" "$dir"
