#!/usr/bin/env bash
# `detforge bench dist` across simulated hosts: HOSTS network namespaces on a private bridge
# (10.77.0.<h+1>/24, the same layout as tests/cluster/), one rank each, every host's egress
# limited to RATE with tbf (and DELAY added with netem where the kernel has it), then
# `detforge launch --nnodes HOSTS` runs `bench dist` on all of them. Prints rank 0's table.
# Needs root (or CAP_NET_ADMIN). Everything it makes is removed on every exit path.
#
#   sudo scripts/bench_cluster.sh HOSTS RATE [DELAY] [-- bench dist options]
#   sudo scripts/bench_cluster.sh 4 1gbit 5ms -- --mib 64 --iters 5
set -euo pipefail

hosts=${1:?usage: bench_cluster.sh HOSTS RATE [DELAY] [-- bench dist options]}
rate=${2:?usage: bench_cluster.sh HOSTS RATE [DELAY] [-- bench dist options]}
shift 2
delay=""
if [[ $# -gt 0 && $1 != "--" ]]; then
  delay=$1
  shift
fi
[[ ${1:-} == "--" ]] && shift
repo=$(cd "$(dirname "$0")/.." && pwd)
detforge=${DETFORGE:-$repo/build/detforge}
prefix="dfb$$"

cleanup() {
  for ns in $(ip netns list | awk '{print $1}' | grep "^$prefix" || true); do
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}
trap cleanup EXIT INT TERM

ip netns add "${prefix}sw"
ip netns exec "${prefix}sw" ip link add br0 type bridge
ip netns exec "${prefix}sw" ip link set br0 up
for ((h = 0; h < hosts; h++)); do
  ns="${prefix}h$h"
  ip netns add "$ns"
  ip netns exec "${prefix}sw" ip link add "p$h" type veth peer name eth0 netns "$ns"
  ip netns exec "${prefix}sw" ip link set "p$h" master br0 up
  ip netns exec "$ns" ip link set lo up
  ip netns exec "$ns" ip addr add "10.77.0.$((h + 1))/24" dev eth0
  ip netns exec "$ns" ip link set eth0 up
  if [[ -n $delay ]]; then
    if ! ip netns exec "$ns" tc qdisc add dev eth0 root handle 1: netem delay "$delay" 2>/dev/null; then
      echo "bench_cluster: this kernel has no netem (sch_netem); no delay can be added" >&2
      exit 2
    fi
    ip netns exec "$ns" tc qdisc add dev eth0 parent 1: handle 2: tbf rate "$rate" burst 1mb latency 100ms
  else
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 1mb latency 100ms
  fi
done

echo "# $hosts simulated hosts, each link $rate${delay:+, +$delay}; $(nproc) cores shared by all"
pids=()
for ((h = 0; h < hosts; h++)); do
  ip netns exec "${prefix}h$h" env OMP_NUM_THREADS=1 "$detforge" launch --nnodes "$hosts" \
    --node-rank "$h" --nproc-per-node 1 --master-addr 10.77.0.1 --master-port 29500 \
    -- "$detforge" bench dist "$@" > "/tmp/${prefix}_h$h.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
sed -n 's/^\[rank 0\] //p' "/tmp/${prefix}_h0.log" | grep -v '^\[[0-9:]* [A-Z]\]' || true
if [[ $status -ne 0 ]]; then
  echo "bench_cluster: a host failed (exit $status); host 0's log:" >&2
  cat "/tmp/${prefix}_h0.log" >&2
fi
rm -f /tmp/${prefix}_h*.log
exit $status
