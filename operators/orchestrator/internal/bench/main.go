// Command bench measures the orchestrator against a real kube-apiserver +
// etcd with the shared harness (libs/testing/bench, bench.ProtectionPlans: what it
// creates, the operator's floor, when it has converged). It is a
// measurement, not a test: `make bench BENCH_OPERATORS=orchestrator`.
package main

import (
	"cairn.dev/libs/testing/bench"
	"cairn.dev/operators/orchestrator/internal/controller"
	"cairn.dev/operators/orchestrator/internal/operator"
)

func main() { bench.Main(bench.ProtectionPlans(operator.New, controller.DesiredBackupJob)) }
