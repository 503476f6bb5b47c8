package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// ProtectionPlanSpec is the desired protection of one database.
// +kubebuilder:validation:XValidation:rule="!has(self.backup.encryption) || has(self.verification.encryption)",message="verification.encryption: backups are encrypted (backup.encryption), so verification needs the identity that decrypts them (verification.encryption.identitySecretRef)",fieldPath=".verification"
// +kubebuilder:validation:XValidation:rule="!(self.verification.restoreInto.host.lowerAscii() == self.database.host.lowerAscii() && self.verification.restoreInto.database == self.database.database && (has(self.verification.restoreInto.port) ? self.verification.restoreInto.port : (self.database.engine == 'postgres' ? 5432 : 3306)) == (has(self.database.port) ? self.database.port : (self.database.engine == 'postgres' ? 5432 : 3306)))",message="verification.restoreInto: the scratch database is the protected database (same host, port and database name); verification restores into it, so choose another database or server",fieldPath=".verification.restoreInto"
// +kubebuilder:validation:XValidation:rule="!has(self.backup.pointInTime) || duration(self.objectives.rpo) >= (has(self.backup.pointInTime.maxLag) ? duration(self.backup.pointInTime.maxLag) : duration('5m'))",message="objectives.rpo: at least backup.pointInTime.maxLag (default 5m): the archiver counts as keeping up while it is that far behind, so a shorter rpo could be missed while PointInTimeReady is True; lower maxLag or raise rpo",fieldPath=".objectives.rpo"
// +kubebuilder:validation:XValidation:rule="!has(self.migration) || (self.migration.template.source.engine == self.database.engine && self.migration.template.source.host.lowerAscii() == self.database.host.lowerAscii() && self.migration.template.source.database == self.database.database && (has(self.migration.template.source.port) ? self.migration.template.source.port : (self.database.engine == 'postgres' ? 5432 : 3306)) == (has(self.database.port) ? self.database.port : (self.database.engine == 'postgres' ? 5432 : 3306)))",message="migration.template.source: must be the plan's database (same engine, host, port and database name as spec.database)",fieldPath=".migration.template.source"
type ProtectionPlanSpec struct {
	// Database to protect: it is backed up (spec.backup) and never written to.
	Database cairnv1.DatabaseRef `json:"database"`

	// TimeZone is the IANA time zone name the backup and verification
	// schedules are read in, e.g. "Asia/Shanghai". Defaults to "UTC".
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][-+_A-Za-z0-9]*(/[-+_A-Za-z0-9]+)*$`
	// +kubebuilder:validation:XValidation:rule="self != 'Local'",message="timeZone: \"Local\" is the operator's zone, not yours; use an IANA name such as \"UTC\" or \"Europe/Berlin\""
	// +kubebuilder:default="UTC"
	TimeZone string `json:"timeZone,omitempty"`

	// Backup is the template of the plan's BackupJob (named like the plan).
	Backup BackupTemplate `json:"backup"`

	// Verification says how often a backup is restored into a scratch
	// database to prove it restores, where, and what is checked afterwards.
	Verification VerificationSpec `json:"verification"`

	// Objectives are what "recoverable" means for this database.
	Objectives Objectives `json:"objectives"`

	// Migration is an optional MigrationJob the plan creates, owns and keeps
	// at its template once start is true.
	// +optional
	Migration *MigrationSpec `json:"migration,omitempty"`

	// DeletionPolicy is the BackupJob's: Retain (default) keeps the stored
	// backups when the plan is deleted, Delete removes them.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy backupv1.DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// BackupTemplate is the part of a BackupJob spec the plan lets you set; the
// database, time zone and deletion policy come from the plan.
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || !has(self.retentionDays) || (oldSelf.hasValue() && has(oldSelf.value().retention) && has(oldSelf.value().retentionDays) && oldSelf.value().retentionDays == self.retentionDays)",message="retention: set either retentionDays (the simple form) or retention (calendar tiers), not both",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="!has(self.activeDeadlineSeconds) || self.activeDeadlineSeconds >= 60",message="activeDeadlineSeconds: must be at least 60"
// +kubebuilder:validation:XValidation:rule="!has(self.objectLock) || has(self.storage.s3)",message="objectLock: S3 Object Lock needs an S3 store (storage.s3)"
// +kubebuilder:validation:XValidation:rule="!has(self.objectLock) || !has(self.retention) || has(self.objectLock.days)",message="objectLock.days: required with retention (calendar tiers): how long each backup stays locked before the tiers' prune extends it"
type BackupTemplate struct {
	// Schedule in standard 5-field cron format, read in spec.timeZone, e.g.
	// "0 2 * * *". Macros such as @daily are accepted.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^\s*(@[a-z]+|\S+(\s+\S+){4})\s*$')`,message="schedule: use 5 fields \"minute hour day-of-month month day-of-week\" (e.g. \"0 2 * * *\") or a macro such as @daily; no seconds field, and no CRON_TZ= prefix (set spec.timeZone)"
	Schedule string `json:"schedule"`
	// RetentionDays is how long stored backups are kept: 7 days when neither
	// retentionDays nor retention is set. Set one or the other, not both
	// (the BackupJob's spec.retentionDays).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3650
	RetentionDays int32 `json:"retentionDays,omitempty"`
	// Retention keeps backups by calendar tiers in spec.timeZone instead of
	// retentionDays (the BackupJob's spec.retention); its minVerified keeps
	// the newest backups this plan's verifications proved restorable.
	// +optional
	Retention *backupv1.RetentionPolicy `json:"retention,omitempty"`
	// MaxRetries is how many times Kubernetes retries one failed backup run.
	// Defaults to 3.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +kubebuilder:default=3
	MaxRetries *int32 `json:"maxRetries,omitempty"`
	// ActiveDeadlineSeconds bounds one backup run. Defaults to 3600.
	// +optional
	// +kubebuilder:validation:Maximum=604800
	// +kubebuilder:default=3600
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
	// Suspend stops new backup runs (the RPO keeps counting).
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// Storage is where backups are written: exactly one of pvc or s3.
	Storage cairnv1.StorageSpec `json:"storage"`
	// ObjectLock writes every backup and its manifest with S3 Object Lock
	// retention (the BackupJob's spec.objectLock): a leaked credential
	// cannot remove them before their time, and the prune extends the
	// lock of what the calendar tiers keep longer. Needs an S3 store whose
	// bucket has Object Lock enabled.
	// +optional
	ObjectLock *backupv1.ObjectLockSpec `json:"objectLock,omitempty"`
	// Encryption encrypts every backup with age to the recipients given
	// (the BackupJob's spec.encryption). The plan's verification must then
	// name an identity (spec.verification.encryption): each verification
	// proves it still decrypts the newest backup (condition
	// DecryptionVerified).
	// +optional
	Encryption *cairnv1.EncryptionSpec `json:"encryption,omitempty"`
	// PointInTime turns on point-in-time recovery (the BackupJob's
	// spec.pointInTime): the backup operator archives the database's
	// change log besides the scheduled dumps. The plan's rpo is then judged
	// on the archive while the BackupJob's PointInTimeReady is True (and
	// may be minutes), and each verification restores to a recent second
	// (status.lastVerification.targetTime) instead of only the newest dump.
	// Not with encryption; the engines the BackupJob's spec.pointInTime
	// admits. docs/pitr.md.
	// +optional
	PointInTime *backupv1.PointInTimeSpec `json:"pointInTime,omitempty"`
	// Parallelism is the BackupJob's spec.parallelism (above 1: multi-part
	// artifacts, dumped that many parts at once) and the verification
	// RestoreJobs' (that many parts loaded at once: a PostgreSQL
	// verification into the scratch database it creates loads the tables
	// over that many connections and builds the indexes that many at a
	// time, and the plan's restore time drops with it; docs/store.md).
	// Unset: one stream (the BackupJob's default).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Parallelism *int32 `json:"parallelism,omitempty"`
}

