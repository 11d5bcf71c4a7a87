#!/usr/bin/env bash
# Runs one completion index of an `experiment render-job` Job inside the runner image, as the pod
# would: the image imported into a containerd of its own (`ctr images import`, what `kind load
# image-archive` does), the rendered container's arguments, working directory /work with the inputs
# ConfigMap's files and a results directory mounted, JOB_COMPLETION_INDEX set, the image's
# non-root user and environment, a network namespace of its own. Needs root, containerd and runc
# (Debian: apt-get install containerd). Under the shared lock, it starts a control plane:
#
#   make image && flock /tmp/kl/e2e.lock hack/runner-image-check.sh
set -euo pipefail

version=$(make -s --no-print-directory print-version)
archive=${ARCHIVE:-bin/images/kueuelab-runner-$version.tar}
bin=${KUEUELAB:-./bin/kueuelab}
index=${INDEX:-1}
work=$(mktemp -d /tmp/kueuelab-runner-check-XXXX)
ctrd=$work/containerd
mkdir -p "$ctrd" "$work/pod/inputs" "$work/pod/results"
chmod 0777 "$work/pod/results" # the image's user 65532 writes there, as fsGroup lets it in a pod

cat >"$ctrd/config.toml" <<EOF
version = 2
root = "$ctrd/root"
state = "$ctrd/state"
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = "$ctrd/containerd.sock"
EOF
containerd --config "$ctrd/config.toml" >"$ctrd/log" 2>&1 &
ctrd_pid=$!
trap 'kill "$ctrd_pid"; wait "$ctrd_pid" 2>/dev/null; rm -rf "$work"' EXIT
ctr=(ctr -a "$ctrd/containerd.sock" -n kueuelab)
for _ in $(seq 50); do "${ctr[@]}" version >/dev/null 2>&1 && break; sleep 0.2; done

"${ctr[@]}" images import "$archive"
ref=$(tar -xOf "$archive" manifest.json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["RepoTags"][0])')

# A 2-variant experiment of 20 generated workloads on small.yaml, rendered as the Job.
cp examples/clusters/small.yaml "$work/small.yaml"
cat >"$work/exp.yaml" <<EOF
apiVersion: kueuelab.io/v1alpha1
kind: Experiment
metadata: {name: image-check}
generator: {jobs: 20, seed: 3}
cluster: small.yaml
speedup: max
timeout: 10m
variants:
- name: quota-8
  patch:
  - set: {queue: "*", flavor: h100-sxm, resource: nvidia.com/gpu, nominalQuota: 8}
- name: quota-16
EOF
"$bin" experiment render-job "$work/exp.yaml" --results pvc:results --image "$ref" --out "$work/job.yaml" >/dev/null
python3 - "$work" <<'EOF'
import os, sys, yaml
work = sys.argv[1]
docs = [d for d in yaml.safe_load_all(open(f"{work}/job.yaml")) if d]
cm = next(d for d in docs if d["kind"] == "ConfigMap")
job = next(d for d in docs if d["kind"] == "Job")
for name, data in cm["data"].items():
    open(f"{work}/pod/inputs/{name}", "w").write(data)
c = job["spec"]["template"]["spec"]["containers"][0]
open(f"{work}/args", "w").write("\n".join(c["args"]))
open(f"{work}/cwd", "w").write(c["workingDir"])
EOF
mapfile -t args <"$work/args"
t0=$(date +%s)
"${ctr[@]}" run --rm --cwd "$(cat "$work/cwd")" --env "JOB_COMPLETION_INDEX=$index" \
  --mount "type=bind,src=$work/pod/inputs,dst=/work/inputs,options=rbind:ro" \
  --mount "type=bind,src=$work/pod/results,dst=/work/results,options=rbind:rw" \
  "$ref" "image-check-$$" /usr/local/bin/kueuelab "${args[@]}"
echo "index $index ran in the runner image in $(($(date +%s) - t0)) s"
ls "$work/pod/results/image-check/"*/r0/done
python3 -c 'import json,sys; m=json.load(open(sys.argv[1])); g=m["summary"]["groups"][0]; print(m["variant"], g["succeeded"]+g["failed"], "of", g["workloads"], "workloads finished")' \
  "$(ls "$work/pod/results/image-check/"*/r0/done)"
