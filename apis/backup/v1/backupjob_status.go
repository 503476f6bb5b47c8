package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// BackupJobStatus is the observed state, written by the backup operator only.
type BackupJobStatus struct {
	// ObservedGeneration is the metadata.generation last acted on. -1 until
	// the operator has seen the object.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarises the state in one word; see the Phase constants.
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions: Ready, Reconciling and Stalled (kstatus).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastBackupTime is when the last finished run finished, either result.
	// +optional
	LastBackupTime *metav1.Time `json:"lastBackupTime,omitempty"`

	// LastSuccessfulTime is when the last successful run finished.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`

	// LastFailureTime is when the last failed run finished.
	// +optional
	LastFailureTime *metav1.Time `json:"lastFailureTime,omitempty"`

	// LastResult is the result of the last finished run.
	// +optional
	LastResult RunResult `json:"lastResult,omitempty"`

	// LastArtifact is the artifact the last successful run wrote, as the
	// agent reported it.
	// +optional
	LastArtifact *cairnv1.Artifact `json:"lastArtifact,omitempty"`

	// LastRunName is the name of the Job of the last finished run.
	// +optional
	LastRunName string `json:"lastRunName,omitempty"`

	// RunsAtLastBackupTime names every recorded run that finished in the
	// second of lastBackupTime (Job times have a one-second resolution):
	// a run that ends in that same second but is seen later is recorded
	// too, once, whatever its name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	RunsAtLastBackupTime []string `json:"runsAtLastBackupTime,omitempty"`

	// LastRunStartTime is when the Job of the last finished run started.
	// +optional
	LastRunStartTime *metav1.Time `json:"lastRunStartTime,omitempty"`

	// LastRunMessage says how the last finished run ended: its artifact, or
	// why it failed (the Job's reason and the agent's report).
	// +optional
	LastRunMessage string `json:"lastRunMessage,omitempty"`

	// NextScheduleTime is the next time the schedule fires, computed in timeZone.
	// Empty while suspended.
	// +optional
	NextScheduleTime *metav1.Time `json:"nextScheduleTime,omitempty"`

	// ConsecutiveFailures counts failed runs since the last success.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`

	// LastRunNowRequest is the last value of the run-now annotation acted on.
	// +optional
	LastRunNowRequest string `json:"lastRunNowRequest,omitempty"`

	// Retention is what the last prune after a successful backup kept and
	// why, and what it deleted (spec.retention; with retentionDays, what it
	// kept within those days).
	// +optional
	Retention *RetentionStatus `json:"retention,omitempty"`

	// Catalog is the store's catalog as the last listing requested by the
	// list-catalog annotation found it.
	// +optional
	Catalog *CatalogListing `json:"catalog,omitempty"`

	// PointInTime is the recoverable window of the archive
	// (spec.pointInTime).
	// +optional
	PointInTime *PointInTimeStatus `json:"pointInTime,omitempty"`

	// Server is the database server the last run that reported one found
	// (the agent's result: engine and version), e.g. postgres 17.12.
	// +optional
	Server *cairnv1.ServerInfo `json:"server,omitempty"`

	// UnsupportedServer is set when a run failed because no tool of its
	// agent image can serve the database server (agent failure code
	// UnsupportedServerVersion). While the spec (generation) and the
	// operator's agent image are those recorded here, the BackupJob is
	// Stalled with reason UnsupportedServerVersion and its CronJob
	// suspended: no run starts. A change of either, or a new run-now
	// request, clears it and runs again.
	// +optional
	UnsupportedServer *UnsupportedServerStatus `json:"unsupportedServer,omitempty"`
}

// UnsupportedServerStatus is a run's report that its agent image cannot
// serve the database server.
type UnsupportedServerStatus struct {
	// Image is the agent image of that run.
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// Generation is the BackupJob's metadata.generation when the run was
	// recorded.
	Generation int64 `json:"generation"`
	// Run is the name of the run's Job.
	// +optional
	Run string `json:"run,omitempty"`
	// Message is the agent's reason: the server's version and the range
	// the image supports.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Message string `json:"message,omitempty"`
}

// CatalogListing is one listing of the store's catalog.
type CatalogListing struct {
	// Request is the list-catalog annotation value this listing answers.
	Request string `json:"request"`
	// Time is when the listing finished.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Count is the number of artifacts in the catalog.
	// +optional
	Count int32 `json:"count,omitempty"`
	// Artifacts are the newest artifacts of the catalog, newest first: as
	// many as the agent's report holds (Count may be larger).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Artifacts []CatalogArtifact `json:"artifacts,omitempty"`
	// Message says why the listing failed; empty when it succeeded.
	// +optional
	Message string `json:"message,omitempty"`
}

// CatalogArtifact is one artifact of the store's catalog.
type CatalogArtifact struct {
	// Path of the artifact in the store, as a RestoreJob names it.
	Path string `json:"path"`
	// Size in bytes of the stored (compressed) artifact.
	// +optional
	Size int64 `json:"size,omitempty"`
	// Checksum of the stored artifact, "sha256:<hex>".
	// +optional
	Checksum string `json:"checksum,omitempty"`
	// Time is when the backup finished (the data's point in time).
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// Engine is postgres or mysql.
	// +optional
	Engine string `json:"engine,omitempty"`
	// Tables and Rows are what the backup recorded (its inventory).
	// +optional
	Tables int32 `json:"tables,omitempty"`
	// +optional
	Rows int64 `json:"rows,omitempty"`
	// EncryptedTo are the fingerprints of the age recipients the artifact
	// is encrypted to; empty when it is not encrypted.
	// +optional
	EncryptedTo []string `json:"encryptedTo,omitempty"`
}

// RetentionStatus is what the last prune (after a successful backup)
// decided.
type RetentionStatus struct {
	// Time is when that backup run finished.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
	// DryRun: nothing was deleted; pruned is what would have been.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// TimeZone the tiers were evaluated in.
	// +optional
	TimeZone string `json:"timeZone,omitempty"`
	// Kept are the artifacts the policy keeps, newest first, each with why
	// (newest, last, hourly, daily, weekly, monthly, yearly, verified,
	// retentionDays).
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Kept []KeptArtifact `json:"kept,omitempty"`
	// Pruned are the artifacts the policy deleted (with dryRun: would
	// delete).
	// +optional
	// +kubebuilder:validation:MaxItems=256
	Pruned []string `json:"pruned,omitempty"`
	// Truncated counts artifacts left out of kept and pruned to fit the
	// agent's report.
	// +optional
	Truncated int32 `json:"truncated,omitempty"`
}

// KeptArtifact is an artifact a retention policy keeps, and why.
type KeptArtifact struct {
	// Artifact is the artifact's name in the store.
	Artifact string `json:"artifact"`
	// Reasons it is kept.
	Reasons []string `json:"reasons"`
	// LockedUntil is the artifact's S3 Object Lock retain-until date as
	// the prune found it, or extended it to what the calendar tiers keep
	// (spec.objectLock).
	// +optional
	LockedUntil *metav1.Time `json:"lockedUntil,omitempty"`
}
