#!/bin/bash
# Runs inside `unshare -m --propagation private` (see node-up.sh): containerd + kubelet in one private mount namespace.
P=$HOME/.cache/kueuelab-probe; B=$P/bin; NODE=${NODE:-probe30-real}; NODE_IP=${NODE_IP:-10.88.0.1}
echo $$ > $P/run/ns-holder.pid
# Paths the kubelet, containerd 1.6 and the CNI plugins hard-code on the host (/var/log/pods, /var/log/containers,
# /var/lib/kubelet/device-plugins, /var/lib/cni, /run/containerd/{s,runc}): give this namespace its own copies.
for d in var-log var-lib run; do mkdir -p $P/fs/$d; done
mount --bind $P/fs/var-log /var/log
mount --bind $P/fs/var-lib /var/lib
mount --bind $P/fs/run /run
containerd --config $P/containerd/config.toml > $P/logs/containerd.log 2>&1 &
echo $! > $P/run/containerd.pid
for i in $(seq 50); do [ -S $P/containerd/containerd.sock ] && break; sleep 0.2; done
for img in $P/images/*.tar; do ctr -a $P/containerd/containerd.sock -n k8s.io images import $img; done > $P/logs/import.log 2>&1
# protectKernelDefaults: true makes the kubelet exit unless these read 1, 10, 1. Bind files holding
# those values over them in this mount namespace only: the kubelet neither fails nor writes the host sysctls.
mkdir -p $P/sysctl; echo 1 > $P/sysctl/overcommit_memory; echo 10 > $P/sysctl/panic; echo 1 > $P/sysctl/panic_on_oops
mount --bind $P/sysctl/overcommit_memory /proc/sys/vm/overcommit_memory
mount --bind $P/sysctl/panic /proc/sys/kernel/panic
mount --bind $P/sysctl/panic_on_oops /proc/sys/kernel/panic_on_oops
$B/kubelet --config $P/kubelet/config.yaml --kubeconfig $P/node/kubeconfig --hostname-override $NODE \
   --node-ip $NODE_IP --root-dir $P/kubelet/root --cert-dir $P/kubelet/pki --v=2 > $P/logs/kubelet.log 2>&1 &
echo $! > $P/run/kubelet.pid
wait
