package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
)

// Phase is the one-word summary of a MigrationJob's state. It is a fixed
// enum: match on these constants, never on free text. A MigrationJob moves
// Pending → Prechecking → Copying → Verifying → ReadyForCutover →
// CuttingOver → Succeeded, or to Failed from any of them, and never leaves
// Succeeded or Failed.
// +kubebuilder:validation:Enum=Pending;Prechecking;Copying;Verifying;ReadyForCutover;CuttingOver;Succeeded;Failed
type Phase string

const (
	// PhasePending: accepted; nothing runs yet (a referenced Secret or the
	// target cluster is missing, or the spec cannot be acted on — see the
	// conditions).
	PhasePending Phase = "Pending"
	// PhasePrechecking: the precheck Job(s) check both databases:
	// connectivity, privileges, versions, an empty target, the size.
	PhasePrechecking Phase = "Prechecking"
	// PhaseCopying: schema and data are being copied (directly, or exported
	// to the store and imported from it); in Continuous mode, followed by
	// starting logical replication.
	PhaseCopying Phase = "Copying"
	// PhaseVerifying: the target is compared with the source, table by table.
	PhaseVerifying Phase = "Verifying"
	// PhaseReadyForCutover: copied and verified. With cutover mode Manual,
	// waits here until spec.cutover.approved is true; in Continuous mode,
	// replication keeps the target in step meanwhile.
	PhaseReadyForCutover Phase = "ReadyForCutover"
	// PhaseCuttingOver: the declared cutover actions run (make the source
	// read-only; in Continuous mode wait until the target caught up, then
	// stop replication; switch the Secret spec.cutover.switchSecret names).
	PhaseCuttingOver Phase = "CuttingOver"
	// PhaseSucceeded: migrated (and cut over), or, with spec.dryRun, the
	// precheck passed.
	PhaseSucceeded Phase = "Succeeded"
	// PhaseFailed: a step failed, the precheck found problems, or the
	// verification found differences (see the conditions). Create a new
	// MigrationJob to try again.
	PhaseFailed Phase = "Failed"
)

// Mode says what is migrated.
// +kubebuilder:validation:Enum=Full;SchemaOnly;Continuous
type Mode string

const (
	// ModeFull copies schema and data once.
	ModeFull Mode = "Full"
	// ModeSchemaOnly copies the schema (tables, indexes, constraints, ...)
	// without rows.
	ModeSchemaOnly Mode = "SchemaOnly"
	// ModeContinuous (PostgreSQL only, direct transfer) copies schema and
	// data, then keeps the target in step with PostgreSQL's logical
	// replication (a publication on the source, a subscription on the
	// target) until cutover.
	ModeContinuous Mode = "Continuous"
)

// TransferMethod says how the data travels.
// +kubebuilder:validation:Enum=Direct;Store
type TransferMethod string

const (
	// TransferDirect streams the source's dump straight into the target,
	// from a Job in the MigrationJob's namespace (the target must be
	// reachable from there).
	TransferDirect TransferMethod = "Direct"
	// TransferStore exports to a store (spec.transfer.storage) from the
	// source's cluster and imports from it in the target's cluster.
	TransferStore TransferMethod = "Store"
)

// VerifyMethod says how the target is compared with the source.
// +kubebuilder:validation:Enum=None;RowCount;Checksum
type VerifyMethod string

const (
	// VerifyNone skips verification.
	VerifyNone VerifyMethod = "None"
	// VerifyRowCount compares row counts per table, both directions.
	VerifyRowCount VerifyMethod = "RowCount"
	// VerifyChecksum compares row counts and a content checksum per table,
	// both directions.
	VerifyChecksum VerifyMethod = "Checksum"
)

// CutoverMode says whether cutover waits for a human.
// +kubebuilder:validation:Enum=Manual;Auto
type CutoverMode string

const (
	// CutoverManual waits in ReadyForCutover until spec.cutover.approved is true.
	CutoverManual CutoverMode = "Manual"
	// CutoverAuto cuts over as soon as the target is copied and verified.
	CutoverAuto CutoverMode = "Auto"
)

// Finalizers the migration operator puts on a MigrationJob.
const (
	// CleanupFinalizer holds a deleted MigrationJob until its Jobs — in this
	// cluster and in the target cluster — are deleted (and, in Continuous
	// mode, replication is stopped). It never deletes data in either database.
	CleanupFinalizer = "migration.cairn.dev/cleanup"
)

