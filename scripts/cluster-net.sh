# shellcheck shell=bash
# Namespaces, links and shaping of the emulated cluster (scripts/cluster.sh sources this).
# Cluster NAME: switch namespace NAME-sw holding bridge br0; host i: namespace NAME-hi with
# eth0 = 10.213.0.i/24, its veth peer vi on br0, its own hostname NAME-hi kept in a persistent
# UTS namespace bound at /run/omgs-cluster/NAME/uts/hi. Nothing touches the root namespace.

export CLUSTER_SUBNET=10.213.0.0/24
CLUSTER_STATE=/run/omgs-cluster

cluster_log() { printf '[cluster] %s\n' "$*" >&2; }
cluster_die() {
  local code="$1"
  shift
  printf 'cluster.sh: error: %s\n' "$*" >&2
  exit "$code"
}
cluster_addr() { echo "10.213.0.$1"; }
cluster_in() { # cluster_in NAME HOST CMD...: runs CMD inside host HOST's network and UTS namespaces
  local name="$1" host="$2"
  shift 2
  nsenter --net="/run/netns/$name-h$host" --uts="$CLUSTER_STATE/$name/uts/h$host" -- "$@"
}

# RATE: an integer with kbit, mbit, gbit or tbit (tc's units). Prints the rate in bit/s.
cluster_check_rate() {
  [[ "$1" =~ ^([1-9][0-9]{0,5})(kbit|mbit|gbit|tbit)$ ]] ||
    cluster_die 2 "--rate '$1' must be an integer with kbit, mbit, gbit or tbit, e.g. 1gbit"
}
cluster_rate_bits() {
  [[ "$1" =~ ^([0-9]+)([kmgt])bit$ ]]
  local -A mult=([k]=1000 [m]=1000000 [g]=1000000000 [t]=1000000000000)
  echo "$((BASH_REMATCH[1] * mult[${BASH_REMATCH[2]}]))"
}
cluster_check_delay() {
  [[ "$1" =~ ^(0|[0-9]{1,6}(us|ms)|[0-9]{1,2}s)$ ]] ||
    cluster_die 2 "--delay '$1' must be 0 or an integer with us, ms or s, e.g. 100us"
}

cluster_need_host_support() {
  [ "$(id -u)" -eq 0 ] || cluster_die 77 "must run as root (network namespaces and tc need it)"
  omgs_ensure_apt_packages iproute2 util-linux
  command -v tc >/dev/null 2>&1 || cluster_die 77 "tc is missing (install iproute2)"
  local probe="omgsprobe$$" err
  if ! err="$(ip netns add "$probe" 2>&1)"; then
    cluster_die 77 "no network namespace support here: ip netns add: ${err}"
  fi
  if ! err="$(ip -n "$probe" link add name pa type veth peer name pb 2>&1 &&
    ip -n "$probe" link add name pbr type bridge 2>&1)"; then
    ip netns del "$probe"
    cluster_die 77 "no veth or bridge support here: ${err}"
  fi
  ip netns del "$probe"
}

# cluster_hosts NAME: the number of hosts of a complete cluster NAME, else 0.
cluster_hosts() {
  local name="$1" n i
  n="$(cat "$CLUSTER_STATE/$name/hosts" 2>/dev/null)" || {
    echo 0
    return
  }
  for i in sw $(seq -f 'h%g' 1 "$n"); do
    [ -e "/run/netns/$name-$i" ] || {
      echo 0
      return
    }
  done
  echo "$n"
}

# The owner of a private cluster: "pid start-time" of the process that removes it at its end.
cluster_proc_id() {
  local stat
  stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
  stat="${stat##*) }"
  # shellcheck disable=SC2086 # split the fields of /proc/PID/stat
  set -- $stat
  case "$1" in Z | X) return 1 ;; esac # a zombie is a dead owner
  echo "${20}"
}
cluster_owner_alive() {
  local pid start
  read -r pid start <"$1" || return 1
  [ "$(cluster_proc_id "$pid" 2>/dev/null)" = "$start" ]
}

