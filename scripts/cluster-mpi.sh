# shellcheck shell=bash
# MPI jobs and link measurements on the emulated cluster (scripts/cluster.sh sources this).

# cluster_launch NAME N R MPI CMD...: starts the job in the background, R ranks on each of the
# N hosts (ranks 0..R-1 on host 1, R..2R-1 on host 2, ...), mpiexec on host 1 reaching the
# other hosts through cluster-agent.sh; CLUSTER_JOB = its pid (a background job, so that
# `wait` on it can be interrupted by a signal). Between hosts MPI uses TCP on the shaped
# links only; ranks of one host talk through shared memory (Open MPI's vader) or, with MPICH,
# TCP inside the host, which never leaves its namespace and so is not shaped.
cluster_launch() {
  local name="$1" n="$2" per_host="$3" mpi="$4" agent="$CLUSTER_DIR/cluster-agent.sh"
  shift 4
  local hostfile="$CLUSTER_STATE/$name/hostfile" ranks=$((n * per_host)) launch
  case "$mpi" in
    openmpi)
      local job_hosts="$hostfile.r$per_host" btl=tcp,self
      sed "s/ slots=1\$/ slots=$per_host/" "$hostfile" >"$job_hosts"
      [ "$per_host" -eq 1 ] || btl=tcp,vader,self
      # TCP only between hosts (no UCX), out-of-band and data on the emulated subnet.
      launch=(mpiexec.openmpi -n "$ranks" --hostfile "$job_hosts" --map-by slot --allow-run-as-root
        --mca plm_rsh_agent "$agent" --mca plm_rsh_no_tree_spawn 1 --mca pml ob1
        --mca btl "$btl" --mca btl_tcp_if_include "$CLUSTER_SUBNET"
        --mca oob_tcp_if_include "$CLUSTER_SUBNET")
      ;;
    mpich)
      sed "s/ slots=1\$/:$per_host/" "$hostfile" >"$hostfile.mpich"
      # All hosts share this machine's /dev/shm, where MPICH's shared-memory segments of two
      # hosts' local ranks would meet (the job hangs at start-up): with several ranks per
      # host, MPICH sends everything through UCX's TCP (MPI_COMM_TYPE_SHARED is then one
      # rank: set the ranks per node with omgs' option instead).
      local nolocal=()
      [ "$per_host" -eq 1 ] || nolocal=(-genv MPIR_CVAR_NOLOCAL 1)
      launch=(mpiexec.mpich -n "$ranks" -f "$hostfile.mpich" -launcher ssh -launcher-exec "$agent"
        -iface eth0 -genv UCX_TLS tcp -genv UCX_NET_DEVICES eth0 -genv FI_PROVIDER tcp
        -genv FI_TCP_IFACE eth0 "${nolocal[@]}")
      ;;
    *) cluster_die 2 "--mpi '$mpi' must be openmpi or mpich" ;;
  esac
  command -v "${launch[0]}" >/dev/null || cluster_die 1 "${launch[0]} is missing"
  nsenter --net="/run/netns/$name-h1" --uts="$CLUSTER_STATE/$name/uts/h1" -- \
    "${launch[@]}" "$@" &
  CLUSTER_JOB=$!
}

# cluster_stop_job: ends the job started by cluster_launch (TERM, then KILL after 5 s).
cluster_stop_job() {
  [ -n "${CLUSTER_JOB:-}" ] || return 0
  kill -TERM "$CLUSTER_JOB" 2>/dev/null || return 0
  local _
  for _ in $(seq 1 25); do
    kill -0 "$CLUSTER_JOB" 2>/dev/null || return 0
    sleep 0.2
  done
  kill -KILL "$CLUSTER_JOB" 2>/dev/null || true
}

# cluster_measure NAME: TCP throughput host 1 -> host 2 (iperf3, 3 s) and RTT (ping, idle).
cluster_measure() {
  local name="$1" to json rtt bps
  to="$(cluster_addr 2)"
  rtt="$(cluster_in "$name" 1 timeout 10 ping -q -c 20 -i 0.05 -w 5 "$to" | sed -n 's/^rtt [^=]*= //p')"
  [ -n "$rtt" ] || cluster_die 1 "check: ping from host 1 to $to got no reply"
  cluster_in "$name" 2 timeout 20 iperf3 -s -1 -B "$to" >/dev/null 2>&1 &
  local server=$!
  for _ in $(seq 1 50); do
    if json="$(cluster_in "$name" 1 timeout 15 iperf3 -c "$to" -t 3 -O 1 -J 2>/dev/null)"; then
      break
    fi
    json="" && sleep 0.1
  done
  wait "$server" || true
  [ -n "$json" ] || cluster_die 1 "check: iperf3 from host 1 to $to failed"
  bps="$(printf '%s' "$json" | python3 -c \
    'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])')"
  printf 'link %s -> %s: %s over 3 s TCP (iperf3), configured %s; RTT min/avg/max/mdev %s (ping, idle)\n' \
    "$(cluster_addr 1)" "$to" "$(awk -v b="$bps" 'BEGIN{printf "%.3f Gbit/s", b/1e9}')" \
    "$(cat "$CLUSTER_STATE/$name/rate")" "$rtt"
}
