# kueuelab — build, test, lint, bench. Everything the targets need is installed by the targets
# themselves into a cache outside the repo (KUEUELAB_CACHE), so a fresh machine needs only Go.

SHELL          := /bin/bash
GO             ?= go
KUEUELAB_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kueuelab
TOOLBIN        := $(KUEUELAB_CACHE)/devtools
STATICCHECK_VERSION := v0.7.0
STATICCHECK    := $(TOOLBIN)/staticcheck-$(STATICCHECK_VERSION)
BIN            := bin/kueuelab
# The version is the agent chart's appVersion: the tag `make image` gives is the one the chart runs.
VERSION        := $(shell sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$$/\1/p' charts/kueuelab-agent/Chart.yaml)
LDFLAGS        := -X main.version=$(VERSION)
IMAGE_DIR      := bin/images
# docker (docker save's layout, every loader) or oci (a tar of an OCI image layout)
IMAGE_FORMAT   ?= docker
export GOTOOLCHAIN := local

.PHONY: all build plugin test unit e2e e2e-node tools lint fmt bench bench-replay scenarios clean image print-version

all: build

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/kueuelab

## plugin: kueuelab as a kubectl plugin: bin/kubectl-kueuelab, a link to bin/kueuelab (kubectl runs
## any executable named kubectl-<name> on PATH). With bin/ on PATH: kubectl kueuelab forecast -f job.yaml
plugin: build
	ln -sf kueuelab bin/kubectl-kueuelab

print-version:
	@echo $(VERSION)

## image: the agent image (charts/kueuelab-agent) and the runner image (one replay per pod) as
## image archives in bin/images, built from a static kueuelab and the tools cache, without Docker.
## Load one with `kind load image-archive FILE` or `ctr -n k8s.io images import FILE`.
image: tools
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS) -s -w" -o bin/static/kueuelab ./cmd/kueuelab
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) bin/static/kueuelab image build --image agent --tag $(VERSION) --format $(IMAGE_FORMAT) \
		--revision $$(git rev-parse HEAD) --out $(IMAGE_DIR)/kueuelab-$(VERSION).tar
	SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct) bin/static/kueuelab image build --image runner --tag $(VERSION) --format $(IMAGE_FORMAT) \
		--revision $$(git rev-parse HEAD) --out $(IMAGE_DIR)/kueuelab-runner-$(VERSION).tar

## test: everything CI proves — lint, unit tests, end-to-end tests on a real local control plane.
## The tools come before the unit tests, some of which run them (below).
test: lint tools unit e2e

## unit: the unit tests. A few need the tools cache (the real kube-scheduler on a spec's scheduler
## section), the Go module proxy or a host command (internal/testutil). Under `make test` unit
## waits for `tools` (also with -j); `make unit` alone does not build them (`make tools` does:
## 37–39 min once on 2 cores), and those tests skip saying what is missing and how to get it, except under
## CI=true (CI sets it), where a missing prerequisite fails the test: CI provides them all.
## The log (hack/testlog) is go test's usual output plus every skipped test with its reason, and
## ends with go test's own last line; the whole `go test -json` stream is kept in
## $TMPDIR/kueuelab-unit.json. The exit code is go test's (the log's if only the log failed).
unit: $(if $(filter test,$(MAKECMDGOALS)),tools)
	$(GO) test -count=1 -json $$($(GO) list ./... | grep -v /test/e2e) 2>&1 | tee $${TMPDIR:-/tmp}/kueuelab-unit.json | $(GO) run ./hack/testlog; \
	codes=($${PIPESTATUS[@]}); if [ $${codes[0]} -ne 0 ]; then exit $${codes[0]}; fi; exit $$(( codes[1] | codes[2] ))

## e2e: builds the pinned control-plane binaries into the cache if missing, then runs test/e2e.
e2e: build tools
	KUEUELAB_E2E=1 $(GO) test -count=1 -timeout 40m -v ./test/e2e/... 2>&1 | tee $${TMPDIR:-/tmp}/kueuelab-e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

## e2e-node: the real-node end-to-end test (TestRealNode): a local cluster with a real kubelet
## node, the agent image loaded into it, the agent chart installed with helm and a replay with
## --agent in-cluster. Needs root; installs containerd, runc and the CNI plugins with apt-get when
## missing and builds kubelet and kube-proxy into the tools cache (`tools install --real-node`).
## Not part of `make test`: it changes the host's network while it runs.
e2e-node: build tools
	$(BIN) tools install --real-node
	KUEUELAB_E2E=1 KUEUELAB_E2E_NODE=1 $(GO) test -count=1 -timeout 40m -v -run 'TestRealNode' ./test/e2e/ 2>&1 | tee $${TMPDIR:-/tmp}/kueuelab-e2e-node.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

tools: build
	$(BIN) tools install

$(STATICCHECK):
	@mkdir -p $(TOOLBIN)
	GOBIN=$(TOOLBIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLBIN)/staticcheck $(STATICCHECK)

lint: $(STATICCHECK)
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...

fmt:
	gofmt -w $$(git ls-files '*.go')

## bench: the performance benchmarks; each reports its own baseline in the same run.
bench:
	GOMAXPROCS=1 $(GO) test -run='^$$' -bench=. -benchmem -benchtime=1x ./model/gen/ ./runtime/sim/
	$(GO) test -run='^$$' -bench=ForecastDeepState -benchtime=1x -timeout 60m ./runtime/forecast/
	$(GO) test -run='^$$' -bench=. -benchmem ./model/trace/ ./render/... ./model/hw/ ./runtime/agent/engine/ ./runtime/runner/

## bench-replay: replays on the local control plane, event-driven clock vs the held clock it
## replaced (hack/bench-replay.sh; ~1.5 h, run it on an idle machine).
bench-replay: build tools
	hack/bench-replay.sh results/bench-replay

## scenarios: every scenario of examples/scenarios, each on fresh local clusters, PASS/FAIL per
## expected outcome (hack/scenarios.sh; make test runs only those marked ci; the others take
## minutes to an hour each). SCENARIOS="gang topology" picks some.
scenarios: build tools
	hack/scenarios.sh results/scenarios "$(SCENARIOS)"

clean:
	rm -rf bin
