package controller

import (
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/kindmetrics"
)

// The MigrationJob metrics (libs/kindmetrics).
var metrics = kindmetrics.NewMigrationJob()

// MetricNames lists every metric this operator exports.
var MetricNames = metrics.Names()

// recordFinished counts a MigrationJob that just reached Succeeded or Failed.
func recordFinished(mj *migrationv1.MigrationJob) {
	metrics.Finished.Record(mj.Namespace, string(mj.Status.Phase), mj.Status.StartTime, mj.Status.CompletionTime)
}
