#!/bin/bash
# Tear down the probe node: pods, kubelet, containerd + shims, kube-proxy, socat, network, iptables, cgroups, sysctls.
# Every process is ended by a PID this probe recorded (or a shim whose -address is this probe's socket).
set -u
P=$HOME/.cache/kueuelab-probe; S=$HOME/.local/state/kueuelab/probe30; NODE=probe30-real
K="$P/bin/kubectl --kubeconfig $S/kubeconfig"
pidof_file() { [ -f $P/run/$1.pid ] && cat $P/run/$1.pid; }
stop() { # stop PID [name]: TERM, wait up to 10 s, then KILL
  local pid=$1; [ -z "$pid" ] && return; kill -0 $pid 2>/dev/null || return
  kill $pid; for i in $(seq 50); do kill -0 $pid 2>/dev/null || return; sleep 0.2; done; kill -9 $pid 2>/dev/null; echo "killed -9 $pid ($2)"; }
t0=$(date +%s)
# 1. let the kubelet tear its pods down (CNI DEL, volume unmounts, sandbox removal) while it still runs
if $K get node $NODE >/dev/null 2>&1; then
  $K delete pods -A --field-selector spec.nodeName=$NODE --wait=true --timeout=60s
fi
# 2. kubelet, then any sandbox left (containerd still up), then containerd and its shims
stop "$(pidof_file kubelet)" kubelet
CPID=$(pidof_file containerd)
if [ -n "$CPID" ] && kill -0 $CPID 2>/dev/null; then
  for t in $(nsenter -t $CPID -m ctr -a $P/containerd/containerd.sock -n k8s.io tasks ls -q 2>/dev/null); do
    nsenter -t $CPID -m ctr -a $P/containerd/containerd.sock -n k8s.io tasks kill -s KILL $t; done
fi
stop "$CPID" containerd
for pid in $(pgrep -f "containerd-shim-runc-v2 .*-address $P/containerd/containerd.sock"); do stop $pid shim; done
stop "$(pidof_file ns-holder)" ns-holder
# 3. kube-proxy and its rules, the apiserver forwarder
stop "$(pidof_file kube-proxy)" kube-proxy
[ -x $P/bin/kube-proxy ] && $P/bin/kube-proxy --cleanup --config $P/kube-proxy/config.yaml > $P/logs/kube-proxy-cleanup.log 2>&1
stop "$(pidof_file socat)" socat     # its forked children exit when their connections close
/work/research/issue30/svc-dnat.sh del 0 >/dev/null 2>&1
# 4. kubelet's canary chains (IPv4 AND IPv6) and anything else named KUBE-* left in mangle/nat/filter
for ipt in iptables ip6tables; do
for t in mangle nat filter; do
  for ch in $($ipt -t $t -S | awk '$1=="-N" && $2 ~ /^KUBE-/ {print $2}'); do
    $ipt -t $t -S | awk -v c=$ch '$1=="-A" && $0 ~ "-j "c"( |$)" {sub("^-A","-D"); print}' | while read -r rule; do eval $ipt -t $t $rule; done
  done
  for ch in $($ipt -t $t -S | awk '$1=="-N" && $2 ~ /^KUBE-/ {print $2}'); do $ipt -t $t -F $ch; done
  for ch in $($ipt -t $t -S | awk '$1=="-N" && $2 ~ /^KUBE-/ {print $2}'); do $ipt -t $t -X $ch; done
done; done
# iptables-nft leaves the (now empty) nft tables behind; this host had an empty ruleset before the probe
for fam in ip ip6; do for t in mangle nat filter; do
  nft list table $fam $t >/dev/null 2>&1 || continue
  nft list table $fam $t | grep -v "type .* hook" | grep -qE "jump|goto|accept|drop|reject|dnat|snat|masquerade" || nft delete table $fam $t
done; done
# kube-proxy's nfacct counters (kube-proxy --cleanup does not remove them)
for a in ct_state_invalid_dropped_pkts localhost_nps_accepted_pkts; do nfacct del $a 2>/dev/null; done
# 5. network: the bridge (pod veths went with their netns), conntrack entries of the pod range, sysctls
ip link del cni0 2>/dev/null
ip link del kl-host 2>/dev/null   # netns variant: its routes go with it
conntrack -D -s 10.88.0.0/16 >/dev/null 2>&1; conntrack -D -d 10.0.0.0/24 >/dev/null 2>&1
sysctl -qw net.ipv4.ip_forward=0    # baseline value on this machine; the CNI bridge plugin set it to 1
# 6. cgroups (bottom-up)
for c in /sys/fs/cgroup/*/kueuelab-probe; do find $c -depth -type d -exec rmdir {} \; 2>/dev/null; done
# 7. mounts left under the probe dir (none expected: the private mount ns died with its processes)
grep -E "kueuelab-probe" /proc/mounts | awk '{print $2}' | sort -r | xargs -r -n1 umount
# 8. API objects of the node
$K delete node $NODE --ignore-not-found
echo "node down in $(( $(date +%s) - t0 ))s"
