package controller

import (
	"github.com/prometheus/client_golang/prometheus"

	"cairn.dev/libs/kindmetrics"
)

// Per-BackupJob metrics users alert on (libs/kindmetrics).
var (
	metricSet                = kindmetrics.New()
	lastSuccessGauge         = metricSet.ObjectGauge("cairn_backupjob_last_success_timestamp_seconds", "Unix time of the last successful backup run of a BackupJob.")
	consecutiveFailuresGauge = metricSet.ObjectGauge("cairn_backupjob_consecutive_failures", "Failed backup runs of a BackupJob since its last success.")
	intervalGauge            = metricSet.ObjectGauge("cairn_backupjob_schedule_interval_seconds", "Seconds between two scheduled runs of a BackupJob (for 'no success for twice the interval' alerts).")
	runDuration              = metricSet.Histogram("cairn_backupjob_run_duration_seconds",
		"Duration of finished backup runs, from Job start to finish, by result.",
		prometheus.ExponentialBuckets(5, 2, 12), // 5 s .. ~2.8 h
		"namespace", "name", "result")
	runsTotal = metricSet.Counter("cairn_backupjob_runs_total",
		"Finished backup runs by result.", "namespace", "name", "result")
)

// MetricNames lists every metric this operator exports (used by the
// monitoring component's tests to check alerts reference real metrics).
var MetricNames = metricSet.Names()

func forgetMetrics(namespace, name string) { metricSet.Forget(namespace, name) }
