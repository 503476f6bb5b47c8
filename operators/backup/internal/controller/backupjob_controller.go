// Package controller reconciles BackupJobs: one CronJob per BackupJob, whose
// pods run the Cairn agent; status from the runs it observes; run-now; and
// cleanup through a finalizer. It is written on libs/reconcile: this package
// holds the BackupJob's steps and nothing else.
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/hold"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/references"
	"cairn.dev/libs/schedule"
	"cairn.dev/libs/validation"
)

// +kubebuilder:rbac:groups=backup.cairn.dev,resources=backupjobs,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=backup.cairn.dev,resources=backupjobs/status,verbs=patch
// +kubebuilder:rbac:groups=backup.cairn.dev,resources=backupjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets;persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=patch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=create;patch;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumes,verbs=get;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// BackupJobReconciler reconciles BackupJobs.
type BackupJobReconciler struct {
	// Base: its Clock tells the time of deadlines and the result grace
	// (tests set one they control).
	reconcile.Base
	// Agent: the image of every backup and cleanup pod; its ResultGrace
	// is how long a finished run waits for its pod's result to reach the
	// cache before it is recorded without an artifact.
	agentjob.Agent
	// OperatorNamespace is where an artifact delete runs when the
	// BackupJob's namespace is being deleted (deleteElsewhere); it holds
	// DeleteCredentialsSecret. Empty: such deletes cannot run.
	OperatorNamespace string

	// terminating holds the UIDs of BackupJobs whose namespace refused
	// their delete or slot release Job (being deleted): for the abandon
	// Event's target.
	terminating sync.Map
	// slotsLeft holds the UIDs of BackupJobs whose PostgreSQL slot could
	// not be released (said once: slotLeft); slotsReleased those whose
	// cleanup released it (not run again while the artifacts are deleted).
	slotsLeft     sync.Map
	slotsReleased sync.Map
	secretsHold   *hold.Hold
	claimsHold    *hold.Hold
	cronJobs      *ownership.Applier
	archivers     *ownership.Applier
}

// pass is the state the steps of one pass share.
type pass = reconcile.Pass[*backupv1.BackupJob, state]

// SetupWithManager registers the controller: For BackupJob (status-only
// updates ignored), Owns CronJob (metadata only), Jobs and Pods mapped by
// label to their one BackupJob, Secrets and PVCs (metadata only) mapped to
// the BackupJobs that refer to them.
func (r *BackupJobReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	s := reconcile.Setup[*backupv1.BackupJob, state](mgr, &r.Base, access.BackupJob, &r.Agent)
	r.cronJobs = &ownership.Applier{Client: r.Client, APIReader: r.APIReader, Scheme: r.Scheme,
		MetadataOnly: true, AnnotationPrefix: annotationPrefix}
	r.archivers = &ownership.Applier{Client: r.Client, APIReader: r.APIReader, Scheme: r.Scheme}
	s.Finalizer.RetryInterval = 15 * time.Second
	s.Steps = []reconcile.Step[*backupv1.BackupJob, state]{{Name: "validate", Run: r.validate}, {Name: "references", Run: r.checkReferences},
		{Name: "protect-credentials", Run: r.protectCredentials}, {Name: "unsupported-server", Run: r.checkUnsupported}, {Name: "cronjob", Run: r.ensureCronJob}, {Name: "runs", Run: r.observeRuns}, {Name: "archiver", Run: r.ensureArchiver},
		{Name: "archive-check", Run: r.checkArchive},
		{Name: "run-now", Run: r.runNow}, {Name: "catalog", Run: r.listCatalog}}
	s.Summarize, s.Cleanup, s.Deleting, s.Transition, s.Observe = r.summarize, r.cleanup, deleting, r.transition, observe
	s.Forget = metrics.ForgetObject
	r.secretsHold, r.claimsHold = r.holds()
	// CronJobs are watched and cached as metadata only. The CronJob's own
	// creation is this controller's write: skip its create event
	// (ownership.SkipOwnCreate). Updates (drift) and deletes bring the owner
	// back. A BackupJob refers only to objects of its own namespace: a
	// Secret's or PVC's event scans that namespace's cached BackupJobs
	// instead of an index entry per BackupJob held for its lifetime (heap,
	// issue 11).
	return s.Complete(ctx, mgr, opts,
		reconcile.Owns(&batchv1.CronJob{}, builder.OnlyMetadata, builder.WithPredicates(ownership.SkipOwnCreate(ownership.AsCreated))),
		reconcile.Owns(&appsv1.Deployment{}),
		reconcile.Watches(&batchv1.Job{}, ownership.EnqueueOwnerByLabel(BackupJobLabel)),
		reconcile.Watches(&corev1.Pod{}, ownership.EnqueueOwnerByLabel(BackupJobLabel), builder.WithPredicates(podTerminated())),
		reconcile.ReferrersInNamespace(func(o client.Object) []ownership.Reference { return references.References(backupJobReferences(o)) },
			references.Secret, references.PVC, references.ConfigMap),
		// The releasers of the held Secrets and claims.
		r.secretsHold.Releaser("backupjob-credentials"), r.claimsHold.Releaser("backupjob-claims"))
}

