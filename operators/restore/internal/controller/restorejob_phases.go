package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/ownership"
	"cairn.dev/operators/restore/internal/restorespec"
)

// pass is one reconcile of one RestoreJob.
type pass struct {
	r  *RestoreJobReconciler
	rj *restorev1.RestoreJob
	// original is rj as last stored: the base of status patches and of the
	// transition Events.
	original *restorev1.RestoreJob
	// spec is rj's spec with defaults applied (for objects admitted while
	// the defaulting webhook was not running).
	spec restorev1.RestoreJobSpec
}

// reconcile runs the steps in order; each sets status on p.rj.
func (p *pass) reconcile(ctx context.Context) (ctrl.Result, error) {
	rj := p.rj
	p.spec = *rj.Spec.DeepCopy()
	restorespec.SetDefaults(&p.spec)
	rj.Status.Source = describeSource(rj)
	rj.Status.JobName = rj.JobName()
	if rj.Status.Phase == "" {
		rj.Status.Phase = restorev1.PhasePending
	}
	if rj.Finished() {
		// Succeeded and Failed are final: the Job may be gone by now.
		return ctrl.Result{}, nil
	}

	job, err := p.getJob(ctx)
	if err != nil {
		return ctrl.Result{}, p.transient(err)
	}
	if job == nil {
		if rj.Status.StartTime != nil {
			return p.jobMissing(ctx)
		}
		var res ctrl.Result
		job, res, err = p.start(ctx)
		if job == nil {
			return res, err
		}
	}
	return p.observe(ctx, job)
}

// getJob returns rj's Job from the cache, or nil.
func (p *pass) getJob(ctx context.Context) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	err := p.r.Client.Get(ctx, client.ObjectKey{Namespace: p.rj.Namespace, Name: p.rj.JobName()}, job)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Job %s: %w", p.rj.JobName(), err)
	}
	return job, nil
}

// start validates the spec, resolves the source, records the artifact and
// creates the Job. It returns the new Job, or nil when the RestoreJob must
// wait, is stalled, or hit an error.
func (p *pass) start(ctx context.Context) (*batchv1.Job, ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	rj := p.rj
	errs := restorespec.ValidateName(rj.Name)
	errs = append(errs, restorespec.ValidateSpec(&p.spec, field.NewPath("spec"))...)
	if len(errs) > 0 {
		return nil, ctrl.Result{}, p.stall(cairnv1.InvalidSpecReason, "the spec is invalid: "+errs.ToAggregate().Error())
	}

	src, wait, err := p.resolve(ctx)
	if err != nil {
		return nil, ctrl.Result{}, err
	}
	if wait != nil {
		log.Info("waiting for the source", "reason", wait.reason, "message", wait.message)
		return nil, ctrl.Result{RequeueAfter: p.r.WaitInterval}, nil
	}

	if rj.Status.Artifact == nil {
		// Record the choice before the Job exists: a retry or a restart
		// restores this artifact, never a newer one. The optimistic lock
		// makes a pass that read a stale RestoreJob fail here instead of
		// recording a second choice.
		rj.Status.Artifact = &src.Artifact
		conditions.MarkReconciling(rj, restorev1.RestoreJobArtifactResolvedReason,
			fmt.Sprintf("restoring artifact %s; creating Job %s", src.Artifact.Path, rj.JobName()))
		rj.Status.ObservedGeneration = rj.Generation
		if err := p.r.Client.Status().Patch(ctx, rj, client.MergeFromWithOptions(p.original, client.MergeFromWithOptimisticLock{})); err != nil {
			// Nothing of this pass may reach status: the next pass decides again.
			rj.Status = *p.original.Status.DeepCopy()
			return nil, ctrl.Result{}, fmt.Errorf("recording the artifact to restore: %w", err)
		}
		log.Info("artifact resolved", "artifact", src.Artifact.Path, "catalogKey", src.CatalogKey)
		p.emitTransition(p.original, rj)
		p.original = rj.DeepCopy()
	}
	src.Artifact = *rj.Status.Artifact

	desired := desiredJob(rj, &p.spec, src, p.r.AgentImage)
	op, err := p.r.applier.Ensure(ctx, rj, desired)
	var nc *ownership.NotControlledError
	switch {
	case errors.As(err, &nc):
		return nil, ctrl.Result{}, p.stall(cairnv1.NotControlledReason, nc.Error())
	case apierrors.IsAlreadyExists(err):
		// Ours, created by an earlier pass; the cache has not seen it yet.
		log.V(1).Info("Job exists but is not cached yet", "Job", desired.Name)
		return nil, ctrl.Result{RequeueAfter: time.Second}, nil
	case err != nil:
		return nil, ctrl.Result{}, p.transient(fmt.Errorf("creating Job %s: %w", desired.Name, err))
	}
	log.Info("restore Job ensured", "Job", desired.Name, "op", op, "artifact", src.Artifact.Path)
	return desired, ctrl.Result{}, nil
}

