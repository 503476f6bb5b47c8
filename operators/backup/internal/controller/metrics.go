package controller

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Per-BackupJob metrics users alert on, registered with controller-runtime's
// registry (served on the manager's /metrics).
var (
	lastSuccessGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_backupjob_last_success_timestamp_seconds",
		Help: "Unix time of the last successful backup run of a BackupJob.",
	}, []string{"namespace", "name"})
	consecutiveFailuresGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_backupjob_consecutive_failures",
		Help: "Failed backup runs of a BackupJob since its last success.",
	}, []string{"namespace", "name"})
	intervalGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cairn_backupjob_schedule_interval_seconds",
		Help: "Seconds between two scheduled runs of a BackupJob (for 'no success for twice the interval' alerts).",
	}, []string{"namespace", "name"})
	runDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "cairn_backupjob_run_duration_seconds",
		Help:    "Duration of finished backup runs, from Job start to finish, by result.",
		Buckets: prometheus.ExponentialBuckets(5, 2, 12), // 5 s .. ~2.8 h
	}, []string{"namespace", "name", "result"})
	runsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "cairn_backupjob_runs_total",
		Help: "Finished backup runs by result.",
	}, []string{"namespace", "name", "result"})
)

// MetricNames lists every metric this operator exports (used by the
// monitoring component's tests to check alerts reference real metrics).
var MetricNames = []string{
	"cairn_backupjob_last_success_timestamp_seconds",
	"cairn_backupjob_consecutive_failures",
	"cairn_backupjob_schedule_interval_seconds",
	"cairn_backupjob_run_duration_seconds",
	"cairn_backupjob_runs_total",
}

func init() {
	metrics.Registry.MustRegister(lastSuccessGauge, consecutiveFailuresGauge, intervalGauge, runDuration, runsTotal)
}

func forgetMetrics(namespace, name string) {
	l := prometheus.Labels{"namespace": namespace, "name": name}
	lastSuccessGauge.DeletePartialMatch(l)
	consecutiveFailuresGauge.DeletePartialMatch(l)
	intervalGauge.DeletePartialMatch(l)
	runDuration.DeletePartialMatch(l)
	runsTotal.DeletePartialMatch(l)
}
