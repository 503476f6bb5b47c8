package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Phase is the one-word summary of a RestoreJob's state. It is a fixed enum:
// match on these constants, never on free text. A RestoreJob moves
// Pending → Running → Succeeded or Failed, and never leaves Succeeded or Failed.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type Phase string

const (
	// PhasePending: accepted; the artifact is being resolved or the restore
	// Job is not created yet (waiting for the BackupJob or its first
	// successful backup, or the spec cannot be acted on — see the conditions).
	PhasePending Phase = "Pending"
	// PhaseRunning: the restore Job exists and has not finished.
	PhaseRunning Phase = "Running"
	// PhaseSucceeded: the restore Job completed; the artifact is restored.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: the restore Job failed after all its retries (maxRetries)
	// or its deadline, was deleted before it finished, or restored the
	// artifact but a check of spec.checks failed. Create a new
	// RestoreJob to try again.
	PhaseFailed Phase = "Failed"
)

// Finalizers the restore operator puts on a RestoreJob.
const (
	// CleanupFinalizer holds a deleted RestoreJob until its Job (and the
	// Job's pods) are deleted. It never deletes stored data. The defaulting
	// webhook adds it on create; the controller adds it when it is missing.
	CleanupFinalizer = "restore.cairn.dev/cleanup"
)

// Labels the restore operator puts on the Job and its pods.
const (
	// RestoreJobLabel holds the name of the owning RestoreJob.
	RestoreJobLabel = "restore.cairn.dev/restorejob"
)

// Condition reasons specific to RestoreJob; the shared ones are in
// cairn.dev/apis/meta/v1.
const (
	// RestoreJobBackupJobNotFoundReason: the referenced BackupJob does not
	// exist (yet); the RestoreJob waits for it.
	RestoreJobBackupJobNotFoundReason = "BackupJobNotFound"
	// RestoreJobNoArtifactReason: the referenced BackupJob has no successful
	// backup yet; the RestoreJob waits for its first one.
	RestoreJobNoArtifactReason = "NoSuccessfulArtifact"
	// RestoreJobArtifactResolvedReason: the artifact to restore is chosen and
	// recorded in status.artifact; the restore Job is being created.
	RestoreJobArtifactResolvedReason = "ArtifactResolved"
	// RestoreJobRunningReason: the restore Job is running.
	RestoreJobRunningReason = "Running"
	// RestoreJobOverwritesSourceReason: the target is the database the
	// source BackupJob backs up, and spec.allowOverwriteSource is not true.
	RestoreJobOverwritesSourceReason = "OverwritesSource"
	// RestoreJobJobDeletedReason: the restore Job was deleted before it finished.
	RestoreJobJobDeletedReason = "JobDeleted"
	// RestoreJobChecksFailedReason: the artifact was restored, but a check
	// of spec.checks failed or could not run (status.checks says which).
	RestoreJobChecksFailedReason = "ChecksFailed"
	// RestoreJobChecksNotReportedReason: the restore Job succeeded, but the
	// agent reported no result for a check of spec.checks (an agent image
	// older than the checks, or its report was lost).
	RestoreJobChecksNotReportedReason = "ChecksNotReported"
	// RestoreJobEncryptionIdentityMissingReason: the artifact is encrypted
	// and spec.encryption names no identity; nothing was restored, the
	// target was not touched. The message names the recipients it needs.
	RestoreJobEncryptionIdentityMissingReason = "EncryptionIdentityMissing"
	// RestoreJobEncryptionIdentityMismatchReason: the artifact is encrypted
	// to recipients none of whose identities spec.encryption gives; the
	// target was not touched. The message names the recipients it needs.
	RestoreJobEncryptionIdentityMismatchReason = "EncryptionIdentityMismatch"
	// RestoreJobTargetNotDroppedReason (Warning Event): spec.dropTargetAfterChecks
	// was set, but the target was not dropped (it existed before the
	// restore, or the drop failed); the message says why.
	RestoreJobTargetNotDroppedReason = "TargetNotDropped"
	// RestoreJobPointInTimeNotEnabledReason: spec.source.pointInTime names
	// a BackupJob without spec.pointInTime: there is no archive to replay.
	RestoreJobPointInTimeNotEnabledReason = "PointInTimeNotEnabled"
	// RestoreJobOutsideWindowReason: the time of spec.source.pointInTime
	// is not recoverable (before the oldest base, after the newest archived
	// change); RestoreJobArchiveGapReason: the log up to it has a gap. The
	// target was not touched; the message names the window or the gap.
	RestoreJobOutsideWindowReason = "OutsideRecoverableWindow"
	RestoreJobArchiveGapReason    = "ArchiveGap"
)

