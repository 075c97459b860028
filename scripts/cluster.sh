#!/usr/bin/env bash
# Emulated cluster on one Linux machine: N hosts = N network namespaces (each with its own
# hostname), one veth each to a bridge in a switch namespace, every link shaped with tc in
# both directions. MPI jobs run one rank per host over TCP on these links only. As root:
#
#   ./scripts/cluster.sh up N [--rate RATE] [--delay D]   hosts 1..N (default 1gbit, no delay)
#   ./scripts/cluster.sh run N [--mpi openmpi|mpich] [--rate R] [--delay D] [--private]
#                            [--ranks-per-host R] -- CMD ARGS...
#   ./scripts/cluster.sh check                           throughput and RTT host 1 -> host 2
#   ./scripts/cluster.sh down                            removes the namespaces, mounts, state
#   ./scripts/cluster.sh supported                       exit 0 if this machine can emulate
#
# --name NAME before the subcommand (default omgs, or $OMGS_CLUSTER_NAME) picks the
# cluster. `run` uses that cluster if it is up with >= N hosts; otherwise (or with --private)
# it brings up a private one for the job and removes it when the job ends, fails or is
# interrupted. --ranks-per-host R (default 1) runs R ranks on each host (N * R in all,
# ranks 0..R-1 on host 1): they share memory inside the host, the shaped link between hosts. Clusters whose owner died (kill -9) are removed by the next `up` or `run`.
# Exit status: the job's for `run`; 77 where this machine cannot emulate (not root, no netns);
# 2 for bad arguments. docs/cluster.md explains the design and the measured links.
set -euo pipefail
CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/common.sh
source "$CLUSTER_DIR/common.sh"
# shellcheck source=scripts/cluster-net.sh
source "$CLUSTER_DIR/cluster-net.sh"
# shellcheck source=scripts/cluster-mpi.sh
source "$CLUSTER_DIR/cluster-mpi.sh"

usage() {
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
  exit 2
}

# int_in_range VALUE MAX WHAT: prints VALUE as a decimal integer if it is one in 1..MAX;
# otherwise exits 2 with "WHAT 'VALUE' must be an integer in 1..MAX".
int_in_range() {
  local v="$1" max="$2" what="$3"
  case "$v" in
    '' | *[!0-9]*) cluster_die 2 "$what '$v' must be an integer in 1..$max" ;;
  esac
  if [ "${#v}" -gt 6 ] || [ "$((10#$v))" -lt 1 ] || [ "$((10#$v))" -gt "$max" ]; then
    cluster_die 2 "$what '$v' must be an integer in 1..$max"
  fi
  echo "$((10#$v))"
}

# parse_link_options ARGS...: sets n, rate, delay, mpi, private, per_host, cmd from
# `N [options] [-- CMD]`.
parse_link_options() {
  n="$(int_in_range "${1:-}" 64 "the number of hosts")" || exit 2
  [ $# -gt 0 ] && shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate="${2:-}" && shift 2 ;;
      --delay) delay="${2:-}" && shift 2 ;;
      --mpi) mpi="${2:-}" && shift 2 ;;
      --private) private=1 && shift ;;
      --ranks-per-host) per_host="${2:-}" && shift 2 ;;
      --) shift && cmd=("$@") && break ;;
      *) cluster_die 2 "unknown option '$1' (see ./scripts/cluster.sh --help)" ;;
    esac
  done
  cluster_check_rate "$rate"
  cluster_check_delay "$delay"
  per_host="$(int_in_range "$per_host" 16 --ranks-per-host)" || exit 2
}

cmd_up() {
  cluster_need_host_support
  cluster_sweep_dead
  trap 'cluster_remove "$CLUSTER_NAME"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  cluster_create "$CLUSTER_NAME" "$n" "$rate" "$delay" ""
  trap - EXIT INT TERM
  cluster_log "cluster '$CLUSTER_NAME' up: $n hosts ${CLUSTER_SUBNET}, $rate per link" \
    "both directions, delay ${delay}"
}

cmd_run() {
  [ "${#cmd[@]}" -gt 0 ] || cluster_die 2 "run: nothing to run (run N [options] -- CMD ARGS...)"
  cluster_need_host_support
  cluster_sweep_dead
  trap 'cluster_stop_job' EXIT
  if [ "$private" -eq 1 ] || [ "$(cluster_hosts "$CLUSTER_NAME")" -lt "$n" ]; then
    [ "$private" -eq 1 ] || cluster_log "cluster '$CLUSTER_NAME' is not up with $n hosts:" \
      "using a private one"
    CLUSTER_NAME="r$$"
    trap 'cluster_stop_job; cluster_remove "$CLUSTER_NAME"' EXIT
  else
    cluster_log "on cluster '$CLUSTER_NAME' ($(cat "$CLUSTER_STATE/$CLUSTER_NAME/rate") links)"
  fi
  trap 'exit 130' INT
  trap 'exit 143' TERM
  [ "$CLUSTER_NAME" != "r$$" ] || cluster_create "$CLUSTER_NAME" "$n" "$rate" "$delay" "$$"
  cluster_launch "$CLUSTER_NAME" "$n" "$per_host" "$mpi" "${cmd[@]}"
  local status=0
  wait "$CLUSTER_JOB" || status=$?
  CLUSTER_JOB=""
  return "$status"
}

cmd_check() {
  cluster_need_host_support
  omgs_ensure_apt_packages iputils-ping iperf3
  [ "$(cluster_hosts "$CLUSTER_NAME")" -ge 2 ] ||
    cluster_die 1 "check: cluster '$CLUSTER_NAME' is not up with 2 hosts (run: $0 up 2)"
  cluster_measure "$CLUSTER_NAME"
}

main() {
  CLUSTER_NAME="${OMGS_CLUSTER_NAME:-omgs}"
  if [ "${1:-}" = "--name" ]; then
    CLUSTER_NAME="${2:-}"
    shift 2 || true
  fi
  case "$CLUSTER_NAME" in
    '' | [!a-z]* | *[!a-z0-9]* | ?????????*) cluster_die 2 "--name '$CLUSTER_NAME' must be 1..8 of [a-z0-9], starting with a letter" ;;
  esac
  local sub="${1:-}"
  [ $# -gt 0 ] && shift
  rate=1gbit delay=0 mpi=openmpi private=0 per_host=1 cmd=()
  case "$sub" in
    up) parse_link_options "$@" && cmd_up ;;
    run) parse_link_options "$@" && cmd_run ;;
    check) cmd_check ;;
    down)
      cluster_need_host_support
      cluster_remove "$CLUSTER_NAME"
      cluster_log "cluster '$CLUSTER_NAME' down"
      ;;
    supported) cluster_need_host_support ;;
    -h | --help | help) usage ;;
    *) cluster_die 2 "unknown subcommand '$sub' (up, run, check, down; see --help)" ;;
  esac
}

main "$@"
