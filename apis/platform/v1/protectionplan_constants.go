package v1

// The ProtectionPlan's vocabulary: its phases, verification results,
// condition types and reasons, and the finalizer, labels and names the
// orchestrator uses (the types are in protectionplan_types.go).

// Phase is the one-word summary of a ProtectionPlan's state. It is a fixed
// enum: match on these constants, never on free text.
// +kubebuilder:validation:Enum=Pending;Verifying;Protected;AtRisk;Deleting
type Phase string

const (
	// PhasePending: the children are being created, or the database has no
	// verified backup yet (waiting for the first backup or its first
	// verification), or the spec cannot be acted on (see the conditions).
	PhasePending Phase = "Pending"
	// PhaseVerifying: a verification RestoreJob is restoring a backup into
	// the scratch database.
	PhaseVerifying Phase = "Verifying"
	// PhaseProtected: Ready is True — backups are healthy, the last
	// verification succeeded and every objective is met.
	PhaseProtected Phase = "Protected"
	// PhaseAtRisk: at least one of BackupHealthy, RecoverabilityVerified or
	// ObjectivesMet is False (e.g. backups fail, a verification failed, the
	// newest backup is older than the RPO).
	PhaseAtRisk Phase = "AtRisk"
	// PhaseDeleting: the plan is being deleted and its children are removed.
	PhaseDeleting Phase = "Deleting"
)

// VerificationResult is the outcome of one verification.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type VerificationResult string

const (
	// VerificationPending: the artifact is chosen; the RestoreJob is being created.
	VerificationPending VerificationResult = "Pending"
	// VerificationRunning: the RestoreJob has not finished.
	VerificationRunning VerificationResult = "Running"
	// VerificationSucceeded: the artifact restored and every check passed.
	VerificationSucceeded VerificationResult = "Succeeded"
	// VerificationFailed: the restore failed, a check failed, or the
	// RestoreJob was deleted before it finished.
	VerificationFailed VerificationResult = "Failed"
)

// Condition types a ProtectionPlan reports besides Ready, Reconciling and
// Stalled. Ready is True only when all three are True.
const (
	// BackupHealthyCondition mirrors the child BackupJob's Ready condition.
	BackupHealthyCondition = "BackupHealthy"
	// RecoverabilityVerifiedCondition is True when the newest finished
	// verification restored its backup and every check passed.
	RecoverabilityVerifiedCondition = "RecoverabilityVerified"
	// ObjectivesMetCondition is True when the RPO, the RTO and the
	// maximum verification age are all met.
	ObjectivesMetCondition = "ObjectivesMet"
	// DecryptionVerifiedCondition (plans with spec.backup.encryption only)
	// is True when the newest finished verification decrypted its backup
	// with the plan's identity, False when it could not (the identity was
	// rotated away from the backups' recipients, or its Secret holds
	// another key). It does not count towards Ready (RecoverabilityVerified
	// does), but is alerted on: nobody else checks that the key a restore
	// will need still works.
	DecryptionVerifiedCondition = "DecryptionVerified"
)

// Condition reasons specific to ProtectionPlan; the shared ones are in
// cairn.dev/apis/meta/v1.
const (
	// BackupJobMissingReason: the child BackupJob does not exist (yet).
	BackupJobMissingReason = "BackupJobMissing"
	// NoBackupYetReason: no backup has succeeded yet.
	NoBackupYetReason = "NoBackupYet"
	// NoVerificationYetReason: no verification has finished yet.
	NoVerificationYetReason = "NoVerificationYet"
	// VerificationRunningReason: a verification RestoreJob is running.
	VerificationRunningReason = "VerificationRunning"
	// VerificationSucceededReason: the newest verification succeeded.
	VerificationSucceededReason = "VerificationSucceeded"
	// VerificationFailedReason: the newest verification failed.
	VerificationFailedReason = "VerificationFailed"
	// ChecksNotReportedReason: the restore succeeded but the checks the
	// plan asks for were not reported as run; the backup is not counted as
	// verified.
	ChecksNotReportedReason = "ChecksNotReported"
	// ObjectivesMetReason: every objective is met.
	ObjectivesMetReason = "ObjectivesMet"
	// ObjectivesViolatedReason: at least one objective is violated; the
	// message names each.
	ObjectivesViolatedReason = "ObjectivesViolated"
	// ObjectivesUnknownReason: no objective is violated, but one cannot be
	// evaluated yet (no backup or no verification so far).
	ObjectivesUnknownReason = "ObjectivesNotYetMeasured"
	// IdentityDecryptsReason: the plan's identity decrypted the newest
	// verified backup.
	IdentityDecryptsReason = "IdentityDecrypts"
	// IdentityCannotDecryptReason: the plan's identity is none of the
	// newest backup's recipients (or none was given); the message names
	// the recipients the backup needs.
	IdentityCannotDecryptReason = "IdentityCannotDecrypt"
	// ArchiveGapReason (RecoverabilityVerified False, plans with
	// spec.backup.pointInTime): the BackupJob's archive has a gap
	// (PointInTimeReady False/ArchiveGap), or the point-in-time
	// verification's restore was refused across one; times across it
	// cannot be recovered.
	ArchiveGapReason = "ArchiveGap"
	// OutsideRecoverableWindowReason (RecoverabilityVerified False): the
	// point-in-time verification's target time was outside the archive's
	// recoverable window (before the oldest base, or after the newest
	// archived change: the archive is behind).
	OutsideRecoverableWindowReason = "OutsideRecoverableWindow"
	// RecoveryPointMismatchReason (RecoverabilityVerified False): the
	// point-in-time verification's restore succeeded but reported reaching
	// another second than the one it was asked for.
	RecoveryPointMismatchReason = "RecoveryPointMismatch"
	// ScratchIsProtectedReason: the scratch database is the protected
	// database (same server and database name); nothing is restored.
	ScratchIsProtectedReason = "ScratchIsProtectedDatabase"
)

// Finalizers, labels and names the orchestrator uses.
const (
	// CleanupFinalizer holds a deleted ProtectionPlan until its BackupJob and
	// verification RestoreJobs are gone. The BackupJob's own deletionPolicy
	// (the plan's) decides what happens to stored backups.
	CleanupFinalizer = "platform.cairn.dev/cleanup"
	// PlanLabel, on every child, holds the name of the owning ProtectionPlan.
	PlanLabel = "platform.cairn.dev/protectionplan"
	// MigrationJobSuffix names the plan's MigrationJob: <plan>-migrate (at
	// most 48 characters, a MigrationJob's limit).
	MigrationJobSuffix = "-migrate"
	// VerifyNowAnnotation asks for one verification of the newest
	// successful backup now, once per distinct value (a request id), when
	// no verification is running; the value acted on is recorded in
	// status.lastVerifyNowRequest.
	VerifyNowAnnotation = "platform.cairn.dev/verify-now"
	// MaxNameLength is the longest plan name: verification RestoreJobs are
	// named <plan>-verify-<n>, and a RestoreJob name is at most 55 characters.
	MaxNameLength = 40
)
