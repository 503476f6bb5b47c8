# Cairn — Kubernetes operators for database data protection.
# `make help` lists every target, grouped.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

ROOT := $(abspath .)
TOOLS_DIR := $(ROOT)/bin/tools
CONTROLPLANE_VERSION := $(shell cat hack/controlplane/VERSION)
CONTROLPLANE_DIR := $(ROOT)/bin/controlplane-$(CONTROLPLANE_VERSION)
CONTROLLER_GEN := $(TOOLS_DIR)/controller-gen
export CAIRN_CONTROLPLANE_DIR := $(CONTROLPLANE_DIR)

# Operators are found, not listed: every operators/<name> module is built,
# tested and tidied; every deploy/<name> base gets its CRDs (from
# apis/<group>, the group folder being the operator's name unless
# API_GROUP_<name> says otherwise), RBAC and webhook manifests generated. The
# one list to edit when an operator is added is platform/kustomization.yaml
# (its base and image pin); the deploy tests fail if a base is missing there.
OPERATORS := $(patsubst operators/%/go.mod,%,$(wildcard operators/*/go.mod))
BASES := $(patsubst deploy/%/kustomization.yaml,%,$(wildcard deploy/*/kustomization.yaml))
API_GROUP_orchestrator := platform
api_group = $(or $(API_GROUP_$(1)),$(1))
# Every Go module of the workspace (go.work) plus the tool modules outside it.
MODULES := apis libs agent agent/contract e2e deploy kubectl-cairn $(addprefix operators/,$(OPERATORS)) hack/controlplane hack/controlplane/etcd hack/tools hack/release
GO_TEST_FLAGS ?= -count=1 -timeout 20m
# Every go command make runs — vet, tests, fuzzing, e2e (and the operators
# it builds), the images, the demo — compiles with the images' flags: static
# (CGO_ENABLED=0) and -trimpath, so one build cache serves them all. With
# the defaults for tests and vet the whole dependency tree (client-go,
# controller-runtime, ...) was compiled twice; measured cold, the operators'
# test binaries after the images' build: 540 s with the defaults, 269 s with
# these flags. CGO_ENABLED=1 make test GO_TEST_FLAGS='-count=1 -race' for the race
# detector (it needs cgo).
export CGO_ENABLED ?= 0
export GOFLAGS := $(strip -trimpath $(filter-out -trimpath,$(GOFLAGS)))
comma := ,

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9.-]+:.*?##/ { printf "  \033[36m%-22s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Setup

.PHONY: controlplane
controlplane: ## Build kube-apiserver, kube-controller-manager, kube-scheduler, etcd, kwok and kwokctl from Go modules into bin/ (skips what is built).
	env -u CGO_ENABLED hack/controlplane/build.sh $(CONTROLPLANE_DIR)

$(CONTROLLER_GEN): hack/tools/go.mod
	cd hack/tools && GOWORK=off go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

