// Package controller reconciles RestoreJobs: for each it resolves the artifact
// to restore once, records it in status, runs one Job whose pod runs
// `agent restore` with that artifact, and reports the outcome in status,
// conditions and Events.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/references"
	"cairn.dev/libs/status"
)

// +kubebuilder:rbac:groups=restore.cairn.dev,resources=restorejobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=restore.cairn.dev,resources=restorejobs/status,verbs=patch
// +kubebuilder:rbac:groups=restore.cairn.dev,resources=restorejobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=backup.cairn.dev,resources=backupjobs,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets;persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// RBAC: events.k8s.io Events are the RestoreJob transitions (the manager's
// recorder); core Events are leader election's (client-go's resource lock
// still records through the core API). Leases are not here: the base's
// leader-election Role grants them in the operator's namespace only.

// Defaults of the reconciler's timings.
const (
	DefaultWaitInterval    = 30 * time.Second
	DefaultCleanupDeadline = 5 * time.Minute
)

// RestoreJobReconciler reconciles RestoreJobs.
type RestoreJobReconciler struct {
	reconcile.Base
	// AgentImage runs in every restore pod.
	AgentImage string
	// WaitInterval is how soon to look again while waiting for a BackupJob
	// or its first successful backup (BackupJob events also wake it).
	WaitInterval time.Duration

	skeleton *reconcile.Reconciler[*restorev1.RestoreJob, state]
}

// pass is one reconcile of one RestoreJob.
type pass = reconcile.Pass[*restorev1.RestoreJob, state]

// state is what the RestoreJob's steps share within one pass.
type state struct {
	// spec is the RestoreJob's spec with defaults applied (for objects
	// admitted while the defaulting webhook was not running).
	spec restorev1.RestoreJobSpec
	// src is the resolved source (start), the run's Job renders it.
	src *source
	// run is what the run step found of the restore Job.
	run *agentjob.Observation[contract.Result]
}

// SetupWithManager registers the controller with mgr.
func (r *RestoreJobReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.AgentImage == "" {
		return errors.New("restore controller: no agent image")
	}
	if r.WaitInterval <= 0 {
		r.WaitInterval = DefaultWaitInterval
	}
	if err := r.Init(mgr, "RestoreJob", DefaultCleanupDeadline); err != nil {
		return err
	}
	s := reconcile.Skeleton[*restorev1.RestoreJob, state](&r.Base, "RestoreJob", restorev1.CleanupFinalizer, func() *restorev1.RestoreJob { return &restorev1.RestoreJob{} })
	s.Steps = []reconcile.Step[*restorev1.RestoreJob, state]{{Name: "prepare", Run: r.prepare}, {Name: "start", Run: r.start}, {Name: "run", Run: r.run}}
	s.Summarize, s.Cleanup, s.Transition = r.summarize, r.cleanup, transition
	r.skeleton = s
	// One index of everything a RestoreJob refers to: its source BackupJob
	// (whose first backup it may wait for) and the Secrets and PVC a restore
	// needs. Their events wake exactly the RestoreJobs that refer to them.
	if err := ownership.IndexReferences(ctx, mgr.GetFieldIndexer(), &restorev1.RestoreJob{}, references.IndexField, restoreJobIndex); err != nil {
		return err
	}
	referrers := func(gk schema.GroupKind, keep ...func(client.Object) bool) handler.EventHandler {
		return ownership.EnqueueReferrers(r.Client, references.IndexField, &restorev1.RestoreJobList{}, gk, keep...)
	}
	if err := setupScratchPods(mgr, r, opts); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("restorejob").
		For(&restorev1.RestoreJob{}, builder.WithPredicates(status.IgnoreStatusUpdates())).
		// The Job's create event is this controller's own write (the pass
		// that created it goes on to observe it): skipped while the Job is as
		// created. Its status changes and its deletion bring the RestoreJob
		// back.
		Owns(&batchv1.Job{}, builder.WithPredicates(ownership.SkipOwnCreate(agentjob.JobAsCreated))).
		Watches(&corev1.Pod{}, ownership.EnqueueOwnerByLabel(restorev1.RestoreJobLabel)).
		// A started RestoreJob no longer depends on its BackupJob.
		Watches(&backupv1.BackupJob{}, referrers(backupv1.GroupVersion.WithKind("BackupJob").GroupKind(), notStarted)).
		Watches(&corev1.Secret{}, referrers(references.GroupKind(references.Secret)), builder.OnlyMetadata).
		Watches(&corev1.PersistentVolumeClaim{}, referrers(references.GroupKind(references.PVC)), builder.OnlyMetadata).
		WithOptions(opts).
		Complete(r)
}

// Reconcile runs one pass of the skeleton (libs/reconcile) with the
// RestoreJob's steps.
func (r *RestoreJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.skeleton.Reconcile(ctx, req)
}

// cleanup is the finalizer's work: remove the restore Job (and, by
// background propagation, its pods), and, for a verification restore, wait
// until its stopped pods' report on the scratch database they created was
// made (scratchPodsGone, scratch.go). It never touches stored data.
func (r *RestoreJobReconciler) cleanup(p *pass) finalizer.Cleanup {
	rj := p.Obj
	return finalizer.Cleanup{
		Run: finalizer.All(func(ctx context.Context) (bool, error) { return r.deleteJob(ctx, rj) },
			func(ctx context.Context) (bool, error) { return r.scratchPodsGone(ctx, rj) }),
		LeftBehind: func(context.Context) string {
			left := fmt.Sprintf("Job %s/%s and its pods, if they still exist", rj.Namespace, rj.JobName())
			if rj.Spec.DropTargetAfterChecks && rj.Status.StartTime != nil && !rj.Finished() {
				t := rj.Spec.Target
				left += fmt.Sprintf("; the scratch database %q on %s:%d, if the stopped restore had created it and could not drop it", t.Database, t.Host, t.Port)
			}
			return left
		},
		Abandon:      func(ctx context.Context) error { return r.releaseScratchPods(ctx, rj) },
		AlsoReportOn: finalizer.NamespaceOf(r.APIReader, rj, "RestoreJob"),
	}
}

// notStarted keeps the RestoreJobs a BackupJob event may unblock: those
// waiting for it or for its first successful artifact.
func notStarted(o client.Object) bool {
	rj, ok := o.(*restorev1.RestoreJob)
	return ok && rj.Status.StartTime == nil && !rj.Finished()
}