// Labels the migration operator puts on its Jobs and their pods, in both
// clusters (Jobs in another cluster carry no owner reference: these labels
// are how they are found and cleaned up).
const (
	// MigrationJobLabel holds the name of the MigrationJob.
	MigrationJobLabel = "migration.cairn.dev/migrationjob"
	// MigrationJobNamespaceLabel holds the MigrationJob's namespace.
	MigrationJobNamespaceLabel = "migration.cairn.dev/namespace"
	// MigrationJobUIDLabel holds the MigrationJob's UID.
	MigrationJobUIDLabel = "migration.cairn.dev/uid"
	// StepLabel holds the agent step the Job runs (precheck, copy, ...).
	StepLabel = "migration.cairn.dev/step"
)

// Condition types a MigrationJob reports besides Ready, Reconciling and
// Stalled, one per stage.
const (
	// PrecheckedCondition: True once the precheck passed; False with the
	// problems found.
	PrecheckedCondition = "Prechecked"
	// CopiedCondition: True once schema and data are copied.
	CopiedCondition = "Copied"
	// VerifiedCondition: True once every table matched; False naming the
	// tables that differ.
	VerifiedCondition = "Verified"
	// CutOverCondition: True once the cutover actions ran; False while
	// waiting for approval.
	CutOverCondition = "CutOver"
)

// Condition reasons specific to MigrationJob; the shared ones are in
// cairn.dev/apis/meta/v1.
const (
	// StepRunningReason: a step's Job is running.
	StepRunningReason = "StepRunning"
	// StepFailedReason: a step's Job failed.
	StepFailedReason = "StepFailed"
	// JobDeletedReason: a step's Job was deleted before it finished.
	JobDeletedReason = "JobDeleted"
	// PrecheckPassedReason: the precheck found no problem.
	PrecheckPassedReason = "PrecheckPassed"
	// PrecheckFailedReason: the precheck found problems.
	PrecheckFailedReason = "PrecheckFailed"
	// DryRunReason: spec.dryRun; the migration stopped after the precheck.
	DryRunReason = "DryRun"
	// CopiedReason: schema and data are copied.
	CopiedReason = "Copied"
	// VerificationPassedReason: every table matched.
	VerificationPassedReason = "VerificationPassed"
	// VerificationFailedReason: tables differ.
	VerificationFailedReason = "VerificationFailed"
	// VerificationSkippedReason: spec.verify is None.
	VerificationSkippedReason = "VerificationSkipped"
	// AwaitingApprovalReason: waiting for spec.cutover.approved.
	AwaitingApprovalReason = "AwaitingApproval"
	// CutOverReason: the cutover actions ran.
	CutOverReason = "CutOver"
	// TargetClusterReason: the target cluster cannot be used (kubeconfig
	// Secret missing or invalid, cluster unreachable).
	TargetClusterReason = "TargetClusterUnavailable"
	// SameDatabaseReason: source and target are the same database.
	SameDatabaseReason = "SameDatabase"
	// RetainedWALLimitReason: the replication slot retained more WAL than
	// spec.replication.maxRetainedWAL; the migration was aborted.
	RetainedWALLimitReason = "RetainedWALLimitExceeded"
	// SourceChangedReason: at cutover, with writes stopped, the source
	// differs from the verified target; nothing was switched.
	SourceChangedReason = "SourceChanged"
	// AwaitingWritersStoppedReason: cutover would switch the Secret or
	// stop replication but writes to the source are not stopped (neither
	// sourceReadOnly nor writersStopped).
	AwaitingWritersStoppedReason = "AwaitingWritersStopped"
	// AbortingReason: the migration failed; what it changed on the source
	// is being undone before it is marked Failed.
	AbortingReason = "Aborting"
	// ReplicatingReason: Continuous mode; replication keeps the target in step.
	ReplicatingReason = "Replicating"
)

