package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Phase is the one-word summary of a BackupJob's state. It is a fixed enum:
// match on these constants, never on free text.
// +kubebuilder:validation:Enum=Pending;Scheduled;Running;Succeeded;Failed;Suspended;Deleting
type Phase string

const (
	// PhasePending: accepted, the CronJob is not in place yet (or the spec is invalid).
	PhasePending Phase = "Pending"
	// PhaseScheduled: the CronJob is in place and waits for its next run; no run has finished yet.
	PhaseScheduled Phase = "Scheduled"
	// PhaseRunning: a backup Job is running now.
	PhaseRunning Phase = "Running"
	// PhaseSucceeded: the last finished run succeeded.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: the last finished run failed after all its retries (maxRetries).
	PhaseFailed Phase = "Failed"
	// PhaseSuspended: spec.suspend is true; no new runs start.
	PhaseSuspended Phase = "Suspended"
	// PhaseDeleting: the BackupJob is being deleted and its cleanup runs.
	PhaseDeleting Phase = "Deleting"
)

// DeletionPolicy says what happens to stored artifacts when a BackupJob is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type DeletionPolicy string

const (
	// DeletionPolicyRetain keeps every stored artifact.
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete deletes every stored artifact of the BackupJob.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// RunResult is the outcome of one finished backup run.
// +kubebuilder:validation:Enum=Succeeded;Failed
type RunResult string

const (
	// RunSucceeded: the run's Job completed.
	RunSucceeded RunResult = "Succeeded"
	// RunFailed: the run's Job failed after its retries or hit its deadline.
	RunFailed RunResult = "Failed"
)

// Finalizers the backup operator puts on a BackupJob.
const (
	// CleanupFinalizer holds a deleted BackupJob until its CronJob and Jobs
	// (and, with deletionPolicy Delete, its stored artifacts) are cleaned up.
	// The defaulting webhook adds it on create; the controller adds it when
	// it is missing.
	CleanupFinalizer = "backup.cairn.dev/cleanup"
)

// Annotations users set on a BackupJob.
const (
	// RunNowAnnotation starts one backup run now, once per distinct value
	// (use a request id, e.g. a timestamp): like `kubectl create job --from=cronjob`.
	RunNowAnnotation = "backup.cairn.dev/run-now"
	// ListCatalogAnnotation asks for one listing of the store's catalog,
	// once per distinct value (a request id): the operator runs `agent
	// list` in a Job with the BackupJob's store credentials and records the
	// newest artifacts in status.catalog, so whoever may annotate the
	// BackupJob can see the store's catalog without the store's credentials.
	ListCatalogAnnotation = "backup.cairn.dev/list-catalog"
)

// Labels the backup operator puts on its Jobs and their pods.
const (
	// BackupJobLabel holds the name of the owning BackupJob.
	BackupJobLabel = "backup.cairn.dev/backupjob"
	// RunKindLabel says why a Job runs: "scheduled", "run-now", "delete" or
	// RunKindList (a catalog listing, not a backup run).
	RunKindLabel = "backup.cairn.dev/run"
	// RunKindList is RunKindLabel's value on a catalog listing's Job and pods.
	RunKindList = "list"
	// RunKindArchiveCheck is RunKindLabel's value on a point-in-time
	// archive check's Job and pods (not a backup run either).
	RunKindArchiveCheck = "archive-check"
)

// Condition reasons specific to BackupJob.
const (
	// BackupJobCronJobMissingReason: the CronJob does not exist yet; it is being created.
	BackupJobCronJobMissingReason = "CronJobMissing"
	// BackupJobScheduledReason: the CronJob is in place and matches the spec.
	BackupJobScheduledReason = "Scheduled"
	// BackupJobLastRunFailedReason: the last run failed after all its retries.
	BackupJobLastRunFailedReason = "LastRunFailed"
)

// RetentionPolicy keeps artifacts by calendar tiers. Each tier keeps, for
// each of its N most recent periods that hold a backup — hours, days, ISO
// weeks (Monday to Sunday), months, years, in the BackupJob's timeZone (a
// backup at 01:30 in Asia/Shanghai belongs to that Shanghai day) — the
// newest backup of that period. An artifact kept by any tier is kept; the
// newest is always kept, so a streak of failed backups never prunes below
// the newest successful one. status.retention shows what the last prune
// kept and why, and what it deleted.
// +kubebuilder:validation:XValidation:rule="(has(self.keepLast) ? self.keepLast : 0) + (has(self.keepHourly) ? self.keepHourly : 0) + (has(self.keepDaily) ? self.keepDaily : 0) + (has(self.keepWeekly) ? self.keepWeekly : 0) + (has(self.keepMonthly) ? self.keepMonthly : 0) + (has(self.keepYearly) ? self.keepYearly : 0) > 0",message="retention: set at least one of keepLast, keepHourly, keepDaily, keepWeekly, keepMonthly, keepYearly"
type RetentionPolicy struct {
	// KeepLast keeps the N newest artifacts.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	KeepLast int32 `json:"keepLast,omitempty"`
	// KeepHourly keeps the newest artifact of each of the N most recent
	// hours that hold one (the hour repeated when summer time ends is two).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	KeepHourly int32 `json:"keepHourly,omitempty"`
	// KeepDaily keeps the newest artifact of each of the N most recent days
	// that hold one.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	KeepDaily int32 `json:"keepDaily,omitempty"`
	// KeepWeekly keeps the newest artifact of each of the N most recent ISO
	// weeks that hold one.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	KeepWeekly int32 `json:"keepWeekly,omitempty"`
	// KeepMonthly keeps the newest artifact of each of the N most recent
	// months that hold one.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	KeepMonthly int32 `json:"keepMonthly,omitempty"`
	// KeepYearly keeps the newest artifact of each of the N most recent
	// years that hold one.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	KeepYearly int32 `json:"keepYearly,omitempty"`
	// MinVerified never prunes the N newest artifacts that a ProtectionPlan
	// verification restored with every check passed, whatever the tiers
	// say. The verification is recorded in the store next to the artifact
	// (verified/<artifact>.json), so it survives a lost cluster.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=10000
	MinVerified int32 `json:"minVerified,omitempty"`
	// DryRun reports in status.retention what the policy keeps and would
	// delete, and deletes nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// ObjectLockSpec is S3 Object Lock retention for a BackupJob's artifacts.
type ObjectLockSpec struct {
	// Mode is Governance (a principal with s3:BypassGovernanceRetention
	// may still remove a version) or Compliance (nobody can before its
	// date, not even the bucket's owner).
	// +kubebuilder:validation:Enum=Governance;Compliance
	Mode string `json:"mode"`
	// Days each artifact stays locked, from its start. Defaults to
	// retentionDays (what the simple policy keeps); required with
	// retention (calendar tiers), whose keep time is not known when the
	// artifact is written: there, once an artifact's hour, day, week,
	// month or year is over, each prune extends its lock to what the
	// tiers keep it (a month's newest with keepMonthly 12: until its 12th
	// month after is over). A lock is never shortened.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=36500
	Days int32 `json:"days,omitempty"`
}

// BackupJobSpec is the desired state: what to back up, when, and where to.
// +kubebuilder:validation:XValidation:rule="!has(self.objectLock) || has(self.storage.s3)",message="objectLock: S3 Object Lock needs an S3 store (storage.s3)"
// +kubebuilder:validation:XValidation:rule="!has(self.objectLock) || !has(self.retention) || has(self.objectLock.days)",message="objectLock.days: required with retention (calendar tiers): how long each artifact stays locked"
// +kubebuilder:validation:XValidation:rule="!has(self.retention) || !has(self.retentionDays) || (oldSelf.hasValue() && has(oldSelf.value().retention) && has(oldSelf.value().retentionDays) && oldSelf.value().retentionDays == self.retentionDays)",message="retention: set either retentionDays (the simple form) or retention (calendar tiers), not both",optionalOldSelf=true
// +kubebuilder:validation:XValidation:rule="!has(self.activeDeadlineSeconds) || self.activeDeadlineSeconds >= 60",message="activeDeadlineSeconds: must be at least 60"
type BackupJobSpec struct {
	// Database to back up.
	Database cairnv1.DatabaseRef `json:"database"`

	// Schedule in standard 5-field cron format ("minute hour day month weekday"),
	// e.g. "0 2 * * *" for 02:00 every day, interpreted in timeZone. Macros such
	// as @daily are accepted. A seconds field and CRON_TZ=/TZ= prefixes are
	// rejected: use timeZone.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^\s*(@[a-z]+|\S+(\s+\S+){4})\s*$')`,message="schedule: use 5 fields \"minute hour day-of-month month day-of-week\" (e.g. \"0 2 * * *\") or a macro such as @daily; no seconds field, and no CRON_TZ= prefix (set timeZone)"
	Schedule string `json:"schedule"`

	// TimeZone is the IANA time zone name the schedule is read in, e.g.
	// "Asia/Shanghai". Defaults to "UTC". It becomes the CronJob's own
	// timeZone field.
	// +optional
	// +kubebuilder:default="UTC"
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z][-+_A-Za-z0-9]*(/[-+_A-Za-z0-9]+)*$`
	// +kubebuilder:validation:XValidation:rule="self != 'Local'",message="timeZone: \"Local\" is the operator's zone, not yours; use an IANA name such as \"UTC\" or \"Europe/Berlin\""
	TimeZone string `json:"timeZone,omitempty"`

	// RetentionDays is how long stored artifacts are kept: the simple form
	// of retention. The newest successful artifact is always kept. When
	// neither retentionDays nor retention is set, artifacts are kept 7 days.
	// Set one or the other: both together are refused. (An object stored
	// with both before this rule — retentionDays was defaulted to 7 — may
	// keep them while retentionDays is unchanged; retention wins.) No
	// schema default: a default would make an explicit value beside
	// retention indistinguishable from an omitted one.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3650
	RetentionDays int32 `json:"retentionDays,omitempty"`

	// Retention keeps artifacts by calendar tiers ("7 daily, 4 weekly, 12
	// monthly"), evaluated in timeZone, instead of retentionDays; with
	// minVerified, the newest verified backups are never pruned.
	// +optional
	Retention *RetentionPolicy `json:"retention,omitempty"`

	// Parallelism is how many parts a run writes at once. Above 1, a
	// logical backup is written as a multi-part artifact (one zstd stream,
	// and age stream when encrypted, per part, plus an index) that a
	// RestoreJob loads over several connections at once: MySQL parts per
	// table or chunk of a large table; PostgreSQL pg_dump archives of the
	// schema, of each large table's rows, of the other rows and of the
	// indexes and constraints, all in one exported snapshot. Memory grows
	// by one compressor and one S3 part buffer per part in flight.
	// Defaults to 1 (one stream, the single-file artifact), also with a
	// CPU limit: a parallel MySQL dump holds FLUSH TABLES WITH READ LOCK
	// on the source while its dumps start (docs/store.md). Point-in-time
	// bases are one stream whatever the value.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Parallelism *int32 `json:"parallelism,omitempty"`

	// MaxRetries is how many times Kubernetes retries one failed run (the
	// Job's backoffLimit). Defaults to 3. This is distinct from the
	// operator's own retries of a failed reconcile.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	MaxRetries *int32 `json:"maxRetries,omitempty"`

	// ActiveDeadlineSeconds bounds one run, retries included (the Job's
	// activeDeadlineSeconds). Defaults to 3600.
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Maximum=604800
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`

	// Suspend stops new runs from starting; a running one finishes.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// Storage is where artifacts are written: exactly one of pvc or s3.
	Storage cairnv1.StorageSpec `json:"storage"`

	// DeletionPolicy says what happens to stored artifacts when this
	// BackupJob is deleted: Retain (default) keeps them, Delete removes them.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// ObjectLock writes every artifact and its manifest with S3 Object Lock
	// retention, so that a leaked credential cannot remove them before
	// their time; prune never deletes a locked artifact (it is kept, reason
	// "locked"). Needs an S3 store whose bucket has Object Lock enabled.
	// +optional
	ObjectLock *ObjectLockSpec `json:"objectLock,omitempty"`

	// Encryption encrypts every artifact on the agent with age to the
	// recipients given (public keys), and with pointInTime every segment
	// of the archived change log too; restores then need an identity
	// (RestoreJob spec.encryption). Unset: artifacts are compressed, not
	// encrypted.
	// +optional
	Encryption *cairnv1.EncryptionSpec `json:"encryption,omitempty"`

	// PointInTime turns on point-in-time recovery: the database's change
	// log (MySQL/MariaDB binary log, PostgreSQL WAL) is archived
	// continuously beside the dumps (PostgreSQL: physical base backups),
	// so a RestoreJob can recover any second of the window. With
	// encryption, the archived log is encrypted to the same recipients.
	// +optional
	PointInTime *PointInTimeSpec `json:"pointInTime,omitempty"`
}

// BackupJob backs up one database on a schedule. The backup operator owns one
// CronJob per BackupJob, whose pods run the Cairn agent.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 52",message="metadata.name: at most 52 characters, because the CronJob is named after the BackupJob"
// +kubebuilder:resource:shortName=bj;bjob,categories=cairn
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="TimeZone",type=string,JSONPath=`.spec.timeZone`
// +kubebuilder:printcolumn:name="Last Backup",type=date,JSONPath=`.status.lastBackupTime`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextScheduleTime`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.server.engine`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.server.version`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state.
	Spec BackupJobSpec `json:"spec"`
	// Status is the observed state.
	// +kubebuilder:default={"observedGeneration":-1}
	Status BackupJobStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BackupJobList is a list of BackupJobs.
type BackupJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BackupJob `json:"items"`
}

// GetConditions returns the status conditions (libs/conditions.Object).
func (b *BackupJob) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the status conditions (libs/conditions.Object).
func (b *BackupJob) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// Hub marks v1 as the conversion hub.
func (*BackupJob) Hub() {}

func init() {
	SchemeBuilder.Register(&BackupJob{}, &BackupJobList{})
}
