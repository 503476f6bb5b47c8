package controller

import (
	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
)

// Labels on everything the backup operator creates. The cache holds only
// CronJobs, Jobs and Pods with ManagedByLabel=ManagedByValue, and events of
// those objects map to their one BackupJob by BackupJobLabel.
const (
	// ManagedByLabel and ManagedByValue mark the operator's children.
	ManagedByLabel = agentjob.ManagedByLabel
	ManagedByValue = "cairn-backup-operator"
	// BackupJobLabel names the owning BackupJob.
	BackupJobLabel = backupv1.BackupJobLabel
	// RunKindLabel says why a Job runs: "scheduled", "run-now" or "delete".
	RunKindLabel = backupv1.RunKindLabel
	// RunNowLabel on a run-now Job holds a hash of the request id.
	RunNowLabel = "backup.cairn.dev/run-now-id"
	// jobNameLabel is set by the Job controller on a Job's pods.
	jobNameLabel = "batch.kubernetes.io/job-name"
)

// Values of RunKindLabel.
const (
	runScheduled = "scheduled"
	runNow       = "run-now"
	runDelete    = "delete"
	runList      = backupv1.RunKindList
	runCheck     = backupv1.RunKindArchiveCheck
)

func childLabels(backupJob, kind string) map[string]string {
	return map[string]string{ManagedByLabel: ManagedByValue, BackupJobLabel: backupJob, RunKindLabel: kind}
}
