#!/bin/bash
# Runs inside `unshare -m -n --propagation private` (node-up-netns.sh): own mount AND network namespace.
# containerd + kubelet + kube-proxy all live here; the host side only has a veth, two routes and one DNAT.
P=$HOME/.cache/kueuelab-probe; B=$P/bin; NODE=${NODE:-probe30-real}; NODE_IP=10.87.0.2
echo $$ > $P/run/ns-holder.pid
for i in $(seq 100); do [ -f $P/run/net-ready ] && break; sleep 0.1; done
[ -f $P/run/net-ready ] || { echo 'host side did not set up the veth'; exit 1; }
ip link set lo up
ip addr add $NODE_IP/30 dev kl-node; ip link set kl-node up; ip route add default via 10.87.0.1
sysctl -qw net.ipv4.ip_forward=1          # this netns only
for d in var-log var-lib run; do mkdir -p $P/fs/$d; done
mount --bind $P/fs/var-log /var/log
mount --bind $P/fs/var-lib /var/lib
mount --bind $P/fs/run /run
containerd --config $P/containerd/config.toml > $P/logs/containerd.log 2>&1 &
echo $! > $P/run/containerd.pid
for i in $(seq 50); do [ -S $P/containerd/containerd.sock ] && break; sleep 0.2; done
for img in $P/images/*.tar; do ctr -a $P/containerd/containerd.sock -n k8s.io images import $img; done > $P/logs/import.log 2>&1
mkdir -p $P/sysctl; echo 1 > $P/sysctl/overcommit_memory; echo 10 > $P/sysctl/panic; echo 1 > $P/sysctl/panic_on_oops
mount --bind $P/sysctl/overcommit_memory /proc/sys/vm/overcommit_memory
mount --bind $P/sysctl/panic /proc/sys/kernel/panic
mount --bind $P/sysctl/panic_on_oops /proc/sys/kernel/panic_on_oops
$B/kubelet --config $P/kubelet/config-netns.yaml --kubeconfig $P/node/kubeconfig-netns --hostname-override $NODE \
   --node-ip $NODE_IP --root-dir $P/kubelet/root --cert-dir $P/kubelet/pki --v=2 > $P/logs/kubelet.log 2>&1 &
echo $! > $P/run/kubelet.pid
$B/kube-proxy --config $P/kube-proxy/config-netns.yaml --v=2 > $P/logs/kube-proxy.log 2>&1 &
echo $! > $P/run/kube-proxy.pid
wait
