#!/usr/bin/env bash
# Builds the helm CLI from the Go module proxy into kueuelab's dev-tool cache (once) and prints
# its path. Usage: hack/helm.sh [helm args...]  — with arguments it runs helm with them.
set -euo pipefail
version="${HELM_VERSION:-v3.19.0}"
cache="${KUEUELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueuelab}"
dir="$cache/devtools/helm-$version"
if [ ! -x "$dir/helm" ]; then
	mkdir -p "$dir"
	echo "hack/helm.sh: building helm $version into $dir" >&2
	GOBIN="$dir" go install "helm.sh/helm/v3/cmd/helm@$version"
fi
if [ "$#" -eq 0 ]; then
	echo "$dir/helm"
else
	exec "$dir/helm" "$@"
fi
