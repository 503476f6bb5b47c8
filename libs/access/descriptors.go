package access

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// Kind describes a Cairn kind for its admission webhooks (libs/admit) and
// its controller (libs/reconcile.Setup): the group and kind bound into the
// references' signature, the cleanup finalizer the defaulting webhook adds
// on create and the default bound of that cleanup after a deletion request
// (the operator's --cleanup-deadline), the API's defaults, the references
// the spec names, and whether the spec may change after create (then
// defaults and signature are redone on update).
type Kind[T client.Object] struct {
	GroupKind       schema.GroupKind
	Finalizer       string
	CleanupDeadline time.Duration
	Defaults        func(obj T)
	Checks          func(obj T) []Check
	Mutable         bool
}

// The four Cairn kinds. A RestoreJob's and a MigrationJob's spec is
// immutable but for what their validators allow (no re-signing).
var (
	// A BackupJob's cleanup deletes its stored artifacts (deletionPolicy
	// Delete); a ProtectionPlan's deletes its children, whose own cleanup
	// may; a MigrationJob's first undoes what it changed on the source.
	BackupJob = Kind[*backupv1.BackupJob]{GroupKind: BackupJobKind, Finalizer: backupv1.CleanupFinalizer, CleanupDeadline: 10 * time.Minute,
		Defaults: func(o *backupv1.BackupJob) { o.Spec.SetDefaults() }, Checks: BackupJobChecks, Mutable: true}
	RestoreJob = Kind[*restorev1.RestoreJob]{GroupKind: RestoreJobKind, Finalizer: restorev1.CleanupFinalizer, CleanupDeadline: 5 * time.Minute,
		Defaults: func(o *restorev1.RestoreJob) { o.Spec.SetDefaults() }, Checks: RestoreJobChecks}
	MigrationJob = Kind[*migrationv1.MigrationJob]{GroupKind: MigrationJobKind, Finalizer: migrationv1.CleanupFinalizer, CleanupDeadline: 10 * time.Minute,
		Defaults: func(o *migrationv1.MigrationJob) { o.Spec.SetDefaults() }, Checks: MigrationJobChecks}
	ProtectionPlan = Kind[*platformv1.ProtectionPlan]{GroupKind: ProtectionPlanKind, Finalizer: platformv1.CleanupFinalizer, CleanupDeadline: 10 * time.Minute,
		Defaults: func(o *platformv1.ProtectionPlan) { o.Spec.SetDefaults() }, Checks: ProtectionPlanChecks, Mutable: true}
)
