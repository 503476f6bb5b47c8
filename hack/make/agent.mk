# The agent (module cairn.dev/agent): the data mover run in Job pods.
# Included by the main Makefile, which defines ROOT, TOOLS_DIR and GO_TEST_FLAGS.

AGENT_VERSION ?= $(shell git describe --tags --match 'agent/v*' --always --dirty 2>/dev/null | sed 's|^agent/||' || echo dev)
AGENT_BENCH_FLAGS ?=

##@ Agent

.PHONY: agent-deps
agent-deps: ## Install the agent's test dependencies: PostgreSQL 15, MariaDB, zstd (apt) and versitygw (into bin/tools); skips what is present.
	hack/agent-deps.sh

.PHONY: build-agent
build-agent: ## Build the agent into bin/agent (CGO_ENABLED=0, static; version stamped from AGENT_VERSION).
	cd agent && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=$(AGENT_VERSION)" -o $(ROOT)/bin/agent .

.PHONY: test-agent
test-agent: ## Run the agent's tests: unit, and data path against real PostgreSQL, MariaDB and versitygw (needs agent-deps).
	cd agent && go test $(GO_TEST_FLAGS) ./...

##@ Benchmarks

.PHONY: bench-agent
bench-agent: agent-deps ## Benchmark the agent side by side with its peers, every issue-16 figure in one run: PostgreSQL and MariaDB at ~100 MB and ~1 GB, backup → PVC vs the one-pass pipe (dump | zstd > file, and the same + sync), backup → S3 vs dump | restic backup --stdin, restore vs zstd -d | pg_restore / mysql; time, CPU, stored bytes, peak RSS; and issue 27's point-in-time figures (~4 min): the archivers' lag under a pgbench-/sysbench-like write load at max segment age 10s and 1m (the default), p50/p99, and a restore to a time (base + replay, replay rate vs the source's write rate) next to a plain restore. AGENT_BENCH_FLAGS narrows or widens it (e.g. -sizes 1000 -mysql-sizes= -cases 'Z0|PVC'; -pitr= skips point in time, -sizes= -mysql-sizes= runs only it, -pitr mysql one engine; issue 26's multi-table parallel figures: -mysql-parallel-sizes 1000 -pg-parallel-sizes 1000 -threads 2 -runs 3).
	cd agent && go run ./bench $(AGENT_BENCH_FLAGS)

.PHONY: bench-migration
bench-migration: agent-deps ## Benchmark agent migrate copy (direct, PostgreSQL, parallel 4) against pgcopydb clone on the same ~1 GB database pair (four tables of different sizes), MariaDB (~200 MB) against mysqldump | mysql on one and four connections, and the cost of agent migrate verify on top. MIGRATION_BENCH_MB (1000), MIGRATION_BENCH_MYSQL_MB (200).
	cd agent && go run ./bench -sizes= -mysql-sizes= -pitr= -migration-sizes $(or $(MIGRATION_BENCH_MB),1000) -mysql-migration-sizes $(or $(MIGRATION_BENCH_MYSQL_MB),200) $(AGENT_BENCH_FLAGS)
