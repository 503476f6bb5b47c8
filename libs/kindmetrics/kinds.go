package kindmetrics

import "github.com/prometheus/client_golang/prometheus"

// The metrics of each Cairn kind, declared here as the kinds' access
// descriptors are (libs/access): one place names what every operator
// exports and the monitoring component's alerts reference. A kind's set is
// registered when its operator's controller package calls the constructor
// (once, at init).

// BackupJob are the per-BackupJob metrics users alert on.
type BackupJob struct {
	*Set
	LastSuccess, ConsecutiveFailures, Interval *prometheus.GaugeVec
	// PointInTimeReady and PointInTimeGaps: only for a BackupJob with
	// spec.pointInTime (its PointInTimeReady condition, the gaps its last
	// backup or archive check found in the archive); PointInTimeRetainedWAL
	// only for PostgreSQL (the archiver's slot on the source).
	PointInTimeReady, PointInTimeGaps, PointInTimeRetainedWAL *prometheus.GaugeVec
	RunDuration                                               *prometheus.HistogramVec
	Runs                                                      *prometheus.CounterVec
}

// NewBackupJob declares the BackupJob metrics.
func NewBackupJob() *BackupJob {
	s := New()
	return &BackupJob{Set: s,
		LastSuccess:         s.ObjectGauge("cairn_backupjob_last_success_timestamp_seconds", "Unix time of the last successful backup run of a BackupJob."),
		ConsecutiveFailures: s.ObjectGauge("cairn_backupjob_consecutive_failures", "Failed backup runs of a BackupJob since its last success."),
		Interval:            s.ObjectGauge("cairn_backupjob_schedule_interval_seconds", "Seconds between two scheduled runs of a BackupJob (for 'no success for twice the interval' alerts)."),
		PointInTimeReady: s.ObjectGauge("cairn_backupjob_point_in_time_ready",
			"1 while a BackupJob's point-in-time archive is continuous and its archiver keeps up (PointInTimeReady), else 0; no series without spec.pointInTime."),
		PointInTimeGaps: s.ObjectGauge("cairn_backupjob_point_in_time_gaps",
			"Gaps (missing segments) its last backup or archive check found in a BackupJob's point-in-time archive; no series without spec.pointInTime."),
		PointInTimeRetainedWAL: s.ObjectGauge("cairn_backupjob_point_in_time_retained_wal_bytes",
			"WAL the PostgreSQL archiver's replication slot keeps on the source at the last archive check (dropped past spec.pointInTime.maxRetainedWAL); no series without a PostgreSQL point-in-time archive."),
		RunDuration: s.Histogram("cairn_backupjob_run_duration_seconds",
			"Duration of finished backup runs, from Job start to finish, by result.",
			prometheus.ExponentialBuckets(5, 2, 12), // 5 s .. ~2.8 h
			"namespace", "name", "result"),
		Runs: s.Counter("cairn_backupjob_runs_total",
			"Finished backup runs by result.", "namespace", "name", "result"),
	}
}

// RestoreJob are the RestoreJob metrics users alert on. RestoreJobs are
// one-off, so no metric is labelled by RestoreJob name (that would grow
// without bound); the source ("backupjob/orders-db", "s3://bucket/prefix
// ns/name") is bounded by the number of backups restored from.
type RestoreJob struct {
	*Set
	Finished    *Finished
	LastSuccess *prometheus.GaugeVec
}

// NewRestoreJob declares the RestoreJob metrics.
func NewRestoreJob() *RestoreJob {
	s := New()
	return &RestoreJob{Set: s,
		Finished: s.Finished("restorejob", "RestoreJobs",
			"Duration of finished restores, from Job creation to finish, by result.",
			prometheus.ExponentialBuckets(5, 2, 12)), // 5 s .. ~2.8 h
		LastSuccess: s.Gauge("cairn_restorejob_last_success_timestamp_seconds",
			"Unix time the last RestoreJob from a source succeeded (e.g. for 'no verified restore for a week' alerts).",
			"namespace", "source"),
	}
}

