// Command bench measures the migration operator against a real kube-apiserver +
// etcd with the shared harness (libs/testing/bench, bench.MigrationJobs: what it
// creates, the operator's floor, when it has converged). It is a
// measurement, not a test: `make bench BENCH_OPERATORS=migration`.
package main

import (
	"cairn.dev/libs/testing/bench"
	"cairn.dev/operators/migration/internal/controller"
	"cairn.dev/operators/migration/internal/operator"
)

func main() { bench.Main(bench.MigrationJobs(operator.New, controller.DesiredFirstJob)) }
