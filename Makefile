# kueuelab — build, test, lint, bench. Everything the targets need is installed by the targets
# themselves into a cache outside the repo (KUEUELAB_CACHE), so a fresh machine needs only Go.

SHELL          := /bin/bash
GO             ?= go
KUEUELAB_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/kueuelab
TOOLBIN        := $(KUEUELAB_CACHE)/devtools
STATICCHECK_VERSION := v0.7.0
STATICCHECK    := $(TOOLBIN)/staticcheck-$(STATICCHECK_VERSION)
BIN            := bin/kueuelab
export GOTOOLCHAIN := local

.PHONY: all build test unit e2e tools lint fmt bench bench-replay scenarios clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/kueuelab

## test: everything CI proves — lint, unit tests, end-to-end tests on a real local control plane.
test: lint unit e2e

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/e2e)

## e2e: builds the pinned control-plane binaries into the cache if missing, then runs test/e2e.
e2e: build tools
	KUEUELAB_E2E=1 $(GO) test -count=1 -timeout 40m -v ./test/e2e/... 2>&1 | tee $${TMPDIR:-/tmp}/kueuelab-e2e.log | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test.go)' ; exit $${PIPESTATUS[0]}

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
	GOMAXPROCS=1 $(GO) test -run='^$$' -bench=. -benchmem -benchtime=1x ./model/gen/
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