// waitReason says why the RestoreJob cannot start yet.
type waitReason struct{ reason, message string }

// resolve finds the store, the catalog key and the artifact, and applies the
// overwrite guard. It returns a waitReason (and sets the conditions) when the
// source is not ready, and a terminal error when the spec cannot be acted on.
func (p *pass) resolve(ctx context.Context) (source, *waitReason, error) {
	rj := p.rj
	var src source
	switch s := p.spec.Source; {
	case s.BackupJob != nil:
		bj := &backupv1.BackupJob{}
		key := client.ObjectKey{Namespace: rj.Namespace, Name: s.BackupJob.Name}
		if err := p.r.Client.Get(ctx, key, bj); err != nil {
			if apierrors.IsNotFound(err) {
				return src, p.wait(restorev1.RestoreJobBackupJobNotFoundReason,
					fmt.Sprintf("BackupJob %s not found; waiting for it", key.Name)), nil
			}
			return src, nil, p.transient(fmt.Errorf("reading BackupJob %s: %w", key.Name, err))
		}
		if err := p.guardOverwrite(bj); err != nil {
			return src, nil, err
		}
		src.Storage = bj.Spec.Storage
		src.CatalogKey = key.String()
		switch {
		case rj.Status.Artifact != nil:
			src.Artifact = *rj.Status.Artifact
		case s.BackupJob.Artifact != "":
			src.Artifact = cairnv1.Artifact{Path: s.BackupJob.Artifact}
		case bj.Status.LastArtifact != nil && bj.Status.LastArtifact.Path != "":
			src.Artifact = *bj.Status.LastArtifact
		default:
			return src, p.wait(restorev1.RestoreJobNoArtifactReason,
				fmt.Sprintf("BackupJob %s has no successful backup yet; waiting for its first one", key.Name)), nil
		}
	case s.Store != nil:
		// The catalog key may name a BackupJob of this cluster: the guard
		// applies. It may be in a namespace the cache does not watch
		// (--watch-namespaces), so read it from the API server.
		if key, ok := restorespec.SourceBackupJob(rj); ok {
			bj := &backupv1.BackupJob{}
			err := p.r.APIReader.Get(ctx, key, bj)
			switch {
			case err == nil:
				if err := p.guardOverwrite(bj); err != nil {
					return src, nil, err
				}
			case !apierrors.IsNotFound(err):
				return src, nil, p.transient(fmt.Errorf("reading BackupJob %s: %w", key, err))
			}
		}
		src.Storage = s.Store.Storage
		src.CatalogKey = s.Store.BackupJob
		src.Artifact = cairnv1.Artifact{Path: s.Store.Artifact}
		if rj.Status.Artifact != nil {
			src.Artifact = *rj.Status.Artifact
		}
	}
	return src, nil, nil
}

// guardOverwrite refuses to restore into the database bj backs up unless
// spec.allowOverwriteSource says so.
func (p *pass) guardOverwrite(bj *backupv1.BackupJob) error {
	rj := p.rj.DeepCopy()
	rj.Spec = p.spec
	if ferr := restorespec.OverwriteError(rj, bj); ferr != nil {
		return p.stall(restorev1.RestoreJobOverwritesSourceReason, ferr.Error())
	}
	return nil
}

