package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// MigrationJobStatus is the observed state, written by the migration
// operator only.
type MigrationJobStatus struct {
	// ObservedGeneration is the metadata.generation last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Phase summarises the state in one word (see Phase).
	// +optional
	Phase Phase `json:"phase,omitempty"`

	// Conditions: Ready, Reconciling, Stalled (kstatus), and Prechecked,
	// Copied, Verified, CutOver.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Precheck is what the precheck found.
	// +optional
	Precheck *PrecheckResult `json:"precheck,omitempty"`

	// Progress of the copy.
	// +optional
	Progress Progress `json:"progress,omitempty"`

	// Verification is the per-table comparison of target and source.
	// +optional
	Verification *Verification `json:"verification,omitempty"`

	// Replication is the state of Continuous mode's logical replication.
	// +optional
	Replication *ReplicationStatus `json:"replication,omitempty"`

	// Artifact is the store artifact of a Store transfer, as export
	// reported it.
	// +optional
	Artifact *cairnv1.Artifact `json:"artifact,omitempty"`

	// Cutover is what cutover did.
	// +optional
	Cutover *CutoverStatus `json:"cutover,omitempty"`

	// Abort is the failure being cleaned up: set when a migration that
	// changed the source (replication objects, read-only) fails or is
	// aborted; the abort step undoes those changes, then the phase becomes
	// Failed with this reason and message.
	// +optional
	Abort *AbortStatus `json:"abort,omitempty"`

	// Steps are the agent Jobs run so far, in order. A step's Job name is
	// recorded before the Job is created: an operator restarted mid-step
	// finds the same Job, never runs a step twice and never skips one.
	// +optional
	// +listType=map
	// +listMapKey=step
	// +kubebuilder:validation:MaxItems=32
	Steps []StepStatus `json:"steps,omitempty"`

	// StartTime is when the migration started (the first step's Job).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// CompletionTime is when it reached Succeeded or Failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
}

// PrecheckResult is what the precheck found.
type PrecheckResult struct {
	// Passed is true when no problem was found.
	Passed bool `json:"passed"`
	// SourceVersion and TargetVersion are the servers' versions.
	// +optional
	SourceVersion string `json:"sourceVersion,omitempty"`
	// +optional
	TargetVersion string `json:"targetVersion,omitempty"`
	// Tables is the number of included tables on the source.
	// +optional
	Tables int32 `json:"tables,omitempty"`
	// EstimatedBytes is the source's size of the included tables.
	// +optional
	EstimatedBytes int64 `json:"estimatedBytes,omitempty"`
	// Problems block the migration, one sentence each.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Problems []string `json:"problems,omitempty"`
}

// Progress of the copy.
type Progress struct {
	// TablesDone is the number of tables copied.
	// +optional
	TablesDone int32 `json:"tablesDone,omitempty"`
	// TablesTotal is the number of included tables (from the precheck).
	// +optional
	TablesTotal int32 `json:"tablesTotal,omitempty"`
	// Bytes copied.
	// +optional
	Bytes int64 `json:"bytes,omitempty"`
}

// Verification is the per-table comparison.
type Verification struct {
	// Method is RowCount or Checksum.
	Method VerifyMethod `json:"method"`
	// Summary in one line, e.g. "12 tables: 12 match".
	Summary string `json:"summary"`
	// Tables compared, Matched and Mismatched.
	Tables     int32 `json:"tables"`
	Matched    int32 `json:"matched"`
	Mismatched int32 `json:"mismatched"`
	// CatchingUp (Continuous mode) is how many tables were still being
	// written when verification's re-checks ended: not found different,
	// not found equal; they do not fail verification, and cutover compares
	// every table exactly once the writes are stopped.
	// +optional
	CatchingUp int32 `json:"catchingUp,omitempty"`
	// Items: mismatches first, then matched tables (matched ones may be
	// left out to fit: Truncated counts them).
	// +optional
	// +kubebuilder:validation:MaxItems=1000
	Items []TableVerification `json:"items,omitempty"`
	// Truncated is how many tables were left out of Items.
	// +optional
	Truncated int32 `json:"truncated,omitempty"`
}

// TableVerification is one table's comparison.
type TableVerification struct {
	// Table is "schema.table".
	Table string `json:"table"`
	// SourceRows and TargetRows are the row counts; -1 when the table is
	// missing on that side.
	SourceRows int64 `json:"sourceRows"`
	TargetRows int64 `json:"targetRows"`
	// Match is true when counts (and checksums) agree.
	Match bool `json:"match"`
	// Reason when not matched: "rows differ", "content differs", "missing
	// on target", "only on target".
	// +optional
	Reason string `json:"reason,omitempty"`
	// State (Continuous mode): matched, catchingUp or differs (a
	// difference confirmed with the source's rows unchanged; only this
	// fails verification).
	// +optional
	State string `json:"state,omitempty"`
	// Rechecks (Continuous mode) is how many times the table's differing
	// rows were compared again, each time once the target had applied the
	// source's changes up to a WAL position read after the source's read.
	// +optional
	Rechecks int32 `json:"rechecks,omitempty"`
	// Rows (Continuous mode, not matched) is how many rows, by primary
	// key, still differed; 0 for a table compared whole.
	// +optional
	Rows int32 `json:"rows,omitempty"`
	// LagBytes (catchingUp) is how far the target was behind then.
	// +optional
	LagBytes int64 `json:"lagBytes,omitempty"`
}

