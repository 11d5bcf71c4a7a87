#!/bin/bash
# Variant: node in its own network namespace. Host side: veth kl-host 10.87.0.1/30 <-> kl-node 10.87.0.2/30,
# routes to the pod range and the service range via the node, one DNAT from the veth to the loopback apiserver.
set -euo pipefail
P=$HOME/.cache/kueuelab-probe; S=$HOME/.local/state/kueuelab/probe30
PORT=$(awk -F: '/server:/{print $NF; exit}' $S/kubeconfig)
mkdir -p $P/logs $P/run; rm -f $P/run/net-ready $P/run/*.pid
for c in /sys/fs/cgroup/*/; do case $c in */unified/) continue;; esac; mkdir -p $c/kueuelab-probe; done
cat /sys/fs/cgroup/cpuset/cpuset.cpus > /sys/fs/cgroup/cpuset/kueuelab-probe/cpuset.cpus
cat /sys/fs/cgroup/cpuset/cpuset.mems > /sys/fs/cgroup/cpuset/kueuelab-probe/cpuset.mems
setsid unshare -m -n --propagation private /work/research/issue30/node-ns-netns.sh > $P/logs/ns.log 2>&1 < /dev/null &
for i in $(seq 50); do [ -s $P/run/ns-holder.pid ] && break; sleep 0.1; done
HOLDER=$(cat $P/run/ns-holder.pid)
ip link add kl-host type veth peer name kl-node
ip link set kl-node netns $HOLDER
ip addr add 10.87.0.1/30 dev kl-host; ip link set kl-host up
ip route add 10.88.0.0/16 via 10.87.0.2      # pod IPs (apiserver -> webhook pods directly, logs/exec -> kubelet)
ip route add 10.0.0.0/24 via 10.87.0.2       # service IPs: the apiserver dials webhook ClusterIPs; kube-proxy in the node ns DNATs them
iptables -t nat -N PROBE30-APISERVER
iptables -t nat -A PROBE30-APISERVER -i kl-host -d 10.87.0.1/32 -p tcp --dport $PORT -j DNAT --to-destination 127.0.0.1:$PORT
iptables -t nat -I PREROUTING 1 -j PROBE30-APISERVER
sysctl -qw net.ipv4.conf.kl-host.route_localnet=1
touch $P/run/net-ready
echo "node ns holder $HOLDER"
