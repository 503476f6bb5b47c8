// Package controller reconciles BackupJobs: one CronJob per BackupJob, whose
// pods run the Cairn agent; status from the runs it observes; run-now; and
// cleanup through a finalizer.
package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/schedule"
	"cairn.dev/libs/status"
)

// +kubebuilder:rbac:groups=backup.cairn.dev,resources=backupjobs,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=backup.cairn.dev,resources=backupjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=backup.cairn.dev,resources=backupjobs/finalizers,verbs=update
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// BackupJobReconciler reconciles BackupJobs.
type BackupJobReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Scheme    *runtime.Scheme
	Recorder  events.EventRecorder
	// AgentImage runs in every backup and cleanup pod.
	AgentImage string
	// CleanupDeadline bounds cleanup after a deletion request.
	CleanupDeadline time.Duration
	// ResultGrace is how long a finished run waits for its pod's result to
	// reach the cache before it is recorded without an artifact.
	ResultGrace time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

var _ reconcile.Reconciler = &BackupJobReconciler{}

func (r *BackupJobReconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// SetupWithManager registers the controller: For BackupJob (status-only
// updates ignored), Owns CronJob (metadata only), Jobs and Pods mapped by
// label to their one BackupJob.
func (r *BackupJobReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.CleanupDeadline == 0 {
		r.CleanupDeadline = 10 * time.Minute
	}
	if r.ResultGrace == 0 {
		r.ResultGrace = 10 * time.Second
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("backupjob").
		WithOptions(opts).
		For(&backupv1.BackupJob{}, builder.WithPredicates(status.IgnoreStatusUpdates())).
		// CronJobs are watched and cached as metadata only (see
		// ensureCronJob). The CronJob's own creation is this controller's
		// write: skip its create event. Updates (drift) and deletes bring the
		// owner back.
		Owns(&batchv1.CronJob{}, builder.OnlyMetadata,
			builder.WithPredicates(predicate.Funcs{CreateFunc: func(event.CreateEvent) bool { return false }})).
		Watches(&batchv1.Job{}, ownership.EnqueueOwnerByLabel(BackupJobLabel)).
		Watches(&corev1.Pod{}, ownership.EnqueueOwnerByLabel(BackupJobLabel), builder.WithPredicates(podTerminated())).
		Complete(r)
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

var _ handler.EventHandler = ownership.EnqueueOwnerByLabel(BackupJobLabel)

// Reconcile: get → deletion through the finalizer → ensure the finalizer →
// validate → ensure the CronJob → run-now → observe runs → write status only
// if it changed. Safe to interrupt and to repeat at any point.
func (r *BackupJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	bj := &backupv1.BackupJob{}
	if err := r.Client.Get(ctx, req.NamespacedName, bj); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Namespace, req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	log := ctrl.LoggerFrom(ctx).WithValues("BackupJob", klog.KObj(bj), "phase", bj.Status.Phase)
	ctx = ctrl.LoggerInto(ctx, log)

	fin := &finalizer.Finalizer{Name: backupv1.CleanupFinalizer, Deadline: r.CleanupDeadline, PollInterval: 2 * time.Second, Client: r.Client, Recorder: r.Recorder, Now: r.Now}
	if !bj.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, bj, fin)
	}
	if _, err := fin.Ensure(ctx, bj); err != nil {
		return ctrl.Result{}, err
	}
	original := bj.DeepCopy()
	ctx, after := withAfterWrite(ctx)
	res, err := r.reconcileNormal(ctx, bj)
	if werr := r.writeStatus(ctx, original, bj); werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	after.run()
	return res, err
}

func (r *BackupJobReconciler) writeStatus(ctx context.Context, original, bj *backupv1.BackupJob) error {
	bj.Status.ObservedGeneration = bj.Generation
	wrote, err := status.Write(ctx, r.Client, original, bj)
	if err != nil {
		return err
	}
	if wrote && original.Status.Phase != bj.Status.Phase {
		ctrl.LoggerFrom(ctx).Info("phase changed", "from", original.Status.Phase, "to", bj.Status.Phase)
		r.Recorder.Eventf(bj, nil, corev1.EventTypeNormal, "Phase"+string(bj.Status.Phase), "Reconcile",
			"phase %s → %s", phaseOrNone(original.Status.Phase), bj.Status.Phase)
	}
	return nil
}

func phaseOrNone(p backupv1.Phase) string {
	if p == "" {
		return "(none)"
	}
	return string(p)
}

func (r *BackupJobReconciler) reconcileNormal(ctx context.Context, bj *backupv1.BackupJob) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	sched, err := schedule.Parse(bj.Spec.Schedule, bj.Spec.TimeZone)
	if err != nil {
		// Admission should have refused this; report it instead of retrying.
		bj.Status.Phase = backupv1.PhasePending
		bj.Status.NextScheduleTime = nil
		conditions.MarkStalled(bj, cairnv1.InvalidSpecReason, "spec.schedule/spec.timeZone: "+err.Error())
		log.Info("invalid spec", "error", err.Error())
		return ctrl.Result{}, reconcile.TerminalError(err)
	}

	op, err := r.ensureCronJob(ctx, bj)
	var nc *ownership.NotControlledError
	if errors.As(err, &nc) {
		bj.Status.Phase = backupv1.PhasePending
		conditions.MarkStalled(bj, cairnv1.NotControlledReason, nc.Error())
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	if err != nil {
		conditions.MarkReconciling(bj, cairnv1.ReconcileErrorReason, "ensuring the CronJob: "+err.Error())
		return ctrl.Result{}, err
	}
	if op != ownership.Unchanged {
		log.Info("CronJob "+string(op), "CronJob", bj.Name)
	}

	if err := r.runNow(ctx, bj); err != nil {
		return ctrl.Result{}, err
	}
	running, requeue, err := r.observeRuns(ctx, bj)
	if err != nil {
		return ctrl.Result{}, err
	}

	now := r.now()
	if bj.Spec.Suspend {
		bj.Status.NextScheduleTime = nil
	} else {
		next := sched.Next(now)
		bj.Status.NextScheduleTime = metaTime(next)
		intervalGauge.WithLabelValues(bj.Namespace, bj.Name).Set(sched.Interval(now).Seconds())
		// Look again just after the next run is due, even if no Job event
		// comes (a skipped run), so nextScheduleTime never goes stale.
		if until := next.Sub(now) + time.Second; requeue == 0 || until < requeue {
			requeue = until
		}
	}
	summarise(bj, running)
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// summarise sets phase and conditions from what was observed.
func summarise(bj *backupv1.BackupJob, running bool) {
	switch {
	case running:
		bj.Status.Phase = backupv1.PhaseRunning
		conditions.MarkReady(bj, backupv1.BackupJobScheduledReason, "a backup run is in progress")
	case bj.Spec.Suspend:
		bj.Status.Phase = backupv1.PhaseSuspended
		conditions.MarkReady(bj, cairnv1.SuspendedReason, "suspended: no new runs start")
	case bj.Status.LastResult == backupv1.RunFailed:
		bj.Status.Phase = backupv1.PhaseFailed
		conditions.MarkNotReady(bj, backupv1.BackupJobLastRunFailedReason,
			fmt.Sprintf("the last run failed (%d consecutive failures; see its BackupFailed Event); the next scheduled run will try again", bj.Status.ConsecutiveFailures))
	case bj.Status.LastResult == backupv1.RunSucceeded:
		bj.Status.Phase = backupv1.PhaseSucceeded
		conditions.MarkReady(bj, cairnv1.SucceededReason, "the last run succeeded")
	default:
		bj.Status.Phase = backupv1.PhaseScheduled
		conditions.MarkReady(bj, backupv1.BackupJobScheduledReason, "the CronJob is in place; waiting for the first run")
	}
}
