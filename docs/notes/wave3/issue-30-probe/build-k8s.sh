#!/bin/bash
# usage: build-k8s.sh <cmd-name>   builds k8s.io/kubernetes/cmd/<name> v1.36.2 from a copy of kueuelab's wrapper module,
# with the same flags as runtime/tools (so the shared GOCACHE ~/.cache/go-build is reused).
set -euo pipefail
name=$1; V=v1.36.2
W=/work/research/issue30/k8s-wrapper
OUT=$HOME/.cache/kueuelab-probe/bin; mkdir -p $OUT
cd $W
export GOTOOLCHAIN=local GOWORK=off CGO_ENABLED=0 GOFLAGS=-mod=mod
LD="-s -w -X k8s.io/component-base/version.gitVersion=$V -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$V"
start=$(date +%s)
nice -n 19 ionice -c3 go build -trimpath -gcflags=all=-dwarf=false -ldflags "$LD" -o $OUT/$name k8s.io/kubernetes/cmd/$name
echo "built $name in $(( $(date +%s) - start ))s"; ls -la $OUT/$name
