##@ End-to-end

# The suite runs one package at a time: each package starts its own control
# plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
# and the operators as local processes; two at once would crowd 2 cores.
E2E_FLAGS ?= -count=1 -timeout 45m -v
E2E_STATE := $(ROOT)/e2e/.state

.PHONY: e2e
e2e: controlplane ## Run the end-to-end suite (full control plane with kwok, operators as local processes).
	go test $(E2E_FLAGS) -p 1 ./e2e/...

.PHONY: demo
demo: controlplane ## Start a local cluster with the operators and a sample BackupJob; show it until the first backup and restore ran.
	go run ./e2e/cmd/demo up --state $(E2E_STATE)

.PHONY: demo-down
demo-down: ## Stop the demo's operators and delete its cluster.
	go run ./e2e/cmd/demo down --state $(E2E_STATE)
