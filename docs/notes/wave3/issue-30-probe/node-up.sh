#!/bin/bash
# Start containerd + kubelet for node probe30-real in a private mount namespace, host network namespace.
set -euo pipefail
P=$HOME/.cache/kueuelab-probe; B=$P/bin; NODE=probe30-real; NODE_IP=10.88.0.1
mkdir -p $P/logs $P/run
# 1. bridge with the node IP (CNI bridge plugin reuses it as cni0's gateway)
ip link show cni0 >/dev/null 2>&1 || { ip link add cni0 type bridge; ip addr add $NODE_IP/16 dev cni0; ip link set cni0 up; }
# 2. the kubelet's cgroupRoot in every v1 hierarchy
for c in /sys/fs/cgroup/*/; do
  case $c in */unified/) continue;; esac
  mkdir -p $c/kueuelab-probe
done
cat /sys/fs/cgroup/cpuset/cpuset.cpus > /sys/fs/cgroup/cpuset/kueuelab-probe/cpuset.cpus
cat /sys/fs/cgroup/cpuset/cpuset.mems > /sys/fs/cgroup/cpuset/kueuelab-probe/cpuset.mems
# 3. containerd + kubelet share one private mount namespace
nohup setsid unshare -m --propagation private /work/research/issue30/node-ns.sh > $P/logs/ns.log 2>&1 < /dev/null &
sleep 1; echo "started; ns holder $(cat $P/run/ns-holder.pid)"
