package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	migrationv1 "cairn.dev/apis/migration/v1"
)

// MigrationJob metrics, registered with controller-runtime's registry.
// MigrationJobs are one-off: no metric is labelled by name.
var (
	finishedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_migrationjob_finished_total",
		Help: "Finished MigrationJobs by namespace and result (Succeeded, Failed).",
	}, []string{"namespace", "result"})
	durationSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cairn_migrationjob_duration_seconds",
		Help:    "Duration of finished migrations, from the first step to the end (approval waits included), by result.",
		Buckets: prometheus.ExponentialBuckets(10, 2, 14), // 10 s .. ~45 h
	}, []string{"namespace", "result"})
)

// MetricNames lists every metric this operator exports.
var MetricNames = []string{"cairn_migrationjob_finished_total", "cairn_migrationjob_duration_seconds"}

func init() {
	metrics.Registry.MustRegister(finishedTotal, durationSeconds)
}

// recordFinished counts a MigrationJob that just reached Succeeded or Failed.
func recordFinished(mj *migrationv1.MigrationJob) {
	res := string(mj.Status.Phase)
	finishedTotal.WithLabelValues(mj.Namespace, res).Inc()
	if mj.Status.StartTime != nil && mj.Status.CompletionTime != nil {
		d := mj.Status.CompletionTime.Sub(mj.Status.StartTime.Time)
		durationSeconds.WithLabelValues(mj.Namespace, res).Observe(max(d, 0).Seconds())
	}
}
