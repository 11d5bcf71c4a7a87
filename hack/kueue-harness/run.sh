#!/usr/bin/env bash
# Runs Kueue's own scheduler-performance harness (test/performance/scheduler of the Kueue module
# kueuelab links) here, as Kueue's CI runs it (`make run-performance-scheduler`: minimalkueue in an
# envtest control plane, its logs to files, metrics scraped every 5 s), RUNS times, and keeps every
# run's artifacts plus one per-workload file of absolute times (wlTimes.csv) that the harness's
# recorder does not write by itself (recorder.patch: first event, first and last admission, finish,
# evictions; the event channel made large enough that no event is dropped, and the dropped count
# written beside them so a run that lost one is refused).
#
#   hack/kueue-harness/run.sh                       # 5 runs of the baseline config into results/kueue-harness/baseline
#   CONFIG=tas RUNS=5 OUT=/tmp/h hack/kueue-harness/run.sh
#   PATCH_QPS=300/500 hack/kueue-harness/run.sh     # minimalkueue's client at QPS 300 / burst 500
#   GENERATOR=hack/kueue-harness/configs/low-rate/generator.yaml hack/kueue-harness/run.sh
#                                                   # a generator file of one's own (CONFIG: its directory's name)
#
# envtest runs the tools cache's etcd and kube-apiserver (`kueuelab tools path`): Kubernetes
# v1.36.2 as Kueue's ENVTEST_K8S_VERSION 1.36 asks, etcd v3.5.21 (envtest's 1.36 assets ship 3.6).
# Runs are sequential and each takes the machine's two cores; nothing is left running (each run's
# runner stops its own envtest and minimalkueue; a Ctrl-C reaches the runner, which does the same).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
KUEUE_VERSION=${KUEUE_VERSION:-$(cd "$repo" && go list -m -f '{{.Version}}' sigs.k8s.io/kueue)}
CONFIG=${CONFIG:-baseline}
GENERATOR=${GENERATOR:-}
if [ -n "$GENERATOR" ]; then
  GENERATOR=$(realpath "$GENERATOR")
  CONFIG=$(basename "$(dirname "$GENERATOR")")
fi
RUNS=${RUNS:-5}
PATCH_QPS=${PATCH_QPS:-}
OUT=${OUT:-$repo/results/kueue-harness/$CONFIG${PATCH_QPS:+-qps${PATCH_QPS/\//-}}}
cache=${KUEUELAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kueuelab}
work=$cache/harness/kueue-$KUEUE_VERSION${PATCH_QPS:+-qps${PATCH_QPS/\//-}}

kueuelab=${KUEUELAB:-$repo/bin/kueuelab}
[ -x "$kueuelab" ] || (cd "$repo" && make build >/dev/null)
tools=$("$kueuelab" tools path)
assets=$cache/harness/assets
mkdir -p "$assets"
ln -sf "$tools/etcd" "$assets/etcd"
ln -sf "$tools/kube-apiserver" "$assets/kube-apiserver"

src=$(go mod download -json "sigs.k8s.io/kueue@$KUEUE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "kueue-harness: no source for sigs.k8s.io/kueue@$KUEUE_VERSION" >&2; exit 1; }
if [ ! -x "$work/bin/runner" ] || [ ! -x "$work/bin/minimalkueue" ]; then
  echo "building Kueue $KUEUE_VERSION's harness in $work (once; 2 min on 2 cores with a warm Go build cache)"
  rm -rf "$work"
  mkdir -p "$work"
  cp -r "$src" "$work/kueue"
  chmod -R u+w "$work/kueue"
  (cd "$work/kueue" && patch -p1 --forward --batch <"$here/recorder.patch" >/dev/null)
  if [ -n "$PATCH_QPS" ]; then
    qps=${PATCH_QPS%/*} burst=${PATCH_QPS#*/}
    f=$work/kueue/test/performance/scheduler/minimalkueue/main.go
    grep -q 'kubeConfig.QPS = 50' "$f" || { echo "kueue-harness: minimalkueue sets no QPS 50 to patch in $f" >&2; exit 1; }
    sed -i "s/kubeConfig.QPS = 50/kubeConfig.QPS = $qps/; s/kubeConfig.Burst = 100/kubeConfig.Burst = $burst/" "$f"
  fi
  (cd "$work/kueue" && go build -o "$work/bin/runner" ./test/performance/scheduler/runner &&
    go build -o "$work/bin/minimalkueue" ./test/performance/scheduler/minimalkueue)
fi

gen=${GENERATOR:-$work/kueue/test/performance/scheduler/configs/$CONFIG/generator.yaml}
[ -f "$gen" ] || { echo "kueue-harness: no config $CONFIG ($gen)" >&2; exit 1; }
extra=()
timeout=10m
if [ "$CONFIG" = tas ]; then extra=(--enableTAS=true); timeout=20m; fi
mkdir -p "$OUT"
cp "$gen" "$OUT/generator.yaml"
for i in $(seq 1 "$RUNS"); do
  dir=$OUT/run-$i
  if [ -f "$dir/wlTimes.csv" ]; then echo "run $i: done before ($dir)"; continue; fi
  rm -rf "$dir"
  mkdir -p "$dir"
  echo "run $i/$RUNS: $CONFIG -> $dir"
  start=$(date +%s)
  KUBEBUILDER_ASSETS=$assets "$work/bin/runner" --o "$dir" \
    --crds="$work/kueue/config/components/crd/bases" --generatorConfig="$gen" \
    --minimalKueue="$work/bin/minimalkueue" --timeout="$timeout" "${extra[@]}" \
    --withLogs=true --logToFile=true --metricsScrapeInterval=5s >"$dir/runner.log" 2>&1 || {
    echo "run $i failed: see $dir/runner.log" >&2
    tail -5 "$dir/runner.log" >&2
    exit 1
  }
  dropped=$(awk -F, 'NR==2 {print $9}' "$dir/wlTimes.csv")
  if [ "${dropped:-x}" != 0 ]; then
    echo "run $i: the recorder dropped ${dropped:-?} workload events; its times are not whole" >&2
    mv "$dir/wlTimes.csv" "$dir/wlTimes.dropped.csv"
    exit 1
  fi
  echo "run $i: $(( $(date +%s) - start )) s"
done
python3 "$here/summary.py" "$OUT"