// MigrationSpec is the plan's migration of its database: one MigrationJob,
// named <plan>-migrate, created when start becomes true.
type MigrationSpec struct {
	// Start asks the orchestrator to create the MigrationJob. Until then
	// nothing is created. Setting it back to false, or removing
	// spec.migration, never deletes a MigrationJob already created: it is
	// no longer kept at the template, and deleting the plan deletes it.
	// +optional
	Start bool `json:"start,omitempty"`
	// Template is the MigrationJob's spec. Its source must be the plan's
	// database (spec.database: same engine, host, port and database name).
	// The MigrationJob's rules apply here too: after creation only
	// cutover.approved may change (approve a Manual cutover here: an edit
	// of the MigrationJob itself is reverted to the template).
	Template migrationv1.MigrationJobSpec `json:"template"`
}

// MigrationRecord mirrors the plan's MigrationJob. It does not count
// towards BackupHealthy, RecoverabilityVerified or Ready.
type MigrationRecord struct {
	// Name of the MigrationJob.
	Name string `json:"name"`
	// Phase is the MigrationJob's status.phase.
	// +optional
	Phase migrationv1.Phase `json:"phase,omitempty"`
	// Conditions are the MigrationJob's conditions (Ready among them), as
	// it reports them.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// VerificationSpec is the periodic restore test.
// +kubebuilder:validation:XValidation:rule="has(self.everyNBackups) != has(self.schedule)",message="verification: set exactly one of everyNBackups or schedule"
type VerificationSpec struct {
	// EveryNBackups verifies every Nth successful backup (1: every backup).
	// The first successful backup is always verified at once.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	EveryNBackups *int32 `json:"everyNBackups,omitempty"`
	// Schedule verifies the newest successful backup on a 5-field cron
	// schedule read in spec.timeZone. The first successful backup is always
	// verified at once.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^\s*(@[a-z]+|\S+(\s+\S+){4})\s*$')`,message="verification.schedule: use 5 fields \"minute hour day-of-month month day-of-week\" or a macro such as @weekly; no CRON_TZ= prefix (set spec.timeZone)"
	Schedule *string `json:"schedule,omitempty"`
	// RestoreInto is the scratch database a verification restores into: a
	// database on a named server, of the protected database's engine. It can
	// never be the protected database.
	RestoreInto ScratchDatabase `json:"restoreInto"`
	// Checks run in the scratch database after the restore (SQL with an
	// expected result, or row counts equal to what the backup recorded); the
	// backup counts as verified only when every check is reported passed.
	// The scratch database is dropped after the checks if the verification
	// created it (RestoreJob spec.dropTargetAfterChecks).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Checks []restorev1.Check `json:"checks,omitempty"`
	// Encryption names the identity verification restores decrypt with
	// (their RestoreJob's spec.encryption). Required when
	// spec.backup.encryption is set.
	// +optional
	Encryption *cairnv1.DecryptionSpec `json:"encryption,omitempty"`
	// TimeoutSeconds bounds one verification restore (its RestoreJob's
	// activeDeadlineSeconds). Defaults to 3600.
	// +optional
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=604800
	// +kubebuilder:default=3600
	TimeoutSeconds *int64 `json:"timeoutSeconds,omitempty"`
	// SuccessfulHistoryLimit is how many succeeded verification RestoreJobs
	// are kept. Defaults to 3.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=3
	SuccessfulHistoryLimit *int32 `json:"successfulHistoryLimit,omitempty"`
	// FailedHistoryLimit is how many failed verification RestoreJobs are
	// kept. Defaults to 3.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +kubebuilder:default=3
	FailedHistoryLimit *int32 `json:"failedHistoryLimit,omitempty"`
}

// ScratchDatabase is a database on a named server, used only for verification.
type ScratchDatabase struct {
	// Host of the scratch database server, as the restore pods resolve it.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`
	// Port of the scratch server. Defaults to the engine's (5432, 3306).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
	// Database name to restore into; its contents are replaced by every
	// verification.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Database string `json:"database"`
	// CredentialsSecretRef names a Secret with the keys `username` and
	// `password` of a user of the scratch server.
	CredentialsSecretRef cairnv1.LocalObjectReference `json:"credentialsSecretRef"`
}

// Objectives are the plan's recovery objectives.
type Objectives struct {
	// RPO (recovery point objective) is the maximum age of the recovery
	// point: the newest successful backup, e.g. "26h" for a nightly
	// backup. With spec.backup.pointInTime it is judged on the archive
	// while the BackupJob's PointInTimeReady is True (the archive is at
	// most pointInTime.maxLag behind, so the rpo may be minutes: at least
	// maxLag), and on the newest backup otherwise (status.rpo says which).
	// Without pointInTime it must be at least the longest time between
	// two backups of spec.backup.schedule: a shorter one could never be met.
	RPO metav1.Duration `json:"rpo"`
	// RTO (recovery time objective) is the maximum restore duration, as
	// measured by the newest successful verification.
	// +optional
	RTO *metav1.Duration `json:"rto,omitempty"`
	// MaxVerificationAge is the maximum time since the newest successful
	// verification finished, e.g. "192h" for weekly verifications.
	// +optional
	MaxVerificationAge *metav1.Duration `json:"maxVerificationAge,omitempty"`
}

// ProtectionPlanStatus is the observed state, written by the orchestrator only.
type ProtectionPlanStatus struct {
	// ObservedGeneration is the metadata.generation last acted on. -1 until
	// the orchestrator has seen the object.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Phase summarises the state in one word; see the Phase constants.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// Conditions: BackupHealthy, RecoverabilityVerified and ObjectivesMet,
	// summarised into Ready; Reconciling and Stalled (kstatus).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastBackup is what the plan's BackupJob reports about its runs.
	// +optional
	LastBackup *BackupRecord `json:"lastBackup,omitempty"`
	// BackupsSinceVerification counts the successful backups observed since
	// the last verification started (for verification.everyNBackups).
	// +optional
	BackupsSinceVerification int32 `json:"backupsSinceVerification,omitempty"`

	// Verifications counts the verification RestoreJobs created so far; the
	// newest is <plan>-verify-<verifications>.
	// +optional
	Verifications int32 `json:"verifications,omitempty"`
	// LastVerification is the newest verification, running or finished.
	// +optional
	LastVerification *VerificationRecord `json:"lastVerification,omitempty"`
	// LastSuccessfulVerification is the newest verification that succeeded.
	// +optional
	LastSuccessfulVerification *VerificationRecord `json:"lastSuccessfulVerification,omitempty"`
	// RecoveryPoint is when the newest verified backup was taken (or, for
	// a point-in-time verification, the second it restored to): restoring
	// now, with proof that it works, recovers the data as of this time.
	// +optional
	RecoveryPoint *metav1.Time `json:"recoveryPoint,omitempty"`
	// RPO says what objectives.rpo is judged on, as of the last pass.
	// +optional
	RPO *RPOStatus `json:"rpo,omitempty"`
	// RestoreDuration is how long the newest successful verification's
	// restore took: the measured recovery time, compared with objectives.rto.
	// +optional
	RestoreDuration *metav1.Duration `json:"restoreDuration,omitempty"`
	// NextVerificationTime is when the verification schedule fires next.
	// +optional
	NextVerificationTime *metav1.Time `json:"nextVerificationTime,omitempty"`
	// LastVerifyNowRequest is the last value of the verify-now annotation
	// acted on: the verification it started is status.lastVerification.
	// +optional
	LastVerifyNowRequest string `json:"lastVerifyNowRequest,omitempty"`
	// Migration mirrors the plan's MigrationJob, once created.
	// +optional
	Migration *MigrationRecord `json:"migration,omitempty"`
}

// RPOBasis is what the recovery point objective is judged on.
// +kubebuilder:validation:Enum=PointInTime;Backup
type RPOBasis string

const (
	// RPOBasisPointInTime: the plan's BackupJob archives its change log and
	// its PointInTimeReady is True: the recovery point is the newest
	// archived change, at most pointInTime.maxLag behind.
	RPOBasisPointInTime RPOBasis = "PointInTime"
	// RPOBasisBackup: the recovery point is the newest successful backup
	// (no point-in-time recovery, or its archive is not ready: the message
	// says why).
	RPOBasisBackup RPOBasis = "Backup"
)

// RPOStatus is what the plan's rpo is judged on. It changes with the
// basis, the newest backup or the archive's reading, not with the clock:
// the age at the last evaluation is in ObjectivesMet's message when the
// rpo is violated.
type RPOStatus struct {
	// Basis is PointInTime (the archive) or Backup (the newest backup).
	Basis RPOBasis `json:"basis"`
	// RecoveryPoint is, for Backup, when the newest successful backup
	// finished: the rpo's age is measured from it. For PointInTime it is
	// the newest archived change as the last backup run read it; the age
	// judged is the smaller of its age and maxLag (the archiver is ready
	// only while everything older than maxLag is archived).
	// +optional
	RecoveryPoint *metav1.Time `json:"recoveryPoint,omitempty"`
	// MaxLag, for PointInTime, is the archiver's maxLag: the recovery
	// point is at most this old while the basis is PointInTime.
	// +optional
	MaxLag *metav1.Duration `json:"maxLag,omitempty"`
	// Message says why this basis, e.g. why the archive does not count.
	// +optional
	Message string `json:"message,omitempty"`
}

// BackupRecord summarises the plan's BackupJob.
type BackupRecord struct {
	// BackupJob is the name of the plan's BackupJob.
	BackupJob string `json:"backupJob"`
	// Time is when the last backup run finished, either result.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Result of the last finished run.
	// +optional
	Result backupv1.RunResult `json:"result,omitempty"`
	// SuccessfulTime is when the newest successful backup finished.
	// +optional
	SuccessfulTime *metav1.Time `json:"successfulTime,omitempty"`
	// Artifact is the newest successful backup's artifact.
	// +optional
	Artifact *cairnv1.Artifact `json:"artifact,omitempty"`
}

// VerificationRecord is one verification: which backup, how it went.
type VerificationRecord struct {
	// RestoreJob is the name of the verification RestoreJob.
	RestoreJob string `json:"restoreJob"`
	// Artifact is the backup restored, pinned when the verification was
	// decided: the RestoreJob names exactly this artifact.
	Artifact cairnv1.Artifact `json:"artifact"`
	// BackupTime is when that backup finished (the data's point in time).
	// +optional
	BackupTime *metav1.Time `json:"backupTime,omitempty"`
	// TargetTime, for a point-in-time verification (spec.backup.pointInTime),
	// is the second the RestoreJob restores to (its spec.source.pointInTime):
	// now minus pointInTime.maxLag when the verification was decided. The
	// restore takes the newest base that ended before it, so artifact
	// becomes the base the RestoreJob used once it reports it.
	// +optional
	TargetTime *metav1.Time `json:"targetTime,omitempty"`
	// RecoveryPointReached is the second the point-in-time restore
	// reported reaching (the RestoreJob's status.recoveryPoint): the
	// verification succeeds only when it equals targetTime.
	// +optional
	RecoveryPointReached *metav1.Time `json:"recoveryPointReached,omitempty"`
	// Result of the verification.
	// +optional
	Result VerificationResult `json:"result,omitempty"`
	// StartTime is when the restore started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// CompletionTime is when the restore finished, either result.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// RestoreDuration is CompletionTime - StartTime of a finished restore.
	// +optional
	RestoreDuration *metav1.Duration `json:"restoreDuration,omitempty"`
	// Checks are the results of the checks, when the restore reported them.
	// +optional
	// +listType=map
	// +listMapKey=name
	Checks []restorev1.CheckResult `json:"checks,omitempty"`
	// Message says how the verification ended, or why it failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Reason is the RestoreJob's reason when the verification failed
	// (e.g. EncryptionIdentityMismatch, ChecksFailed).
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ProtectionPlan protects one database: the orchestrator owns its BackupJob
// and the RestoreJobs that verify its backups restore, and summarises them
// into BackupHealthy, RecoverabilityVerified and ObjectivesMet, and Ready.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=pp;plan,categories=cairn
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="metadata.name: at most 40 characters (verification RestoreJobs are named <name>-verify-<n>)"
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Last Backup",type=date,JSONPath=`.status.lastBackup.successfulTime`,description="Age of the newest successful backup"
// +kubebuilder:printcolumn:name="RPO Basis",type=string,JSONPath=`.status.rpo.basis`,description="What the rpo is judged on: PointInTime (the archive, while ready) or Backup (the newest backup)"
// +kubebuilder:printcolumn:name="Last Verified",type=date,JSONPath=`.status.lastSuccessfulVerification.completionTime`
// +kubebuilder:printcolumn:name="Recovery Point",type=date,JSONPath=`.status.recoveryPoint`,priority=1
// +kubebuilder:printcolumn:name="Restore Time",type=string,JSONPath=`.status.restoreDuration`,priority=1
// +kubebuilder:printcolumn:name="Migration",type=string,JSONPath=`.status.migration.phase`,priority=1,description="Phase of the plan's MigrationJob (spec.migration), once created"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ProtectionPlan struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired protection.
	Spec ProtectionPlanSpec `json:"spec"`
	// Status is the observed state.
	// +kubebuilder:default={"observedGeneration":-1}
	Status ProtectionPlanStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ProtectionPlanList is a list of ProtectionPlans.
type ProtectionPlanList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProtectionPlan `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ProtectionPlan{}, &ProtectionPlanList{})
}