# Removes the clusters whose owner died without removing them (kill -9, power loss of a run).
cluster_sweep_dead() {
  local ns name
  for ns in $(ip netns list | awk '{print $1}' | grep -E '^[a-z][a-z0-9]*-sw$' || true); do
    name="${ns%-sw}"
    if [ -s "$CLUSTER_STATE/$name/owner" ] && ! cluster_owner_alive "$CLUSTER_STATE/$name/owner"; then
      cluster_log "removing cluster '$name' left by a run that died"
      cluster_remove "$name"
    fi
  done
}

# cluster_remove NAME: ends the processes inside its namespaces, deletes them, unmounts.
cluster_remove() {
  local name="$1" ns pids f i
  local all
  all="$(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-(sw|h[0-9]+)$" || true)"
  for ns in $all; do
    pids="$(ip netns pids "$ns" 2>/dev/null || true)"
    # shellcheck disable=SC2086 # one pid per word
    [ -z "$pids" ] || kill -TERM $pids 2>/dev/null || true
  done
  for i in 1 2 3 4 5 6 7 8 9 10; do
    pids=""
    for ns in $all; do pids="$pids$(ip netns pids "$ns" 2>/dev/null || true)"; done
    [ -n "$pids" ] || break
    if [ "$i" -eq 10 ]; then
      # shellcheck disable=SC2086
      kill -KILL $pids 2>/dev/null || true
    fi
    sleep 0.2
  done
  for ns in $all; do ip netns del "$ns" 2>/dev/null || true; done
  for f in "$CLUSTER_STATE/$name"/uts/*; do
    [ -e "$f" ] || continue
    umount "$f" 2>/dev/null || true
  done
  rm -rf "${CLUSTER_STATE:?}/$name"
}

# cluster_shape NETNS DEV RATE DELAY: tbf at RATE on DEV's egress, with netem DELAY inside.
cluster_shape() {
  local ns="$1" dev="$2" rate="$3" delay="$4" bits burst
  bits="$(cluster_rate_bits "$rate")"
  # Tokens for 4 ms at RATE (>= rate/HZ for every HZ) and at least a 64 KiB GSO packet.
  burst="$((bits / 8 / 250))"
  [ "$burst" -ge 70000 ] || burst=70000
  tc -n "$ns" qdisc replace dev "$dev" root handle 1: tbf rate "$rate" burst "$burst" latency 20ms
  if [[ "$delay" =~ ^0+[a-z]*$ ]]; then
    return 0
  fi
  tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$delay" limit 100000 2>/dev/null ||
    cluster_die 1 "--delay needs tc's netem, which this kernel lacks (CONFIG_NET_SCH_NETEM)"
}

# cluster_create NAME N RATE DELAY OWNER_PID: removes leftovers of NAME, then builds it.
cluster_create() {
  local name="$1" n="$2" rate="$3" delay="$4" owner="$5" sw="$1-sw" h i
  cluster_remove "$name"
  mkdir -p "$CLUSTER_STATE/$name/uts"
  [ -z "$owner" ] || echo "$owner $(cluster_proc_id "$owner")" >"$CLUSTER_STATE/$name/owner"
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  : >"$CLUSTER_STATE/$name/hostfile"
  for i in $(seq 1 "$n"); do
    h="$name-h$i"
    ip netns add "$h"
    touch "$CLUSTER_STATE/$name/uts/h$i"
    unshare --uts="$CLUSTER_STATE/$name/uts/h$i" hostname "$h"
    nsenter --net="/run/netns/$h" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 || true
    ip -n "$h" link set lo up
    ip -n "$h" link add eth0 type veth peer name "v$i" netns "$sw"
    ip -n "$h" addr add "$(cluster_addr "$i")/24" dev eth0
    ip -n "$h" link set eth0 up
    ip -n "$sw" link set "v$i" master br0 up
    cluster_shape "$h" eth0 "$rate" "$delay"
    cluster_shape "$sw" "v$i" "$rate" 0
    echo "$h slots=1" >>"$CLUSTER_STATE/$name/hostfile"
  done
  printf '%s\n' "$rate" >"$CLUSTER_STATE/$name/rate"
  printf '%s\n' "$delay" >"$CLUSTER_STATE/$name/delay"
  echo "$n" >"$CLUSTER_STATE/$name/hosts"
}
