// Package controller reconciles RestoreJobs: for each it resolves the artifact
// to restore once, records it in status, runs one Job whose pod runs
// `agent restore` with that artifact, and reports the outcome in status,
// conditions and Events.
package controller

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/references"
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

// DefaultWaitInterval is how soon a waiting RestoreJob looks again
// (WaitInterval's default).
const DefaultWaitInterval = 30 * time.Second

// RestoreJobReconciler reconciles RestoreJobs.
type RestoreJobReconciler struct {
	reconcile.Base
	// Agent: the image of every restore pod, the result grace.
	agentjob.Agent
	// WaitInterval is how soon to look again while waiting for a BackupJob
	// or its first successful backup (BackupJob events also wake it); zero
	// is DefaultWaitInterval.
	WaitInterval time.Duration
}

// pass is one reconcile of one RestoreJob.
type pass = reconcile.Pass[*restorev1.RestoreJob, state]

// state is what the RestoreJob's steps share within one pass.
type state struct {
	// src is the resolved source (start), the run's Job renders it.
	src *source
	// run is what the run step found of the restore Job.
	run *agentjob.Observation[contract.Result]
}

// SetupWithManager registers the controller with mgr.
func (r *RestoreJobReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	s := reconcile.Setup[*restorev1.RestoreJob, state](mgr, &r.Base, access.RestoreJob, &r.Agent)
	s.Begin, s.Final = begin, (*restorev1.RestoreJob).Finished
	s.Steps = []reconcile.Step[*restorev1.RestoreJob, state]{{Name: "start", Run: r.start}, {Name: "run", Run: r.run}}
	s.Summarize, s.Cleanup, s.Transition = r.summarize, r.cleanup, transition
	// One index of everything a RestoreJob refers to: its source BackupJob
	// (whose first backup it may wait for) and the Secrets and PVC a restore
	// needs. Their events wake exactly the RestoreJobs that refer to them.
	return s.Complete(ctx, mgr, opts, agentjob.Watch(restorev1.RestoreJobLabel),
		reconcile.Referrers(restoreJobIndex, nil, references.Secret, references.PVC),
		// A started RestoreJob no longer depends on its BackupJob.
		reconcile.ReferrersOf(&backupv1.BackupJob{}, notStarted),
		// The scratch-pod controller (scratch.go).
		scratchPodHold().Reporter(&scratchPods{r: r}, "restorejob-scratch-pods"))
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