.PHONY: tools
tools: $(CONTROLLER_GEN) ## Build the code generators into bin/tools.

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code for the API types.
	cd apis && $(CONTROLLER_GEN) object:headerFile=$(ROOT)/hack/boilerplate.go.txt paths=./...
	cd libs && $(CONTROLLER_GEN) object:headerFile=$(ROOT)/hack/boilerplate.go.txt paths=./internal/testtype/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs, RBAC and webhook manifests into deploy/<operator>/ (and libs' test CRD).
	cd libs && $(CONTROLLER_GEN) crd paths=./internal/testtype/... output:crd:dir=testdata/crds
	@$(foreach op,$(BASES),echo "manifests: $(op)"; \
	  rm -rf deploy/$(op)/crd/bases deploy/$(op)/rbac/generated deploy/$(op)/webhook/generated; \
	  if [ -d apis/$(call api_group,$(op)) ]; then $(CONTROLLER_GEN) crd paths=./apis/$(call api_group,$(op))/... output:crd:dir=deploy/$(op)/crd/bases; fi; \
	  $(CONTROLLER_GEN) rbac:roleName=cairn-$(op)-manager paths=./operators/$(op)/... output:rbac:dir=deploy/$(op)/rbac/generated; \
	  $(CONTROLLER_GEN) webhook paths=./operators/$(op)/... output:webhook:dir=deploy/$(op)/webhook/generated;)

.PHONY: fmt
fmt: ## Format all Go code.
	gofmt -w $$(git ls-files '*.go')

.PHONY: tidy
tidy: ## Run go mod tidy in every module.
	@for m in $(MODULES); do (cd $$m && GOWORK=off go mod tidy); done

# The operators' and kubectl-cairn's go.mod require the versions the
# workspace selects (`go work sync`, then `make tidy`), so their GOWORK=off
# builds reuse the workspace build's compiled packages (measured: 235 CPU-s
# of recompiling k8s.io/* at older versions otherwise). Sync again when a
# workspace module's requirements move.
.PHONY: build
build: ## Build every operator binary and the kubectl plugin (bin/kubectl-cairn) into bin/ (static, CGO_ENABLED=0, -trimpath as `make images`: one build cache), also with GOWORK=off.
	@for op in $(OPERATORS); do \
	  (cd operators/$$op && CGO_ENABLED=0 go build -trimpath -o $(ROOT)/bin/$$op-operator . && GOWORK=off CGO_ENABLED=0 go build -trimpath -o /dev/null .); \
	done
	cd kubectl-cairn && CGO_ENABLED=0 go build -trimpath -o $(ROOT)/bin/kubectl-cairn . && GOWORK=off CGO_ENABLED=0 go build -trimpath -o /dev/null .

##@ Test

.PHONY: test
# hack/test.sh runs every step to its end, even after one failed, and ends
# with a summary of the failed tests and their first error lines.
test: controlplane agent-deps ## Run every test (unit and integration against a real kube-apiserver + etcd; agent against real databases and S3); ends with a summary of what failed.
	hack/test.sh \
	  'go test $(GO_TEST_FLAGS) ./apis/... ./agent/contract/... ./libs/... ./kubectl-cairn/... $(addprefix ./operators/,$(addsuffix /...,$(OPERATORS))) ./deploy/...' \
	  'cd hack/release && GOWORK=off go test $(GO_TEST_FLAGS) ./...' \
	  '$(MAKE) --no-print-directory test-new-operator' \
	  '$(MAKE) --no-print-directory test-agent' \
	  '$(MAKE) --no-print-directory fuzz'

# An execution count, not a duration: Go 1.26's fuzz coordinator can fail a
# target with a bare "context deadline exceeded" when a duration ends while a
# starved worker is mid-call (golang/go#75804, fixed in Go 1.27; CI saw it).
FUZZTIME ?= 100000x
FUZZ_TARGETS := libs/names:FuzzPrefix libs/validation:FuzzDatabase libs/validation:FuzzStorage libs/validation:FuzzCheckSQL agent/internal/config:FuzzLoad agent/internal/engine:FuzzQuoteConninfo agent/patterns:FuzzGlob agent/patterns:FuzzParse agent/internal/inventory:FuzzArchiveCounter agent/internal/inventory:FuzzCopyText agent/internal/inventory:FuzzSQLDumpCounter agent/internal/loaddata:FuzzConverter

.PHONY: fuzz
fuzz: ## Fuzz the admission validators and the agent's config parsing, FUZZTIME (100000x: executions) each; seed corpora in testdata/fuzz.
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; fn=$${t##*:}; mod=$${pkg%%/*}; \
	  echo "fuzz: $$pkg $$fn ($(FUZZTIME))"; \
	  (cd $$mod && go test ./$${pkg#*/} -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME)); \
	done

.PHONY: print-modules
print-modules:
	@echo $(MODULES)

.PHONY: verify
verify: $(CONTROLLER_GEN) ## Fail if code is unformatted, vet fails, go.mod is untidy or generated files are stale.
	hack/verify.sh

include $(wildcard hack/make/*.mk)

##@ Benchmarks

.PHONY: bench
BENCH_OPERATORS ?= backup restore migration orchestrator
bench: controlplane ## Benchmark the operators on a real API server, one table each (BENCH_OPERATORS="backup restore migration orchestrator"): N=100 and 1000 objects, BENCH_N=100,1000,10000 for a scaling table (convergence vs the like-for-like floor measured before and after the operator, writes, reads, conversions, reconciles, CPU and heap per object).
	for op in $(BENCH_OPERATORS); do \
		(cd operators/$$op && go run ./internal/bench -n $(or $(BENCH_N),100$(comma)1000)) || exit 1; \
		echo; \
	done
