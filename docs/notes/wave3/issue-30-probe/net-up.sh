#!/bin/bash
# kube-proxy (iptables mode, host netns) + the bridge-address forwarder to the loopback apiserver + the extra
# kubernetes EndpointSlice (option B of RECIPE.md step 4).
set -eu
P=$HOME/.cache/kueuelab-probe; S=$HOME/.local/state/kueuelab/probe30; PORT=$(awk -F: '/server:/{print $NF; exit}' $S/kubeconfig)
K="$P/bin/kubectl --kubeconfig $S/kubeconfig"
setsid nohup socat TCP-LISTEN:$PORT,bind=10.88.0.1,reuseaddr,fork TCP:127.0.0.1:$PORT > $P/logs/socat.log 2>&1 < /dev/null &
echo $! > $P/run/socat.pid
sed -e s/ADDR/10.88.0.1/ -e "s/port: 21503/port: $PORT/" /work/research/issue30/manifests/kubernetes-eps.yaml | $K apply -f -
setsid nohup $P/bin/kube-proxy --config $P/kube-proxy/config.yaml --v=2 > $P/logs/kube-proxy.log 2>&1 < /dev/null &
echo $! > $P/run/kube-proxy.pid
for i in $(seq 50); do iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q "default/kubernetes:https" && break; sleep 0.2; done
echo "kube-proxy rules for 10.0.0.1 in place"
