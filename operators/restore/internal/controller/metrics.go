package controller

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	restorev1 "cairn.dev/apis/restore/v1"
)

// RestoreJob metrics users alert on, registered with controller-runtime's
// registry (served on the manager's /metrics). RestoreJobs are one-off, so no
// metric is labelled by RestoreJob name (that would grow without bound); the
// source ("backupjob/orders-db", "s3://bucket/prefix ns/name") is bounded by
// the number of backups restored from.
var (
	finishedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_restorejob_finished_total",
		Help: "Finished RestoreJobs by namespace and result (Succeeded, Failed).",
	}, []string{"namespace", "result"})
	durationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cairn_restorejob_duration_seconds",
		Help:    "Duration of finished restores, from Job creation to finish, by result.",
		Buckets: prometheus.ExponentialBuckets(5, 2, 12), // 5 s .. ~2.8 h
	}, []string{"namespace", "result"})
	lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_restorejob_last_success_timestamp_seconds",
		Help: "Unix time the last RestoreJob from a source succeeded (e.g. for 'no verified restore for a week' alerts).",
	}, []string{"namespace", "source"})
)

// MetricNames lists every metric this operator exports.
var MetricNames = []string{
	"cairn_restorejob_finished_total",
	"cairn_restorejob_duration_seconds",
	"cairn_restorejob_last_success_timestamp_seconds",
}

func init() {
	metrics.Registry.MustRegister(finishedTotal, durationSeconds, lastSuccess)
}

// recordFinished counts a RestoreJob that just reached Succeeded or Failed.
func recordFinished(rj *restorev1.RestoreJob) {
	result := string(rj.Status.Phase)
	finishedTotal.WithLabelValues(rj.Namespace, result).Inc()
	if rj.Status.StartTime != nil && rj.Status.CompletionTime != nil {
		d := rj.Status.CompletionTime.Sub(rj.Status.StartTime.Time)
		durationSeconds.WithLabelValues(rj.Namespace, result).Observe(max(d, 0).Seconds())
	}
	if rj.Status.Phase == restorev1.PhaseSucceeded {
		at := time.Now()
		if rj.Status.CompletionTime != nil {
			at = rj.Status.CompletionTime.Time
		}
		lastSuccess.WithLabelValues(rj.Namespace, rj.Status.Source).Set(float64(at.Unix()))
	}
}
