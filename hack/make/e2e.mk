##@ End-to-end

# Each package starts its own control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kwok), the operators (as local
# processes, or as the installed platform's pods: tests/installed) and, for
# real data, its own pod-runner node and PostgreSQL, MariaDB and versitygw.
# hack/e2e.sh runs E2E_BESIDE (tests/data, mostly waiting on the clock) in a
# lane of its own beside the other packages, which run one at a time.
E2E_FLAGS ?= -count=1 -timeout 45m -v
E2E_BESIDE ?= ./e2e/tests/data/
E2E_STATE := $(ROOT)/e2e/.state

.PHONY: e2e
e2e: controlplane agent-deps images ## Run the end-to-end suite in two lanes side by side (hack/e2e.sh: tests/data beside the other packages; full control plane; the installed platform's operator pods as containers of their images (tests/installed), elsewhere operators as local processes; agent pods as real containers on the pod runner against real PostgreSQL, MariaDB and S3; kwok for faults).
	E2E_FLAGS="$(E2E_FLAGS)" E2E_BESIDE="$(E2E_BESIDE)" hack/e2e.sh

.PHONY: demo
# The demo program is built with the images' flags (static, -trimpath), so
# it reuses what `make images` compiled (client-go, controller-runtime, ...):
# measured cold, 59 s after the images' build instead of 183 s on its own.
DEMO_GO := CGO_ENABLED=0 go run -trimpath ./e2e/cmd/demo
# The demo's last step: a ProtectionPlan over a database of DEMO_RTO_MB MB,
# its measured RTO with one stream, then with spec.backup.parallelism: 2
# (0 skips the step).
DEMO_RTO_MB ?= 512

demo: controlplane agent-deps images ## Start a local cluster with the platform as installed (operators' Deployments as containers of their images), real PostgreSQL/MariaDB/S3 and the samples; show it until the first real backups and restores ran.
	$(DEMO_GO) up --state $(E2E_STATE) --rto-mb $(DEMO_RTO_MB)

.PHONY: demo-down
demo-down: ## Stop the demo's data plane (servers, pod runner and the operators' pods) and delete its cluster.
	$(DEMO_GO) down --state $(E2E_STATE)

# The soak (e2e/soak, run by e2e/tests/soak): `make e2e` runs it for 100 s;
# `make soak` for SOAK_DURATION. SOAK_SEED repeats a fault schedule (default:
# the clock; the run prints it). SOAK_TIMEOUT bounds the whole run (set-up,
# soak, the wait for runs under way, the cutover, teardown): raise it with
# SOAK_DURATION beyond an hour.
SOAK_DURATION ?= 30m
SOAK_SEED ?=
SOAK_TIMEOUT ?= 90m

.PHONY: soak
soak: controlplane agent-deps images ## Soak the installed platform for SOAK_DURATION (30m): BackupJobs every minute on PostgreSQL and MariaDB, a ProtectionPlan verifying every backup, RestoreJobs, a Continuous MigrationJob, under a seeded random fault schedule (SOAK_SEED; operator leader/standby kills, agent kills mid-backup/restore, kube-apiserver and etcd restarts, S3 down a minute); prints the invariants. `make e2e` runs a 100 s soak.
	SOAK_DURATION=$(SOAK_DURATION) SOAK_SEED=$(SOAK_SEED) go test -count=1 -v -timeout $(SOAK_TIMEOUT) -run '^TestSoak$$' ./e2e/tests/soak/