// observe reads the Job's state into status.
func (p *pass) observe(ctx context.Context, job *batchv1.Job) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	rj := p.rj
	if !metav1.IsControlledBy(job, rj) {
		nc := &ownership.NotControlledError{Kind: "Job", Key: client.ObjectKeyFromObject(job)}
		return ctrl.Result{}, p.stall(cairnv1.NotControlledReason, nc.Error())
	}
	if rj.Status.StartTime == nil {
		t := job.CreationTimestamp
		if t.IsZero() {
			t = metav1.Now()
		}
		rj.Status.StartTime = &t
	}
	if rj.Status.Artifact == nil {
		// Status was lost (e.g. the object was restored from a backup
		// without status): the Job says what it restores.
		if a := jobArtifact(job); a != "" {
			rj.Status.Artifact = &cairnv1.Artifact{Path: a}
		}
	}
	rj.Status.Attempts = job.Status.Failed + job.Status.Succeeded + job.Status.Active
	artifact := ""
	if rj.Status.Artifact != nil {
		artifact = rj.Status.Artifact.Path
	}

	out := agentjob.JobOutcome(job)
	if !out.Finished {
		rj.Status.Phase = restorev1.PhaseRunning
		conditions.MarkReconciling(rj, restorev1.RestoreJobRunningReason, fmt.Sprintf(
			"restoring artifact %s into %s with Job %s (attempt %d of at most %d)",
			artifact, describeTarget(p.spec.Target), job.Name, max(rj.Status.Attempts, 1), *p.spec.MaxRetries+1))
		return ctrl.Result{}, nil
	}

	res, failure, perr := p.podResult(ctx, job)
	at := metav1.NewTime(out.At)
	if out.At.IsZero() {
		at = metav1.Now()
	}
	if out.Succeeded {
		if res == nil && time.Since(out.At) < resultGrace {
			// The Job's pods reach the cache on their own watch; wait a
			// little for the agent's report (a Pod event also wakes us).
			log.V(1).Info("Job complete; waiting for the agent's report", "error", perr)
			rj.Status.Phase = restorev1.PhaseRunning
			return ctrl.Result{RequeueAfter: 2 * time.Second}, nil
		}
		if res != nil {
			rj.Status.Artifact = agentjob.Artifact(res)
			artifact = res.Artifact
		} else {
			log.Info("Job complete but no agent report found; keeping the resolved artifact", "error", perr)
		}
		rj.Status.Phase = restorev1.PhaseSucceeded
		rj.Status.CompletionTime = &at
		conditions.MarkReady(rj, cairnv1.SucceededReason, fmt.Sprintf("restored artifact %s into %s in %s",
			artifact, describeTarget(p.spec.Target), at.Sub(rj.Status.StartTime.Time).Round(time.Second)))
		return ctrl.Result{}, nil
	}
	msg := fmt.Sprintf("restore Job %s failed after %d attempt(s)", job.Name, rj.Status.Attempts)
	if out.Reason != "" {
		msg += ": " + out.Reason
	}
	if out.Message != "" {
		msg += " (" + out.Message + ")"
	}
	if failure != "" {
		msg += "; agent: " + failure
	}
	msg += "; create a new RestoreJob to try again"
	rj.Status.Phase = restorev1.PhaseFailed
	rj.Status.CompletionTime = &at
	conditions.MarkStalled(rj, cairnv1.FailedReason, msg)
	return ctrl.Result{}, nil
}

// jobMissing handles a started RestoreJob whose Job is not in the cache: a
// cache lag right after creation, or a Job deleted before it finished. A
// deleted restore is not started again behind the user's back: it failed.
func (p *pass) jobMissing(ctx context.Context) (ctrl.Result, error) {
	live := &batchv1.Job{}
	err := p.r.APIReader.Get(ctx, client.ObjectKey{Namespace: p.rj.Namespace, Name: p.rj.JobName()}, live)
	switch {
	case err == nil:
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, p.transient(fmt.Errorf("reading Job %s: %w", p.rj.JobName(), err))
	}
	now := metav1.Now()
	p.rj.Status.Phase = restorev1.PhaseFailed
	p.rj.Status.CompletionTime = &now
	conditions.MarkStalled(p.rj, restorev1.RestoreJobJobDeletedReason, fmt.Sprintf(
		"restore Job %s was deleted before it finished; the target database may be partly restored; create a new RestoreJob to try again", p.rj.JobName()))
	return ctrl.Result{}, nil
}

// deleteJob is the finalizer's cleanup: delete rj's Job with background
// propagation (its pods go with it). Done when no Job of rj's is left.
func (r *RestoreJobReconciler) deleteJob(ctx context.Context, rj *restorev1.RestoreJob) (bool, error) {
	job := &batchv1.Job{}
	key := client.ObjectKey{Namespace: rj.Namespace, Name: rj.JobName()}
	if err := r.APIReader.Get(ctx, key, job); err != nil {
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(job, rj) {
		return true, nil // not ours: leave it alone
	}
	if job.DeletionTimestamp.IsZero() {
		err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground),
			client.Preconditions{UID: &job.UID})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("deleting Job %s: %w", key.Name, err)
		}
		ctrl.LoggerFrom(ctx).Info("deleted restore Job", "Job", key.Name)
	}
	err := r.APIReader.Get(ctx, key, job)
	return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
}

// wait sets the conditions of a RestoreJob waiting for its source.
func (p *pass) wait(reason, message string) *waitReason {
	p.rj.Status.Phase = restorev1.PhasePending
	conditions.MarkReconciling(p.rj, reason, message)
	return &waitReason{reason: reason, message: message}
}

// stall marks a configuration error: Stalled, no retry until the object or
// what it refers to changes.
func (p *pass) stall(reason, message string) error {
	conditions.MarkStalled(p.rj, reason, message)
	return reconcile.TerminalError(errors.New(message))
}

// transient marks an error the work queue retries with backoff.
func (p *pass) transient(err error) error {
	conditions.MarkReconciling(p.rj, cairnv1.ReconcileErrorReason, err.Error())
	return err
}
