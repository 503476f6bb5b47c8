// Command bench measures the restore operator against a real kube-apiserver +
// etcd with the shared harness (libs/testing/bench, bench.RestoreJobs: what it
// creates, the operator's floor, when it has converged). It is a
// measurement, not a test: `make bench BENCH_OPERATORS=restore`.
package main

import (
	"cairn.dev/libs/testing/bench"
	"cairn.dev/operators/restore/internal/controller"
	"cairn.dev/operators/restore/internal/operator"
)

func main() { bench.Main(bench.RestoreJobs(operator.New, controller.DesiredJob)) }
