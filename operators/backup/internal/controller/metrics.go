package controller

import "cairn.dev/libs/kindmetrics"

// The BackupJob metrics users alert on: declared, and read from a BackupJob, in
// libs/kindmetrics (the skeleton's Observe and Forget, what transition
// counts).
var metrics = kindmetrics.NewBackupJob()

// MetricNames lists every metric this operator exports (the monitoring
// component's tests check alerts reference real metrics).
var MetricNames = metrics.Names()
