package v1

// Condition types. Every Cairn kind reports these three, following the kstatus
// convention (sigs.k8s.io/cli-utils/pkg/kstatus) so that `kubectl wait`, Flux
// and Argo CD health checks understand them:
//   - Ready is True when the object's desired state is achieved.
//   - Reconciling is True (abnormal-true) while the controller works towards it.
//   - Stalled is True (abnormal-true) when progress needs a human: a
//     configuration error or a permanent failure.
const (
	ReadyCondition       = "Ready"
	ReconcilingCondition = "Reconciling"
	StalledCondition     = "Stalled"
)

// Condition reasons shared by every kind. Kinds add their own next to their types.
const (
	// SucceededReason: the desired state is achieved.
	SucceededReason = "Succeeded"
	// ProgressingReason: the controller is creating or updating children.
	ProgressingReason = "Progressing"
	// InvalidSpecReason: the spec cannot be acted on; fix the spec.
	InvalidSpecReason = "InvalidSpec"
	// NotControlledReason: a child with the expected name exists but another
	// controller (or nobody) controls it; Cairn does not adopt it.
	NotControlledReason = "NotControlled"
	// ReconcileErrorReason: a transient error; the controller retries with backoff.
	ReconcileErrorReason = "ReconcileError"
	// DeletingReason: the object is being deleted and cleanup is running.
	DeletingReason = "Deleting"
	// SuspendedReason: the object is suspended by spec.suspend.
	SuspendedReason = "Suspended"
	// FailedReason: the last run failed after all its retries.
	FailedReason = "Failed"
	// ReferenceNotFoundReason: an object the spec refers to (a credentials
	// Secret, a PVC, a BackupJob, a kubeconfig Secret) does not exist; the
	// message names it. Nothing runs until it exists; its creation wakes
	// the object.
	ReferenceNotFoundReason = "ReferenceNotFound"
	// ReferenceKeyMissingReason: a referenced Secret lacks a key the spec
	// needs; the message names the Secret and the key.
	ReferenceKeyMissingReason = "ReferenceKeyMissing"
	// ReferencesNotApprovedReason: the objects the spec refers to (Secrets,
	// a BackupJob in another namespace) were not approved by the operator's
	// admission webhook — the object was created or changed while the
	// webhook was not installed, or its approval annotation was forged.
	// Nothing runs; an update that passes the webhook approves them.
	ReferencesNotApprovedReason = "ReferencesNotApproved"
	// ImageNotAllowedReason: spec.image is not in the operator's allow-list
	// (--allowed-agent-images). Nothing runs.
	ImageNotAllowedReason = "ImageNotAllowed"
	// UnsupportedServerVersionReason: the agent found the database server
	// to be an engine or version no tool of its image can serve (exit code
	// 4, failure code UnsupportedServerVersion); the message names the
	// server's version and the range the image supports. Running the same
	// image again cannot succeed: nothing runs until the spec or the
	// operator's agent image changes.
	UnsupportedServerVersionReason = "UnsupportedServerVersion"
)
