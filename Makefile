# kilofed: see README.md. `make demo` and `make test` do all the set-up.
SHELL := /bin/bash
GO ?= go
LAB_BINS := $(shell e2e/labbins/build.sh --print-dir)
export KILOFED_LAB_BINS := $(LAB_BINS)
BIN := $(CURDIR)/bin
TEST_TIMEOUT ?= 60m

.PHONY: all build deps lab-bins test unit-test e2e-test bench bench-quick demo demo-mesh lint fmt clean lab-clean manifests chart docs

all: build

## build: the kilofed binaries and the lab's CLI (kilofed-lab) into ./bin
build:
	$(GO) build -o $(BIN)/ ./cmd/... ./e2e/cmd/...

## deps: Debian packages the lab needs (installed as root, else the apt-get line is printed)
deps:
	@hack/deps.sh

## lab-bins: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubectl, CoreDNS, kube-router, helm at pinned versions, cached outside the tree
lab-bins:
	@e2e/labbins/build.sh

## test: every test, unit and lab (needs root for the lab)
test: deps lab-bins unit-test e2e-test

## unit-test: the unit tests of both modules, with the race detector
unit-test:
	cd mesh && $(GO) test -race -count=1 ./...
	$(GO) test -race -count=1 $$($(GO) list ./... | grep -v /e2e)

e2e-test: build
	CI=$${CI:-true} KILOFED_BIN=$(BIN) $(GO) test -count=1 -p 1 -timeout $(TEST_TIMEOUT) ./e2e/...

## bench: every benchmark (Go benchmarks of both modules -count 5, lab benchmarks once each under the lab lock); prints one table, writes bench/results/latest.{json,md}; QUICK=1: cheap ones only, once
bench: deps lab-bins build
	CI=$${CI:-true} KILOFED_BIN=$(BIN) $(GO) run ./hack/bench $(if $(QUICK),--quick)

## bench-quick: the cheap benchmarks once each, a sanity check in a few minutes
bench-quick:
	$(GO) run ./hack/bench --quick

## demo: a federation of two lab clusters, kilofed installed in each with its Helm chart (helm install), joined with kilofed join, dr's echo Service exported and answered in prod by its clusterset.local name; torn down on exit (also on Ctrl-C)
demo: deps lab-bins build
	@echo "demo: binaries ready in $(BIN) and $(LAB_BINS); starting the federation (about a minute, Ctrl-C tears it down)"
	$(BIN)/kilofed-lab demo --bin $(BIN)

## demo-mesh: the seed's cluster across two locations with kg on every node: the mesh, and a pod answered through WireGuard
demo-mesh: deps lab-bins build
	$(BIN)/kilofed-lab demo-mesh --kg $(BIN)/kg

## lint: gofmt and go vet on both modules
lint:
	@test -z "$$(gofmt -l . )" || { gofmt -l . ; exit 1; }
	$(GO) vet ./...
	cd mesh && $(GO) vet ./...
	$(GO) test -count=1 -run 'TestChartLintsClean|TestChartCopiesEqualTheirSources|TestReadmeValuesTableIsUpToDate|TestPlainManifestsAreAFreshRenderOfTheChart' ./charts/kilofed/

## chart: regenerate the chart's copies of the CRDs and admission policy, and its README's values table
chart:
	$(GO) generate ./charts/kilofed/

## docs: regenerate docs/reference.md's tables (flags, annotations, CRDs, metrics) and docs/architecture.svg; the tests of ./docs fail while they are stale
docs:
	$(GO) generate ./docs/

## manifests: deploy/kilofed.yaml, the chart rendered for kubectl apply (never edited by hand)
manifests: chart
	$(GO) run ./charts/kilofed/render -o deploy/kilofed.yaml

## lab-clean: remove leftovers of a crashed lab run (only the lab's own kfl- names)
lab-clean: build
	$(BIN)/kilofed-lab clean

clean:
	rm -rf $(BIN)