// ReplicationStatus is the state of a Continuous migration's replication.
type ReplicationStatus struct {
	// Publication, Subscription and Slot are the replication objects' names.
	// +optional
	Publication string `json:"publication,omitempty"`
	// +optional
	Subscription string `json:"subscription,omitempty"`
	// +optional
	Slot string `json:"slot,omitempty"`
	// LagBytes is how far the subscription is behind the source.
	LagBytes int64 `json:"lagBytes"`
	// LagSeconds is the source's replay lag for the subscription, in
	// seconds with milliseconds ("0.412"): how long ago the change the
	// target last applied was written; "0" when caught up.
	// +optional
	LagSeconds string `json:"lagSeconds,omitempty"`
	// RetainedWALBytes is the WAL the slot keeps on the source.
	RetainedWALBytes int64 `json:"retainedWALBytes"`
	// SyncedTables of Tables finished their initial sync.
	// +optional
	SyncedTables int32 `json:"syncedTables,omitempty"`
	// +optional
	Tables int32 `json:"tables,omitempty"`
	// Checks is the number of replication-status Jobs run so far.
	// +optional
	Checks int32 `json:"checks,omitempty"`
	// LastCheckTime is when the last replication-status Job finished.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`
	// Stopped is true once replication-stop ran.
	// +optional
	Stopped bool `json:"stopped,omitempty"`
	// NotReplicated are included source tables that the publication does
	// not carry (created after replication started): their rows do not
	// reach the target. The last replication check's list; also a
	// warning of that step.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	NotReplicated []string `json:"notReplicated,omitempty"`
}

// AbortStatus is the failure a migration is cleaning up after.
type AbortStatus struct {
	// Reason is the Stalled reason the migration fails with.
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason"`
	// Message is the Stalled message.
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message"`
}

// CutoverStatus is what cutover did.
type CutoverStatus struct {
	// Actions done, one line each, e.g. "made the source read-only",
	// "switched Secret app-db to postgres target-db:5432/orders".
	// +optional
	Actions []string `json:"actions,omitempty"`
	// StartTime is when cutover started (approval, or verification with
	// mode Auto). In Continuous mode replication is stopped only after a
	// replication check started after it (and after the source was made
	// read-only) found the target caught up (lag 0).
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// Time when cutover finished.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// StepPhase is the state of one step's Job.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type StepPhase string

const (
	// StepPending: the Job's name is recorded; it may not exist yet.
	StepPending StepPhase = "Pending"
	// StepRunning: the Job exists and has not finished.
	StepRunning StepPhase = "Running"
	// StepSucceeded: the Job completed and its result is recorded.
	StepSucceeded StepPhase = "Succeeded"
	// StepFailed: the Job failed, or was deleted before it finished.
	StepFailed StepPhase = "Failed"
)

// Where a step's Job runs.
const (
	// ClusterLocal is the MigrationJob's cluster.
	ClusterLocal = "Local"
	// ClusterTarget is the target's cluster (spec.target.kubeconfigSecretRef).
	ClusterTarget = "Target"
)

// StepStatus is one step's Job.
type StepStatus struct {
	// Step is the agent step (precheck, copy, export, import, verify,
	// cutover, replication-start, replication-status, replication-stop, ...).
	Step string `json:"step"`
	// Cluster is Local or Target.
	// +kubebuilder:validation:Enum=Local;Target
	Cluster string `json:"cluster"`
	// Namespace of the Job.
	Namespace string `json:"namespace"`
	// Phase of the Job.
	Phase StepPhase `json:"phase"`
	// The step's Job: its name, recorded before the Job is created, when it
	// was created and when it finished.
	cairnv1.AgentRun `json:",inline"`
	// Message says why the step failed.
	// +optional
	Message string `json:"message,omitempty"`
	// Actions the agent reported for this step, one line each (e.g. how
	// the copy took its snapshot, the binlog position, the large objects
	// copied, a reset of a killed attempt's leftovers).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Actions []string `json:"actions,omitempty"`
	// Warnings the agent reported: findings that did not fail the step but
	// need the user's attention (e.g. a table created on the source after
	// replication started, which is not replicated). Each new one is also a
	// Warning Event (reason AgentWarning).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	Warnings []string `json:"warnings,omitempty"`
}