// MigrationJob are the MigrationJob metrics. MigrationJobs are one-off: no
// metric is labelled by name.
type MigrationJob struct {
	*Set
	Finished *Finished
}

// NewMigrationJob declares the MigrationJob metrics.
func NewMigrationJob() *MigrationJob {
	s := New()
	return &MigrationJob{Set: s, Finished: s.Finished("migrationjob", "MigrationJobs",
		"Duration of finished migrations, from the first step to the end (approval waits included), by result.",
		prometheus.ExponentialBuckets(10, 2, 14))} // 10 s .. ~45 h
}

// ProtectionPlan are the ProtectionPlan metrics users alert on
// (platform/components/monitoring). Its gauges are set from status after
// every pass (the orchestrator's Observe), so they exist again after a
// restart or a failover; alerts compare timestamps with time(), so an RPO
// violation fires even while the orchestrator is down.
type ProtectionPlan struct {
	*Set
	LastBackup, RPO, RecoveryPoint, LastVerification, MaxVerificationAge *prometheus.GaugeVec
	VerificationSucceeded, RestoreDuration, RTO                          *prometheus.GaugeVec
	// IdentityDecrypts: 1 while the plan's identity decrypted the newest
	// verified encrypted backup, 0 once a verification found it cannot;
	// absent without encryption.
	IdentityDecrypts *prometheus.GaugeVec
	// RPOBasis: 1 for the basis the plan's rpo was last judged on
	// (status.rpo.basis): PointInTime (the archive, while the BackupJob's
	// PointInTimeReady is True) or Backup (the newest successful backup,
	// whose time is _last_backup_timestamp_seconds). One series per plan.
	RPOBasis      *prometheus.GaugeVec
	Verifications *prometheus.CounterVec
}

// NewProtectionPlan declares the ProtectionPlan metrics.
func NewProtectionPlan() *ProtectionPlan {
	s := New()
	return &ProtectionPlan{Set: s,
		LastBackup:            s.ObjectGauge("cairn_protectionplan_last_backup_timestamp_seconds", "Unix time the plan's newest successful backup finished."),
		RPO:                   s.ObjectGauge("cairn_protectionplan_rpo_seconds", "The plan's recovery point objective (spec.objectives.rpo)."),
		RecoveryPoint:         s.ObjectGauge("cairn_protectionplan_recovery_point_timestamp_seconds", "Unix time of the newest verified backup (status.recoveryPoint): a restore now recovers the data as of this time."),
		LastVerification:      s.ObjectGauge("cairn_protectionplan_last_verification_timestamp_seconds", "Unix time the plan's newest successful verification finished."),
		MaxVerificationAge:    s.ObjectGauge("cairn_protectionplan_max_verification_age_seconds", "The plan's maximum verification age (spec.objectives.maxVerificationAge)."),
		VerificationSucceeded: s.ObjectGauge("cairn_protectionplan_verification_succeeded", "1 when the plan's newest finished verification succeeded, 0 when it failed."),
		RestoreDuration:       s.ObjectGauge("cairn_protectionplan_restore_duration_seconds", "Restore duration of the plan's newest successful verification (the measured recovery time)."),
		RTO:                   s.ObjectGauge("cairn_protectionplan_rto_seconds", "The plan's recovery time objective (spec.objectives.rto)."),
		IdentityDecrypts:      s.ObjectGauge("cairn_protectionplan_identity_decrypts", "1 when the plan's identity (spec.verification.encryption) decrypted the newest verified encrypted backup, 0 when a verification found it cannot."),
		RPOBasis: s.Gauge("cairn_protectionplan_rpo_basis",
			"1 for what the plan's rpo is judged on (status.rpo.basis): basis PointInTime (the point-in-time archive, while the BackupJob's PointInTimeReady is True: at most maxLag behind) or Backup (the newest successful backup: cairn_protectionplan_last_backup_timestamp_seconds).",
			"namespace", "name", "basis"),
		Verifications: s.Counter("cairn_protectionplan_verifications_total",
			"Finished verifications by plan and result (Succeeded, Failed).", "namespace", "name", "result"),
	}
}
