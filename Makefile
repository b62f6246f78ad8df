# gatekeeper: make targets are the interface.
#   make demo          set everything up and show gatekeeper deciding and sandboxing
#   make test          set everything up and run every test (CI runs this)
#   make walkthroughs  run the six end-to-end walkthroughs
#   make bench         measure gatekeeper against the alternatives (writes bench/results.json)
#   make build         build bin/gatekeeper

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := bin/gatekeeper
FUZZTIME ?= 50000x
export GOFLAGS ?= -buildvcs=false

.PHONY: all build engine image image-default test test-go test-fuzz test-ts walkthroughs demo bench clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/gatekeeper

# engine: a Docker engine that answers, with gVisor's runsc registered.
engine:
	scripts/ensure-docker

# image: every sandbox image profile (minimal, python, python-data, node), built locally from
# Debian packages (no registry); a no-op for each profile whose recipe is unchanged. It prints
# what each took and the total. image-default: the default profile (python) alone.
image: build engine
	$(BIN) image build --all

image-default: build engine
	$(BIN) image build

test: build engine image test-go test-fuzz test-ts walkthroughs
	@echo "make test: all suites passed"

test-go:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# A short run of every fuzz target; the corpus lives in each package's testdata/fuzz.
test-fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz

test-ts: build
	cd ts-client && npm ci --no-audit --no-fund --loglevel=error && npm run build && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm test

walkthroughs: build engine image-default
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm run all

demo: build engine image-default
	scripts/demo

bench: build engine image
	scripts/bench

clean:
	rm -rf bin ts-client/dist bench/out
