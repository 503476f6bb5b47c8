package controller

import "cairn.dev/libs/kindmetrics"

// The BackupJob metrics users alert on (libs/kindmetrics).
var metrics = kindmetrics.NewBackupJob()

// MetricNames lists every metric this operator exports (used by the
// monitoring component's tests to check alerts reference real metrics).
var MetricNames = metrics.Names()

func forgetMetrics(namespace, name string) { metrics.Forget(namespace, name) }
