package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/kindmetrics"
)

// MigrationJob metrics (libs/kindmetrics). MigrationJobs are one-off: no
// metric is labelled by name.
var (
	metricSet = kindmetrics.New()
	finished  = metricSet.Finished("migrationjob", "MigrationJobs",
		"Duration of finished migrations, from the first step to the end (approval waits included), by result.",
		prometheus.ExponentialBuckets(10, 2, 14)) // 10 s .. ~45 h
)

// MetricNames lists every metric this operator exports.
var MetricNames = metricSet.Names()

// recordFinished counts a MigrationJob that just reached Succeeded or Failed.
func recordFinished(mj *migrationv1.MigrationJob) {
	finished.Record(mj.Namespace, string(mj.Status.Phase), mj.Status.StartTime, mj.Status.CompletionTime)
}
