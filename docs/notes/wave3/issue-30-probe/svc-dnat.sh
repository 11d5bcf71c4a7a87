#!/bin/bash
# Hand-written NAT: pods on cni0 reach the apiserver (127.0.0.1:PORT) through the kubernetes Service 10.0.0.1:443.
# usage: svc-dnat.sh add|del PORT
set -u; PORT=$2
if [ $1 = add ]; then
  iptables -t nat -N PROBE30-APISERVER
  iptables -t nat -A PROBE30-APISERVER -s 10.88.0.0/16 -d 10.0.0.1/32 -p tcp --dport 443 -j DNAT --to-destination 127.0.0.1:$PORT
  iptables -t nat -I PREROUTING 1 -j PROBE30-APISERVER
  sysctl -w net.ipv4.conf.cni0.route_localnet=1
else
  iptables -t nat -D PREROUTING -j PROBE30-APISERVER; iptables -t nat -F PROBE30-APISERVER; iptables -t nat -X PROBE30-APISERVER
  sysctl -w net.ipv4.conf.cni0.route_localnet=0 2>/dev/null
fi
