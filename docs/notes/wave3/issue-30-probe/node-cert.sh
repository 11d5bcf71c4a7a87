#!/bin/bash
# Issue the kubelet a client cert (CN=system:node:$NODE, O=system:nodes) from the cluster's CA and write its kubeconfig.
set -euo pipefail
NODE=${NODE:-probe30-real}; S=${S:-$HOME/.local/state/kueuelab/probe30}; D=$HOME/.cache/kueuelab-probe/node
mkdir -p $D
openssl genrsa -out $D/kubelet-client.key 2048 2>/dev/null
openssl req -new -key $D/kubelet-client.key -subj "/O=system:nodes/CN=system:node:$NODE" -out $D/kubelet-client.csr
printf "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n" > $D/ext.cnf
openssl x509 -req -in $D/kubelet-client.csr -CA $S/pki/ca.crt -CAkey $S/pki/ca.key -CAcreateserial -days 365 -extfile $D/ext.cnf -out $D/kubelet-client.crt 2>/dev/null
SERVER=$(awk '/server:/{print $2; exit}' $S/kubeconfig)
cat > $D/kubeconfig <<EOK
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: $SERVER
    certificate-authority: $S/pki/ca.crt
users:
- name: node
  user:
    client-certificate: $D/kubelet-client.crt
    client-key: $D/kubelet-client.key
contexts:
- name: node
  context: {cluster: local, user: node}
current-context: node
EOK
openssl x509 -in $D/kubelet-client.crt -noout -subject -issuer
