# gatekeeper: make targets are the interface.
#   make demo          set everything up and show gatekeeper deciding and sandboxing
#   make test          set everything up and run every test (CI runs this)
#   make walkthroughs  run the seven end-to-end walkthroughs
#   make bench         measure gatekeeper against the alternatives (writes bench/results.json)
#   make build         build bin/gatekeeper

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := bin/gatekeeper
FUZZTIME ?= 50000x
export GOFLAGS ?= -buildvcs=false

.PHONY: all build engine image test test-go test-fuzz test-ts test-cli walkthroughs demo bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/gatekeeper

# engine: a Docker engine that answers, with gVisor's runsc registered.
engine:
	scripts/ensure-docker

# image: the default sandbox image, built locally (no registry); a no-op when its recipe is unchanged.
image: build engine
	$(BIN) image build

test: build engine image test-go test-fuzz test-ts test-cli walkthroughs
	@echo "make test: all suites passed"

test-go:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# A short run of every fuzz target; the corpus lives in each package's testdata/fuzz.
test-fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz

test-ts: build
	cd ts-client && npm ci --no-audit --no-fund --loglevel=error && npm run build && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm test

# The Claude Code CLI under gatekeeper: the pinned claude binary (walkthroughs/package.json) with the
# managed settings of `gatekeeper claude-code install`, the real sidecar and engine. Needs root: each
# run mounts the installed settings at /etc/claude-code in a private mount namespace.
test-cli: build engine image
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm test

walkthroughs: build engine image
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm run all

demo: build engine image
	scripts/demo

bench: build engine image
	scripts/bench

clean:
	rm -rf bin ts-client/dist bench/out