// MigrationJobSpec is the desired state. It is immutable except
// spec.cutover.approved: to migrate differently, create a new MigrationJob.
// +kubebuilder:validation:XValidation:rule="self.source.engine == self.target.engine",message="target.engine: must be the source's engine (postgres to postgres, mysql to mysql)"
// +kubebuilder:validation:XValidation:rule="has(self.target.kubeconfigSecretRef) || self.source.host.lowerAscii() != self.target.host.lowerAscii() || self.source.database != self.target.database || (has(self.source.port) ? self.source.port : (self.source.engine == 'postgres' ? 5432 : 3306)) != (has(self.target.port) ? self.target.port : (self.target.engine == 'postgres' ? 5432 : 3306))",message="target: is the source database (same host, port and database in the same cluster)"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Continuous' || self.source.engine == 'postgres'",message="mode: Continuous needs postgres (PostgreSQL logical replication)"
// +kubebuilder:validation:XValidation:rule="self.mode != 'Continuous' || self.transfer.method == 'Direct'",message="mode: Continuous needs transfer.method Direct (the target database subscribes to the source)"
// +kubebuilder:validation:XValidation:rule="!has(self.replication) || self.mode == 'Continuous'",message="replication: only with mode Continuous"
// +kubebuilder:validation:XValidation:rule="has(self.objects) == has(oldSelf.objects) && has(self.replication) == has(oldSelf.replication) && has(self.image) == has(oldSelf.image) && has(self.resources) == has(oldSelf.resources)",message="spec is immutable except spec.cutover.approved and spec.cutover.writersStopped: create a new MigrationJob"
// +kubebuilder:validation:XValidation:rule="!has(self.activeDeadlineSeconds) || self.activeDeadlineSeconds >= 60",message="activeDeadlineSeconds: must be at least 60"
type MigrationJobSpec struct {
	// Source is the database to migrate from, reached from this cluster.
	// Its credentials Secret is in the MigrationJob's namespace.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="source is immutable: create a new MigrationJob"
	Source cairnv1.DatabaseRef `json:"source"`

	// Target is the database to migrate into: same engine as the source,
	// possibly in another cluster (kubeconfigSecretRef).
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="target is immutable: create a new MigrationJob"
	Target TargetDatabase `json:"target"`

	// Mode is Full (schema and data, once), SchemaOnly, or Continuous
	// (PostgreSQL: schema and data, then logical replication until cutover).
	// +optional
	// +kubebuilder:default=Full
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="mode is immutable: create a new MigrationJob"
	Mode Mode `json:"mode,omitempty"`

	// Objects selects what is migrated; empty means every table.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="objects is immutable: create a new MigrationJob"
	Objects *ObjectSelector `json:"objects,omitempty"`

	// Transfer says how the data travels: Direct (streamed) or Store.
	// +optional
	// +kubebuilder:default={method:"Direct",parallelism:4}
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="transfer is immutable: create a new MigrationJob"
	Transfer TransferSpec `json:"transfer,omitempty"`

	// Verify is how the target is compared with the source after the copy:
	// None, RowCount, or Checksum (row counts and a content checksum per
	// table, both directions). Defaults to Checksum.
	// +optional
	// +kubebuilder:default=Checksum
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="verify is immutable: create a new MigrationJob"
	Verify VerifyMethod `json:"verify,omitempty"`

	// Cutover says when and how the migration switches over to the target.
	// Nothing happens at cutover that is not declared here.
	// +optional
	// +kubebuilder:default={mode:"Manual",sourceReadOnly:false}
	Cutover CutoverSpec `json:"cutover,omitempty"`

	// AllowNonEmptyTarget lets the precheck pass when the target already
	// holds included tables (they are replaced).
	// +optional
	// +kubebuilder:default=false
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="allowNonEmptyTarget is immutable: create a new MigrationJob"
	AllowNonEmptyTarget bool `json:"allowNonEmptyTarget"`

	// DryRun stops after the precheck: phase Succeeded with reason DryRun,
	// nothing written to the target.
	// +optional
	// +kubebuilder:default=false
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="dryRun is immutable: create a new MigrationJob"
	DryRun bool `json:"dryRun"`

	// Replication tunes Continuous mode.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="replication is immutable: create a new MigrationJob"
	Replication *ReplicationSpec `json:"replication,omitempty"`

	// Image of the agent for this MigrationJob's Jobs; empty means the
	// operator's --agent-image.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="image is immutable: create a new MigrationJob"
	// +kubebuilder:validation:XValidation:rule=`self.matches(r'^[a-z0-9][a-z0-9._/:@-]*$')`,message="image: use an image reference, e.g. ghcr.io/cairn-dev/agent:v1.2.3"
	Image string `json:"image,omitempty"`

	// Resources of the agent container of every step's Job; empty means
	// the agent's defaults (100m CPU and 64Mi requested, 256Mi limit).
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="resources is immutable: create a new MigrationJob"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// MaxRetries is how many times Kubernetes retries each step's Job (its
	// backoffLimit). Defaults to 2.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=20
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="maxRetries is immutable: create a new MigrationJob"
	MaxRetries *int32 `json:"maxRetries,omitempty"`

	// ActiveDeadlineSeconds bounds each step's Job, retries included.
	// Defaults to 86400 (one day).
	// +optional
	// +kubebuilder:default=86400
	// +kubebuilder:validation:Maximum=2592000
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="activeDeadlineSeconds is immutable: create a new MigrationJob"
	ActiveDeadlineSeconds *int64 `json:"activeDeadlineSeconds,omitempty"`
}

