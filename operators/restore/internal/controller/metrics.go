package controller

import (
	"time"

	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/kindmetrics"
)

// The RestoreJob metrics users alert on (libs/kindmetrics).
var metrics = kindmetrics.NewRestoreJob()

// MetricNames lists every metric this operator exports.
var MetricNames = metrics.Names()

// recordFinished counts a RestoreJob that just reached Succeeded or Failed.
func recordFinished(rj *restorev1.RestoreJob) {
	metrics.Finished.Record(rj.Namespace, string(rj.Status.Phase), rj.Status.StartTime, rj.Status.CompletionTime)
	if rj.Status.Phase == restorev1.PhaseSucceeded {
		at := time.Now()
		if rj.Status.CompletionTime != nil {
			at = rj.Status.CompletionTime.Time
		}
		metrics.LastSuccess.WithLabelValues(rj.Namespace, rj.Status.Source).Set(float64(at.Unix()))
	}
}
