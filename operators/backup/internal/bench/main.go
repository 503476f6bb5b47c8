// Command bench measures the backup operator against a real kube-apiserver +
// etcd with the shared harness (libs/testing/bench, bench.BackupJobs: what it
// creates, the operator's floor, when it has converged). It is a
// measurement, not a test: `make bench BENCH_OPERATORS=backup`.
package main

import (
	"cairn.dev/libs/testing/bench"
	"cairn.dev/operators/backup/internal/controller"
	"cairn.dev/operators/backup/internal/operator"
	"cairn.dev/operators/backup/internal/webhook"
)

func main() {
	bench.Main(bench.BackupJobs(operator.New, controller.DesiredCronJob, webhook.ConvertPath))
}
