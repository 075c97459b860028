#!/usr/bin/env bash
# The remote-shell agent of the emulated cluster (scripts/cluster.sh): called by the MPI
# launcher as `cluster-agent.sh [ssh options] HOST COMMAND...` in place of ssh, it runs
# COMMAND with sh inside HOST's network and UTS namespaces (HOST = NAME-hI).
set -euo pipefail
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done # ssh-style options such as -x
host="${1:-}"
if ! [[ "$host" =~ ^([a-z][a-z0-9]*)-(h[0-9]+)$ ]]; then
  echo "cluster-agent.sh: error: '$host' is not an emulated host (NAME-hI)" >&2
  exit 255
fi
shift
state="/run/omgs-cluster/${BASH_REMATCH[1]}/uts/${BASH_REMATCH[2]}"
if [ ! -e "/run/netns/$host" ] || [ ! -e "$state" ]; then
  echo "cluster-agent.sh: error: host '$host' is not up" >&2
  exit 255
fi
exec nsenter --net="/run/netns/$host" --uts="$state" -- /bin/sh -c "$*"