// backupJobReferences are the objects a BackupJob's runs need.
func backupJobReferences(o client.Object) []references.Ref {
	bj, ok := o.(*backupv1.BackupJob)
	if !ok {
		return nil
	}
	db := bj.Spec.Database
	return append(agentjob.References(bj.Namespace, &db, "spec.database", bj.Spec.Storage, "spec.storage"),
		encryptionReferences(bj)...)
}

// podTerminated passes pod events only when the agent container's termination
// state appears: the one pod change the controller reads.
func podTerminated() predicate.Predicate {
	term := func(o client.Object) bool {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return false
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated != nil {
				return true
			}
		}
		return false
	}
	return predicate.Funcs{
		CreateFunc:  func(e event.CreateEvent) bool { return term(e.Object) },
		UpdateFunc:  func(e event.UpdateEvent) bool { return term(e.ObjectNew) && !term(e.ObjectOld) },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// validate: a schedule, time zone or storage location admission should have
// refused (an object stored before the CRD's rule or the webhook refused it)
// stalls the BackupJob instead of being retried. A storage location that
// reaches another kind's key space (libs/validation.MigrationSpace) also
// suspends the CronJob: no backup or prune runs there.
func (r *BackupJobReconciler) validate(ctx context.Context, p *pass) error {
	bj := p.Obj
	if _, err := schedule.Parse(bj.Spec.Schedule, bj.Spec.TimeZone); err != nil {
		bj.Status.Phase = backupv1.PhasePending
		bj.Status.NextScheduleTime = nil
		return reconcile.Stalled(cairnv1.InvalidSpecReason, "spec.schedule/spec.timeZone: %s", err.Error())
	}
	if errs := validation.Storage(&bj.Spec.Storage, field.NewPath("spec", "storage"), "BackupJob"); len(errs) > 0 {
		bj.Status.Phase = backupv1.PhasePending
		bj.Status.NextScheduleTime = nil
		if err := r.suspendCronJob(ctx, bj); err != nil {
			return err
		}
		return reconcile.Stalled(cairnv1.InvalidSpecReason, "%s", errs.ToAggregate().Error())
	}
	return nil
}

// checkReferences: every Secret and PVC a run needs exists and holds its
// keys. Otherwise the CronJob is suspended (no run starts with them), the
// BackupJob is Stalled with a message naming the object and key, and the
// referenced object's creation or change wakes it.
//
// Before that, the references must be approved by the admission webhook
// (libs/access): a BackupJob created or changed while the webhook was not
// installed is Stalled with ReferencesNotApproved, its CronJob suspended.
func (r *BackupJobReconciler) checkReferences(ctx context.Context, p *pass) error {
	bj := p.Obj
	if notApproved := reconcile.Approved(&r.Base, access.BackupJob, bj); notApproved != nil {
		bj.Status.Phase = backupv1.PhasePending
		bj.Status.NextScheduleTime = nil
		if err := r.suspendCronJob(ctx, bj); err != nil {
			return err
		}
		return notApproved
	}
	prob, err := r.Refs.Check(ctx, backupJobReferences(bj))
	if err != nil {
		return err
	}
	if prob == nil {
		return nil
	}
	bj.Status.Phase = backupv1.PhasePending
	bj.Status.NextScheduleTime = nil
	if err := r.suspendCronJob(ctx, bj); err != nil {
		return err
	}
	return reconcile.Stalled(prob.Reason, "%s", prob.Message)
}

// summarize (reconcile.Reconciler.Summarize, after the steps) sets
// nextScheduleTime, phase and conditions from what the steps observed. A
// pass a step ended keeps the status that step set, and a checkpoint
// stores the facts recorded so far (a run, a listing): both are decided at
// the end of a pass whose steps all ran.
func (r *BackupJobReconciler) summarize(p *pass, err error) error {
	if err != nil || p.AtCheckpoint() {
		return err
	}
	bj := p.Obj
	now := r.Now()
	pointInTimeReady(p)
	if bj.Spec.Suspend {
		bj.Status.NextScheduleTime = nil
	} else if sched, err := schedule.Parse(bj.Spec.Schedule, bj.Spec.TimeZone); err == nil {
		next := sched.Next(now)
		bj.Status.NextScheduleTime = metaTime(next)
		// Look again just after the next run is due, even if no Job event
		// comes (a skipped run), so nextScheduleTime never goes stale.
		p.RequeueAfter(next.Sub(now) + time.Second)
	}
	pending := bj.Annotations[backupv1.RunNowAnnotation] != "" && bj.Annotations[backupv1.RunNowAnnotation] != bj.Status.LastRunNowRequest
	switch {
	case runActive(p):
		bj.Status.Phase = backupv1.PhaseRunning
		conditions.MarkReady(bj, backupv1.BackupJobScheduledReason, "a backup run is in progress")
	case bj.Spec.Suspend:
		bj.Status.Phase = backupv1.PhaseSuspended
		msg := "suspended: no new runs start"
		if pending {
			msg += fmt.Sprintf("; the run-now request %q starts when spec.suspend is false", bj.Annotations[backupv1.RunNowAnnotation])
		}
		conditions.MarkReady(bj, cairnv1.SuspendedReason, msg)
	case bj.Status.LastResult == backupv1.RunFailed:
		bj.Status.Phase = backupv1.PhaseFailed
		conditions.MarkNotReady(bj, backupv1.BackupJobLastRunFailedReason,
			fmt.Sprintf("the last run failed (%d consecutive failures): %s; the next scheduled run will try again", bj.Status.ConsecutiveFailures, bj.Status.LastRunMessage))
	case bj.Status.LastResult == backupv1.RunSucceeded:
		bj.Status.Phase = backupv1.PhaseSucceeded
		conditions.MarkReady(bj, cairnv1.SucceededReason, "the last run succeeded")
	default:
		bj.Status.Phase = backupv1.PhaseScheduled
		conditions.MarkReady(bj, backupv1.BackupJobScheduledReason, "the CronJob is in place; waiting for the first run")
	}
	return nil
}

// observe sets bj's gauges from its stored status (libs/kindmetrics).
func observe(bj *backupv1.BackupJob) { metrics.Observe(bj, scheduleInterval(bj)) }

// scheduleInterval is the time between two of bj's scheduled runs, now
// (zero when its schedule does not parse).
func scheduleInterval(bj *backupv1.BackupJob) time.Duration {
	sched, err := schedule.Parse(bj.Spec.Schedule, bj.Spec.TimeZone)
	if err != nil {
		return 0
	}
	return sched.Interval(time.Now())
}

// deleting is the status of a BackupJob whose cleanup is not finished.
func deleting(p *pass, err error) {
	bj := p.Obj
	bj.Status.Phase = backupv1.PhaseDeleting
	msg := "deleting: removing the CronJob and its Jobs"
	if bj.Spec.DeletionPolicy == backupv1.DeletionPolicyDelete {
		msg += ", then the stored artifacts"
	}
	if err != nil {
		msg += " (" + err.Error() + ")"
	}
	conditions.MarkReconciling(bj, cairnv1.DeletingReason, msg)
}