// TargetDatabase is a database reference (as the source's) that may be in
// another cluster.
// +kubebuilder:validation:XValidation:rule="!has(self.__namespace__) || has(self.kubeconfigSecretRef)",message="namespace: only with kubeconfigSecretRef (a local target's Jobs run in the MigrationJob's namespace)"
type TargetDatabase struct {
	cairnv1.DatabaseRef `json:",inline"`

	// KubeconfigSecretRef names a Secret in the MigrationJob's namespace
	// holding a kubeconfig for the cluster the target is in. Without it the
	// target is in this cluster. With transfer Direct it only says where the
	// target is (every Job runs here; the target's credentials Secret is read
	// here); with transfer Store the import and verify Jobs run in that
	// cluster, where the target's credentials Secret and the store must be.
	// +optional
	KubeconfigSecretRef *KubeconfigSecretRef `json:"kubeconfigSecretRef,omitempty"`

	// Namespace in the target cluster for the Jobs that run there; defaults
	// to the MigrationJob's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
}

// KubeconfigSecretRef names a Secret key holding a kubeconfig.
type KubeconfigSecretRef struct {
	// Name of the Secret, in the MigrationJob's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// Key of the kubeconfig in the Secret; defaults to "kubeconfig".
	// +optional
	// +kubebuilder:default=kubeconfig
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// ObjectPatternMaxLength is the longest include/exclude pattern.
const ObjectPatternMaxLength = 128

// ObjectPattern is the pattern of one include/exclude entry: "schema.table"
// or "schema" (all its tables), each part letters, digits, "_", "$", "-",
// with "*" (any run of characters) and "?" (one character) as wildcards.
const ObjectPattern = `^[A-Za-z0-9_$*?-]+(\.[A-Za-z0-9_$*?-]+)?$`

// ObjectSelector selects tables by pattern.
type ObjectSelector struct {
	// Include: only tables matching one of these patterns ("schema.table",
	// or "schema" for all its tables; "*" any run of characters, "?" one
	// character; for mysql the schema is the database). Empty: every table.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_$*?-]+(\.[A-Za-z0-9_$*?-]+)?$`
	// +listType=set
	Include []string `json:"include,omitempty"`
	// Exclude: tables matching one of these patterns are left out, even if
	// included.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z0-9_$*?-]+(\.[A-Za-z0-9_$*?-]+)?$`
	// +listType=set
	Exclude []string `json:"exclude,omitempty"`
}

// TransferSpec says how the data travels.
// +kubebuilder:validation:XValidation:rule="self.method != 'Store' || has(self.storage)",message="transfer.storage: required with method Store"
// +kubebuilder:validation:XValidation:rule="self.method == 'Store' || !has(self.storage)",message="transfer.storage: only with method Store"
// +kubebuilder:validation:XValidation:rule="self.method == 'Store' || !has(self.encryption)",message="transfer.encryption: only with method Store"
type TransferSpec struct {
	// Method is Direct (the dump is streamed into the target; every Job runs
	// in this cluster) or Store (export to storage here, import from it in
	// the target's cluster). Defaults to Direct.
	// +optional
	// +kubebuilder:default=Direct
	Method TransferMethod `json:"method,omitempty"`
	// Parallelism is how many tables are copied (and verified) at once.
	// Defaults to 4.
	// +optional
	// +kubebuilder:default=4
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	Parallelism *int32 `json:"parallelism,omitempty"`
	// Storage is the store of a Store transfer, reachable from both
	// clusters: exactly one of pvc or s3 (a PVC of that name must exist in
	// both namespaces; an S3 credentials Secret of that name in both).
	// +optional
	Storage *cairnv1.StorageSpec `json:"storage,omitempty"`
	// Encryption encrypts a Store transfer's export with age, in the
	// export's pod, to the recipients given; the import decrypts it with
	// the identity. Only with method Store.
	// +optional
	Encryption *TransferEncryption `json:"encryption,omitempty"`
}

// TransferEncryption is a Store transfer's client-side encryption.
type TransferEncryption struct {
	// Recipients are age X25519 public keys, one per line, in a Secret or
	// ConfigMap key of this namespace: the export is encrypted to them.
	Recipients cairnv1.RecipientsSource `json:"recipients"`
	// IdentitySecretRef names a Secret key with an age identity of one of
	// the recipients, in the target's namespace (in the target's cluster
	// for a remote target): the import decrypts with it, and fails before
	// it touches the target when it cannot.
	IdentitySecretRef cairnv1.KeySelector `json:"identitySecretRef"`
}

// CutoverSpec declares what cutover does. Nothing else happens.
// +kubebuilder:validation:XValidation:rule="self.mode == oldSelf.mode && self.sourceReadOnly == oldSelf.sourceReadOnly && has(self.switchSecret) == has(oldSelf.switchSecret) && (!has(self.switchSecret) || self.switchSecret == oldSelf.switchSecret)",message="cutover: only approved and writersStopped may change: create a new MigrationJob"
type CutoverSpec struct {
	// Mode is Manual (wait in ReadyForCutover until approved is true) or
	// Auto. Defaults to Manual.
	// +optional
	// +kubebuilder:default=Manual
	Mode CutoverMode `json:"mode,omitempty"`
	// Approved lets a Manual cutover go ahead. It and writersStopped are
	// the fields of the spec that may change after creation.
	// +optional
	Approved bool `json:"approved,omitempty"`
	// SourceReadOnly makes the source database read-only at cutover and
	// ends the other sessions on it (PostgreSQL: default_transaction_read_only
	// for the database; MySQL 8.0.22+: the schema's READ ONLY option).
	// MariaDB has no per-database read-only: the cutover step fails and
	// changes nothing.
	// +optional
	// +kubebuilder:default=false
	SourceReadOnly bool `json:"sourceReadOnly"`
	// SwitchSecret names a Secret in the MigrationJob's namespace whose keys
	// host, port and database the operator rewrites to the target's at
	// cutover (the Secret applications read their connection from). Other
	// keys are left alone. The Secret must carry the label
	// migration.cairn.dev/switchable: "true" (its owner's opt-in), and the
	// requester must be allowed to patch it.
	// +optional
	SwitchSecret *cairnv1.LocalObjectReference `json:"switchSecret,omitempty"`
	// WritersStopped is the user's declaration that no application writes
	// to the source any more (for a source that cutover cannot make
	// read-only, e.g. MariaDB). A cutover that would switch the Secret or
	// stop replication waits until writes are stopped — sourceReadOnly, or
	// this — so that no row written after verification is left behind.
	// Like approved, it may change after creation.
	// +optional
	WritersStopped bool `json:"writersStopped,omitempty"`
}

// ReplicationSpec tunes Continuous mode.
type ReplicationSpec struct {
	// MaxRetainedWAL is the most WAL the replication slot may keep on the
	// source (e.g. "10Gi"). Above it the migration is aborted (Failed) and
	// the slot dropped, so a stuck migration cannot fill the source's disk.
	// Defaults to 10Gi.
	// +optional
	MaxRetainedWAL *resource.Quantity `json:"maxRetainedWAL,omitempty"`
}

// MigrationJob moves a database into another database of the same engine,
// once: precheck, copy (direct or through a store), verification table by
// table, and a gated, declared cutover. The migration operator runs one agent
// Job per step (`agent migrate <step>`).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:shortName=mj;mjob,categories=cairn
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Tables",type=integer,JSONPath=`.status.progress.tablesDone`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.progress.tablesTotal`
// +kubebuilder:printcolumn:name="Bytes",type=integer,JSONPath=`.status.progress.bytes`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.verification.summary`
// +kubebuilder:printcolumn:name="Lag-Bytes",type=integer,JSONPath=`.status.replication.lagBytes`,priority=1
// +kubebuilder:printcolumn:name="Lag-Seconds",type=string,JSONPath=`.status.replication.lagSeconds`,priority=1
// +kubebuilder:printcolumn:name="Catching-Up",type=integer,JSONPath=`.status.verification.catchingUp`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 48",message="metadata.name: at most 48 characters (step Jobs are named <name>-<step>, at most 63)"
type MigrationJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state. Only spec.cutover.approved and
	// spec.cutover.writersStopped may change.
	Spec MigrationJobSpec `json:"spec"`
	// Status is the observed state.
	// +optional
	Status MigrationJobStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MigrationJobList is a list of MigrationJobs.
type MigrationJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MigrationJob `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MigrationJob{}, &MigrationJobList{})
}
