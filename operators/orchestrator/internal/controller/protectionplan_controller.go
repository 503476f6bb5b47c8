// Package controller reconciles ProtectionPlans: for each it owns one
// BackupJob (the plan's backups) and the verification RestoreJobs that
// restore a pinned backup artifact into a scratch database, and summarises
// them into the conditions BackupHealthy, RecoverabilityVerified and
// ObjectivesMet, and Ready. It writes child objects and reads their status
// only: the child operators do the work (no Jobs, no Pods here).
package controller

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
)

// +kubebuilder:rbac:groups=platform.cairn.dev,resources=protectionplans,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=platform.cairn.dev,resources=protectionplans/status,verbs=patch
// +kubebuilder:rbac:groups=platform.cairn.dev,resources=protectionplans/finalizers,verbs=update
// +kubebuilder:rbac:groups=backup.cairn.dev,resources=backupjobs,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=restore.cairn.dev,resources=restorejobs,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=migration.cairn.dev,resources=migrationjobs,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// RBAC: the orchestrator writes its children (BackupJobs, RestoreJobs) and
// reads their status; it never touches Jobs, Pods or Secrets — the child
// operators check references and run the agent. events.k8s.io Events are
// the plan's transitions; core Events are leader election's.

// ProtectionPlanReconciler reconciles ProtectionPlans.
type ProtectionPlanReconciler struct {
	// Base: its Clock tells the time objectives and schedules are
	// evaluated at (tests set one they control); its APIReader finds a
	// child missing from the cache that may just have been created.
	reconcile.Base

	applier *ownership.Applier
	// backupJobs ensures the plan's BackupJob: the template's optional
	// fields are the plan's even when it leaves them unset.
	backupJobs *ownership.Applier
}

// pass is one reconcile of one ProtectionPlan.
type pass = reconcile.Pass[*platformv1.ProtectionPlan, state]

// state is what the plan's steps share within one pass.
type state struct {
	// now is the pass' one reading of the clock.
	now time.Time
	// backupJob is the plan's BackupJob as cached, or nil.
	backupJob *backupv1.BackupJob
	// nextCheck is the earliest time an objective or a schedule changes
	// the plan's state without any event: the pass requeues at it.
	nextCheck time.Time
}

// SetupWithManager registers the controller with mgr.
func (r *ProtectionPlanReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	s := reconcile.Setup[*platformv1.ProtectionPlan, state](mgr, &r.Base, access.ProtectionPlan)
	r.applier = &ownership.Applier{Client: r.Client, APIReader: r.APIReader, Scheme: r.Scheme}
	r.backupJobs = &ownership.Applier{Client: r.Client, APIReader: r.APIReader, Scheme: r.Scheme, Owned: backupJobOwned}
	s.Begin = r.begin
	s.Steps = []reconcile.Step[*platformv1.ProtectionPlan, state]{{Name: "check", Run: r.check}, {Name: "backup", Run: r.ensureBackup},
		{Name: "verification", Run: r.verification}, {Name: "history", Run: r.pruneHistory}, {Name: "migration", Run: r.migration}}
	s.Summarize, s.Cleanup, s.Deleting, s.Transition, s.Observe, s.Forget = r.summarize, r.cleanup, deleting, transition, metrics.Observe, metrics.ForgetObject
	// Owns maps a child's events (its status included: that is what the
	// plan summarises) to exactly its one controller. The BackupJob's
	// create event is the creating pass's own write (that pass goes on
	// with the created object), so it is dropped: one pass per plan at
	// creation.
	return s.Complete(ctx, mgr, opts, reconcile.Owns(&backupv1.BackupJob{}, builder.WithPredicates(ownership.SkipOwnCreate(backupJobAsCreated))),
		reconcile.Owns(&restorev1.RestoreJob{}), reconcile.Owns(&migrationv1.MigrationJob{}))
}

// cleanup is the finalizer's work: delete the plan's children and wait
// until they are gone. The BackupJob's own finalizer applies its
// deletionPolicy (the plan's) to the stored backups. Garbage collection
// would delete the children too; doing it here makes "deleted" mean
// "nothing left" and lets the deadline report what stayed behind.
func (r *ProtectionPlanReconciler) cleanup(p *pass) finalizer.Cleanup {
	plan := p.Obj
	return finalizer.Cleanup{
		Run: func(ctx context.Context) (bool, error) { return r.deleteChildren(ctx, plan) },
		LeftBehind: func(context.Context) string {
			return fmt.Sprintf("BackupJob %s/%s, MigrationJob %s/%s and RestoreJobs labelled %s=%s, if they still exist",
				plan.Namespace, plan.Name, plan.Namespace, plan.Name+platformv1.MigrationJobSuffix, platformv1.PlanLabel, plan.Name)
		},
	}
}

// deleteChildren deletes every BackupJob and RestoreJob plan controls and
// reports whether none is left.
func (r *ProtectionPlanReconciler) deleteChildren(ctx context.Context, plan *platformv1.ProtectionPlan) (bool, error) {
	return ownership.DeleteChildren(ctx, r.Client, plan, ownership.Children{
		Kinds:      []client.ObjectList{&backupv1.BackupJobList{}, &restorev1.RestoreJobList{}, &migrationv1.MigrationJobList{}},
		Controlled: true,
	})
}

// deleteChild deletes obj (this UID only) unless its deletion is under way.
func (r *ProtectionPlanReconciler) deleteChild(ctx context.Context, obj client.Object) error {
	if !obj.GetDeletionTimestamp().IsZero() {
		return nil
	}
	uid := obj.GetUID()
	err := r.Client.Delete(ctx, obj, client.PropagationPolicy(metav1.DeletePropagationBackground),
		client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}
