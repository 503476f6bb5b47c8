package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/kindmetrics"
)

// RestoreJob metrics users alert on (libs/kindmetrics). RestoreJobs are
// one-off, so no metric is labelled by RestoreJob name (that would grow
// without bound); the source ("backupjob/orders-db", "s3://bucket/prefix
// ns/name") is bounded by the number of backups restored from.
var (
	metricSet = kindmetrics.New()
	finished  = metricSet.Finished("restorejob", "RestoreJobs",
		"Duration of finished restores, from Job creation to finish, by result.",
		prometheus.ExponentialBuckets(5, 2, 12)) // 5 s .. ~2.8 h
	lastSuccess = metricSet.Gauge("cairn_restorejob_last_success_timestamp_seconds",
		"Unix time the last RestoreJob from a source succeeded (e.g. for 'no verified restore for a week' alerts).",
		"namespace", "source")
)

// MetricNames lists every metric this operator exports.
var MetricNames = metricSet.Names()

// recordFinished counts a RestoreJob that just reached Succeeded or Failed.
func recordFinished(rj *restorev1.RestoreJob) {
	finished.Record(rj.Namespace, string(rj.Status.Phase), rj.Status.StartTime, rj.Status.CompletionTime)
	if rj.Status.Phase == restorev1.PhaseSucceeded {
		at := time.Now()
		if rj.Status.CompletionTime != nil {
			at = rj.Status.CompletionTime.Time
		}
		lastSuccess.WithLabelValues(rj.Namespace, rj.Status.Source).Set(float64(at.Unix()))
	}
}
