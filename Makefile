# gatekeeper: make targets are the interface.
#   make demo          set everything up and show gatekeeper deciding and sandboxing
#   make test          set everything up and run every test (CI runs this), the Kubernetes cluster's last
#   make walkthroughs  run the ten end-to-end walkthroughs
#   make workloads     run the ten seed workloads (walkthroughs/workloads) and print their table
#   make test-console  the live console in headless Chromium (walkthroughs/console)
#   make screenshot    regenerate docs/console.png, the README's picture of the console
#   make bench         measure gatekeeper against the alternatives (writes bench/results.json)
#   make soak          the soak and fault suite, long profile (writes RELIABILITY.md's figures); SOAK_SESSIONS, SOAK_SECONDS scale it
#   make build         build bin/gatekeeper
#   make client        pack @gatekeeper/client as bin/gatekeeper-client-<version>.tgz, to npm install in an agent's project
#   make kube          bring up the single-node test cluster (scripts/ensure-kube; see docs/KUBERNETES.md)
#   make test-kube     bring it up and run the Kubernetes backend's tests and walkthroughs against it;
#                      make kube-down takes it down

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
GO ?= go
BIN := bin/gatekeeper
FUZZTIME ?= 50000x
export GOFLAGS ?= -buildvcs=false

CLIENT_VERSION := $(shell node -p "require('./ts-client/package.json').version" 2>/dev/null)
CLIENT_TGZ := bin/gatekeeper-client-$(CLIENT_VERSION).tgz

.PHONY: all build client engine image image-default chromium kube kube-down test test-go test-fuzz test-kube ts-deps test-ts test-cli test-install walkthroughs workloads test-console test-soak screenshot demo bench soak clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/gatekeeper

# client: @gatekeeper/client packed as npm would publish it (its prepack builds dist/ afresh), for
# `npm install <checkout>/$(CLIENT_TGZ)` in an agent's own project (ts-client/README.md, "Install").
client:
	mkdir -p bin
	cd ts-client && npm ci --no-audit --no-fund --loglevel=error && npm pack --pack-destination ../bin --loglevel=error
	@test -f $(CLIENT_TGZ) && echo "make client: $(CLIENT_TGZ)"

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

# kube: a real single-node Kubernetes cluster in its own network namespace; the
# first run builds it from Go modules (cached), later runs only start it.
kube: build engine image
	scripts/ensure-kube up

kube-down:
	scripts/ensure-kube down

test: build engine image test-go test-fuzz test-ts test-install test-cli walkthroughs workloads test-console test-soak test-kube
	scripts/ensure-kube down
	@echo "make test: all suites passed"

# runner/toolwrap's tests typecheck the generated .d.ts with ts-client's TypeScript; cmd/gatekeeper's
# bundle tests serve bundles with Debian's nginx (installed here when missing; under CI=true they fail without it).
test-go: ts-deps
	scripts/ensure-command nginx nginx
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 30m ./...

# A short run of every fuzz target; the corpus lives in each package's testdata/fuzz.
test-fuzz:
	FUZZTIME=$(FUZZTIME) scripts/fuzz

# The Kubernetes backend against the real cluster (build tag kube): the cluster's smoke test, the
# conformance suite under runc and gVisor, the canaries, cleanup, the pool, image loading; a one-shot
# gatekeeper run --runner kube; agent Pods with gatekeeper as their native sidecar, from
# docs/kubernetes (TestKubeAgentPods: builds and loads the agent image, about 7 min); then the happy-path and resource-abuse walkthroughs through
# serve --runner kube.
# Two tests at a time on any machine (-parallel defaults to the core count): the suite shares one
# node and the cluster's eight egress ports (each test's runner holds one while it lives): with as many
# at once as a large machine has cores they could run out, and the suite is proven at two.
test-kube: kube
	eval "$$(scripts/ensure-kube env)" && $(GO) vet -tags kube ./runner/kube/ && $(GO) test -tags kube -count=1 -parallel 2 -v -timeout 30m ./runner/kube/
	eval "$$(scripts/ensure-kube env)" && $(GO) vet -tags kube ./cmd/gatekeeper/ && $(GO) test -tags kube -count=1 -v -run '^TestKube' -timeout 20m ./cmd/gatekeeper/
	eval "$$(scripts/ensure-kube env)" && cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && \
	  export GATEKEEPER_BIN=$(CURDIR)/$(BIN) WALKTHROUGH_RUNNER=kube && npm run 1 && npm run 6

ts-deps:
	cd ts-client && npm ci --no-audit --no-fund --loglevel=error

test-ts: build ts-deps
	cd ts-client && npm run build && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm test

# What a new user does (ts-client/test/install): a clean copy of the checkout, `make build client` there, a fresh
# npm project outside it with the packed client and its peers from the npm registry, the agent of
# ts-client/README.md's own example, one query through the copied binary's sidecar and the real engine
# with a scripted model: a Read denied, a sandboxed run allowed, as the README says.
test-install: engine image-default
	node --test --test-concurrency=1 ts-client/test/install/

# The Claude Code CLI under gatekeeper: the pinned claude binary (walkthroughs/package.json) with the
# managed settings of `gatekeeper claude-code install`, the real sidecar and engine. Needs root: each
# run mounts the installed settings at /etc/claude-code in a private mount namespace.
test-cli: build engine image-default
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm test

# Walkthrough 9 (sessions) uses the python-data profile (pandas, matplotlib): every profile is built,
# a no-op for each whose recipe is unchanged.
walkthroughs: build engine image
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm run all

# The seed workloads: ten sample projects a model would do (hello world to a 100 MiB log, a wheel, a
# proxied API client, escapes), each through the Agent SDK, the client, the sidecar and the sandbox with a
# scripted model, checked against figures computed by the test; a table of results at the end. They use
# the python, python-data and node profiles; unzip checks the wheel one of them builds.
workloads: build engine image
	scripts/ensure-command unzip unzip
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm run workloads

# chromium: Debian's chromium package (the browser tests never download one).
chromium:
	scripts/ensure-chromium >/dev/null

# The console's browser test: the real sidecar with --ui, real traffic, headless Chromium; screenshots in walkthroughs/build/console-out.
test-console: build engine image-default chromium
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) npm run console

screenshot: build engine image-default chromium
	cd walkthroughs && npm ci --no-audit --no-fund --loglevel=error && GATEKEEPER_BIN=$(CURDIR)/$(BIN) CONSOLE_SCREENSHOT=$(CURDIR)/docs/console.png npm run console

demo: build engine image-default
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
