package controller

import backupv1 "cairn.dev/apis/backup/v1"

// ForgetMetrics drops a BackupJob's metrics, as an operator restart does.
func ForgetMetrics(namespace, name string) { metrics.Forget(namespace, name) }

// SlotJobElsewhereName is the name of bj's slot release Job in the
// operator's namespace.
func SlotJobElsewhereName(bj *backupv1.BackupJob) string { return slotJobElsewhereName(bj) }
