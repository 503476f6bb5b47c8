# The database version matrix (docs/compatibility.md): server images of
# every supported version this machine's Debian archive ships, the agent's
# per-PostgreSQL-major images, and the tests against them.
# Included by the main Makefile, which defines ROOT and GO_TEST_FLAGS.

# Which servers the version-matrix tests run (agent/internal/testenv,
# CAIRN_DB_MATRIX): ci (default: the oldest and newest of each engine), all,
# host (the host's PostgreSQL 15 and MariaDB 10.11 only), or names.
DB_MATRIX_SERVERS ?=
AGENT_MATRIX_IMAGES ?= pg13 pg17 pg18
# What the default (ci) matrix needs beyond `make images`' cairn.local/agent:dev:
# measured cold here ~15 min on 2 busy cores (docs/compatibility.md).
MATRIX_CI_SERVERS := pg13 pg18 mariadb11.8 mysql9.7
MATRIX_CI_AGENTS := pg13 pg18

##@ Version matrix

.PHONY: db-images
db-images: ## Build the database server images of the version matrix (PostgreSQL 13, 17, 18, MariaDB 11.8, MySQL 9.7) from Debian packages: debootstrap bases per suite + docker build, each skipped when present. DB_MATRIX_SERVERS narrows it (e.g. "pg13 pg18").
	hack/images/servers.sh $(DB_MATRIX_SERVERS)

.PHONY: agent-images
agent-images: ## Build the agent's per-PostgreSQL-major images (cairn.local/agent:dev-pg17 on trixie, dev-pg18 on sid with Oracle MySQL's client, dev-pg13 on bullseye; AGENT_MATRIX_IMAGES narrows it) from agent/Containerfile around the host-built agent.
	hack/images/agents.sh $(AGENT_MATRIX_IMAGES)

.PHONY: test-matrix
test-matrix: agent-deps images db-images agent-images ## Run the version-sensitive agent tests against every server of the matrix (CAIRN_DB_MATRIX=all): backup/restore round trips, cross-major restores, the unsupported-server error.
	cd agent && CAIRN_DB_MATRIX=all go test $(GO_TEST_FLAGS) ./internal/testenv/ ./test/matrix/

.PHONY: db-clean
db-clean: ## Remove every container the agent's tests started (label dev.cairn.test) that is left over.
	ids=$$(docker ps -aq --filter label=dev.cairn.test); [ -z "$$ids" ] || docker rm -f -v $$ids

.PHONY: matrix-images-ci
matrix-images-ci: ## Build only what the default (ci) version matrix needs: the PostgreSQL 13 and 18, MariaDB 11.8 and MySQL 9.7 server images and the dev-pg13, dev-pg18 agent images, side by side where they share no base (hack/images/matrix-ci.sh; each skipped/cached when present).
	hack/images/matrix-ci.sh

# The agent's tests run the version matrix (CAIRN_DB_MATRIX, default ci)
# with agent runs as containers of the agent images: `make images`'
# agent:dev and the ci matrix's images are built first, so `make test` (and
# `make test-agent`) set up everything on a fresh machine; each is cached
# when present (`make images` rebuilds only the binaries' layer).
test-agent: images matrix-images-ci