// RestoreJobSpec is the desired state: what to restore, and into which
// database. It is immutable: to restore again, create a new RestoreJob.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: create a new RestoreJob"
// +kubebuilder:validation:XValidation:rule="!has(self.activeDeadlineSeconds) || self.activeDeadlineSeconds >= 60",message="activeDeadlineSeconds: must be at least 60"
type RestoreJobSpec struct {
	// Source is the artifact to restore: exactly one of backupJob (a
	// BackupJob in this namespace) or store (a store and a catalog key, for a
	// cluster that never ran the backup).
	Source RestoreSource `json:"source"`

	// Target is the database to restore into. It is created if it does not
	// exist; objects the artifact contains are replaced (PostgreSQL: in one
	// transaction, rolled back on failure).
	Target cairnv1.DatabaseRef `json:"target"`

	// AllowOverwriteSource must be true to restore into the very database
	// the source BackupJob backs up (same engine, host, port and database).
	// Without it such a RestoreJob is refused, so a typo cannot overwrite
	// production with an old backup.
	// +optional
	AllowOverwriteSource bool `json:"allowOverwriteSource,omitempty"`

	// Checks run in the target database after a successful restore (a
	// ProtectionPlan's verification sets them), each in a read-only
	// session; their results are reported in status.checks. A check that
	// fails (or cannot run) fails the RestoreJob with reason ChecksFailed.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Checks []Check `json:"checks,omitempty"`

	// DropTargetAfterChecks drops the target database once the checks ran
	// (passed or not), but only if this restore created it (a scratch
	// database used for verification; status.targetCreated); a database
	// that existed before is never dropped. status.targetDropped reports it.
	// +optional
	DropTargetAfterChecks bool `json:"dropTargetAfterChecks,omitempty"`

	// Encryption names the identity that decrypts an encrypted artifact
	// (one written by a BackupJob with spec.encryption). Without it, or
	// with an identity that is none of the artifact's recipients, the
	// restore fails before the target is touched, with reason
	// EncryptionIdentityMissing or EncryptionIdentityMismatch and a message
	// naming the recipients the artifact needs.
	// +optional
	Encryption *cairnv1.DecryptionSpec `json:"encryption,omitempty"`

	// RecordVerification records in the store, next to the artifact, that
	// it restored and every check passed (a ProtectionPlan's verification
	// sets it): a BackupJob's retention.minVerified keeps the newest such
	// artifacts. It only ever makes retention keep more.
	// +optional
	RecordVerification bool `json:"recordVerification,omitempty"`

	// Parallelism is how many parts of a multi-part artifact the restore
	// loads at once, each over its own connection and as its own
	// transaction (a single-file artifact restores over one connection
	// whatever the value). PostgreSQL: only into a database the restore
	// creates (then index and constraint builds run that many at once too,
	// and a failed restore drops the database); over an existing database
	// the parts load one after another in one transaction, as a
	// single-file artifact does. Defaults to the agent container's CPU limit in
	// whole CPUs when one is set, else 1.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Parallelism *int32 `json:"parallelism,omitempty"`

	// MaxRetries is how many times Kubernetes retries a failed restore (the
	// Job's backoffLimit). Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	MaxRetries *int32 `json:"maxRetries,omitempty"`

	// ActiveDeadlineSeconds bounds the restore, retries included (the Job's
	// activeDeadlineSeconds). Defaults to 3600.
	// +optional
	// +kubebuilder:default=3600
	// +kubebuilder:validation:Maximum=604800
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// RestoreSource says where the artifact comes from: exactly one of backupJob
// or store.
// +kubebuilder:validation:XValidation:rule="has(self.backupJob) != has(self.store)",message="source: set exactly one of backupJob or store"
// +kubebuilder:validation:XValidation:rule="!has(self.pointInTime) || (has(self.backupJob) && !has(self.backupJob.artifact))",message="source.pointInTime: restores a BackupJob's archive (source.backupJob without artifact: the dump before that time is chosen)"
type RestoreSource struct {
	// BackupJob restores an artifact of a BackupJob in this namespace, from
	// the BackupJob's store.
	// +optional
	BackupJob *BackupJobSource `json:"backupJob,omitempty"`

	// Store restores an artifact from a store given here, found by the
	// catalog key it was written under. No BackupJob needs to exist in this
	// cluster.
	// +optional
	Store *StoreSource `json:"store,omitempty"`

	// PointInTime restores the BackupJob's database as it was at this
	// second — RFC 3339 with a zone ("2026-12-05T14:03:07+08:00") — or at
	// the newest archived change ("latest"): the newest dump taken before
	// that time, then its binary log replayed up to it. The BackupJob
	// needs spec.pointInTime; a time outside its recoverable window
	// (status.pointInTime), or one whose log has a gap, fails the restore
	// before the target is touched. status.recoveryPoint is the second
	// reached.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`self == 'latest' || self.matches(r'^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$')`,message="source.pointInTime: an RFC 3339 time with its zone (e.g. 2026-12-05T14:03:07+08:00 or ...Z) or \"latest\""
	PointInTime string `json:"pointInTime,omitempty"`
}

// BackupJobSource names a BackupJob and, optionally, one of its artifacts.
type BackupJobSource struct {
	// Name of the BackupJob, in the RestoreJob's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Artifact to restore: a name or path as `agent list` prints it (e.g.
	// "shop_orders_20260102T030405.123Z.pgdump.zst"). Empty means the
	// BackupJob's newest successful artifact (its status.lastArtifact),
	// resolved once when the RestoreJob starts and recorded in
	// status.artifact: a retry or an operator restart restores the same
	// artifact, never a newer one.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule=`!self.startsWith('/') && !self.matches(r'(^|/)\.\.(/|$)') && !self.matches(r'\s')`,message="artifact: use a name or relative path without \"..\" or spaces"
	Artifact string `json:"artifact,omitempty"`
}

// StoreSource is a store and the artifact to restore from it.
type StoreSource struct {
	// Storage is the store holding the artifact: exactly one of pvc (a
	// PersistentVolumeClaim in this namespace) or s3.
	Storage cairnv1.StorageSpec `json:"storage"`

	// BackupJob is the catalog key the artifact was written under: the
	// "namespace/name" of the BackupJob that wrote it, in the cluster that
	// ran the backup.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	BackupJob string `json:"backupJob"`

	// Artifact to restore: a name or path as `agent list` prints it (e.g.
	// "shop_orders_20260102T030405.123Z.pgdump.zst").
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule=`!self.startsWith('/') && !self.matches(r'(^|/)\.\.(/|$)') && !self.matches(r'\s')`,message="artifact: use a name or relative path without \"..\" or spaces"
	Artifact string `json:"artifact"`
}

// RestoreJobStatus is the observed state, written by the restore operator only.
type RestoreJobStatus struct {
	// ObservedGeneration is the metadata.generation last acted on. -1 until
	// the operator has seen the object.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarises the state in one word: Pending, Running, Succeeded or
	// Failed.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions: Ready, Reconciling and Stalled (kstatus). Ready is True
	// once the restore succeeded; Stalled is True when it failed or the spec
	// cannot be acted on.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Source describes the source in one line, e.g. "backupjob/orders-db" or
	// "s3://bucket/prefix shop/orders-db".
	// +optional
	Source string `json:"source,omitempty"`

	// RecoveryPoint is the second a point-in-time restore reached
	// (spec.source.pointInTime): the requested time, or for "latest" the
	// newest archived change.
	// +optional
	RecoveryPoint *metav1.Time `json:"recoveryPoint,omitempty"`

	// Artifact is the artifact restored. It is chosen once, before the
	// restore Job is created, and never changes afterwards; when the restore
	// succeeds it holds what the agent reported (path, size, checksum).
	// +optional
	Artifact *cairnv1.Artifact `json:"artifact,omitempty"`

	// The restore Job: its name, when it was created and when it
	// finished, either result.
	cairnv1.AgentRun `json:",inline"`

	// Attempts counts the restore pods started so far (1 + retries).
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// Checks are the results of spec.checks, as the agent reported them.
	// +optional
	// +listType=map
	// +listMapKey=name
	Checks []CheckResult `json:"checks,omitempty"`

	// TargetCreated is true when the target database did not exist and the
	// restore created it.
	// +optional
	TargetCreated bool `json:"targetCreated,omitempty"`

	// TargetDropped is true when the target database was dropped after the
	// checks (spec.dropTargetAfterChecks).
	// +optional
	TargetDropped bool `json:"targetDropped,omitempty"`

	// Verified is true when the restore recorded its verification in the
	// store (spec.recordVerification, every check passed).
	// +optional
	Verified bool `json:"verified,omitempty"`

	// Server is the target database server as the restore's agent found
	// it (its result: engine and version).
	// +optional
	Server *cairnv1.ServerInfo `json:"server,omitempty"`
}

// Check is one check run in the restored database: either a SQL query with
// an expected result, or the restored tables' row counts compared with
// those the backup recorded.
// +kubebuilder:validation:XValidation:rule="has(self.sql) != (has(self.rowCountsMatchBackup) && self.rowCountsMatchBackup)",message="check: set exactly one of sql (with equals, atLeast or atMost) or rowCountsMatchBackup: true"
// +kubebuilder:validation:XValidation:rule="!has(self.sql) || has(self.equals) || has(self.atLeast) || has(self.atMost)",message="check: a sql check needs an expected result: equals, atLeast or atMost"
type Check struct {
	// Name of the check, reported in status.checks.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
	// SQL is a read-only query returning one row with one column.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	SQL string `json:"sql,omitempty"`
	// Equals: the query's value, as text, must equal this.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Equals *string `json:"equals,omitempty"`
	// AtLeast: the query's value, a number, must be at least this.
	// +optional
	AtLeast *int64 `json:"atLeast,omitempty"`
	// AtMost: the query's value, a number, must be at most this.
	// +optional
	AtMost *int64 `json:"atMost,omitempty"`
	// RowCountsMatchBackup: every restored table has the row count the
	// backup recorded.
	// +optional
	RowCountsMatchBackup bool `json:"rowCountsMatchBackup,omitempty"`
}

// CheckResult is the outcome of one check.
type CheckResult struct {
	// Name of the check (spec.checks[].name).
	Name string `json:"name"`
	// Passed is true when the check's expectation held.
	Passed bool `json:"passed"`
	// Value is what the query returned, or the row counts compared.
	// +optional
	Value string `json:"value,omitempty"`
	// Message says why a check failed.
	// +optional
	Message string `json:"message,omitempty"`
}

// RestoreJob restores one stored backup artifact into a database, once. The
// restore operator owns one Job per RestoreJob, whose pod runs `agent restore`.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=rj;rjob,categories=cairn
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`
// +kubebuilder:printcolumn:name="Artifact",type=string,JSONPath=`.status.artifact.path`
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.status.server.engine`,priority=1
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.server.version`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 55",message="metadata.name: at most 55 characters (the restore Job is named <name>-restore, at most 63)"
type RestoreJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state. It is immutable.
	Spec RestoreJobSpec `json:"spec"`
	// Status is the observed state.
	// +kubebuilder:default={"observedGeneration":-1}
	Status RestoreJobStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// RestoreJobList is a list of RestoreJobs.
type RestoreJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RestoreJob `json:"items"`
}

// GetConditions returns the status conditions (libs/conditions.Object).
func (r *RestoreJob) GetConditions() []metav1.Condition { return r.Status.Conditions }

// SetConditions replaces the status conditions (libs/conditions.Object).
func (r *RestoreJob) SetConditions(c []metav1.Condition) { r.Status.Conditions = c }

// JobName is the name of the RestoreJob's one restore Job.
func (r *RestoreJob) JobName() string { return r.Name + "-restore" }

// Finished reports whether the RestoreJob reached Succeeded or Failed.
func (r *RestoreJob) Finished() bool {
	return r.Status.Phase == PhaseSucceeded || r.Status.Phase == PhaseFailed
}

func init() {
	SchemeBuilder.Register(&RestoreJob{}, &RestoreJobList{})
}
