# gatekeeper: make targets are the interface.
#   make demo          set everything up and show gatekeeper deciding and sandboxing
#   make test          set everything up and run every test (CI runs this)
#   make walkthroughs  run the six end-to-end walkthroughs
#   make test-console  the live console in headless Chromium (walkthroughs/console)
#   make screenshot    regenerate docs/console.png, the README's picture of the console
#   make bench         measure gatekeeper against the alternatives (writes bench/results.json)
#   make soak          the soak and fault suite, long profile (writes RELIABILITY.md's figures); SOAK_SESSIONS, SOAK_SECONDS scale it
#   make build         build bin/gatekeeper

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := bin/gatekeeper
FUZZTIME ?= 50000x
export GOFLAGS ?= -buildvcs=false

.PHONY: all build engine image chromium test test-go test-fuzz test-ts walkthroughs test-console test-soak screenshot demo bench soak clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/gatekeeper

# engine: a Docker engine that answers, with gVisor's runsc registered.
engine:
	scripts/ensure-docker

# image: the default sandbox image, built locally (no registry); a no-op when its recipe is unchanged.
image: build engine
	$(BIN) image build

test: build engine image test-go test-fuzz test-ts walkthroughs test-console test-soak
	@echo "make test: all suites passed"

test-go:
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...

# A short run of every fuzz target; the corpus lives in each package's testdata/fuzz.
test-fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz

test-ts: build
	cd ts-client && npm ci --no-audit --no-fund --loglevel=error && npm run build && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm test

walkthroughs: build engine image
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm run all

# chromium: Debian's chromium package (the browser tests never download one).
chromium:
	scripts/ensure-chromium >/dev/null

# The console's browser test: the real sidecar with --ui, real traffic, headless Chromium; screenshots in walkthroughs/build/console-out.
test-console: build engine image chromium
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm run console

screenshot: build engine image chromium
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) CONSOLE_SCREENSHOT=$(CURDIR)/docs/console.png npm run console

demo: build engine image
	scripts/demo

bench: build engine image
	scripts/bench

# The soak and fault suite (bench/soak) against a Docker engine of its own: load, faults, accounting.
# The long profile writes bench/soak/results.json, bench/soak/timeline.svg and RELIABILITY.md's figures.
soak: build engine image
	scripts/soak -profile long -out bench/soak -reliability-md RELIABILITY.md

# Its short profile (a few minutes), part of make test; its report stays in bench/soak/out.
test-soak: build engine image
	scripts/soak -profile short

clean:
	rm -rf bin ts-client/dist bench/out bench/soak/out
