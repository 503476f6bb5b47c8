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

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
	"cairn.dev/operators/restore/internal/restorespec"
)

// prepare applies defaults, sets the status fields every phase shows, ends
// the pass of a finished RestoreJob, and finds its Job; a started RestoreJob
// whose Job is gone has failed.
func (r *RestoreJobReconciler) prepare(ctx context.Context, p *pass) error {
	rj := p.Obj
	p.State.spec = *rj.Spec.DeepCopy()
	p.State.spec.SetDefaults()
	rj.Status.Source = describeSource(rj)
	rj.Status.JobName = rj.JobName()
	if rj.Status.Phase == "" {
		rj.Status.Phase = restorev1.PhasePending
	}
	if rj.Finished() {
		// Succeeded and Failed are final: the Job may be gone by now.
		return reconcile.Done()
	}
	job, err := r.getJob(ctx, rj)
	if err != nil {
		return err
	}
	p.State.job = job
	if job == nil && rj.Status.StartTime != nil {
		return r.jobMissing(ctx, p)
	}
	return nil
}

// getJob returns rj's Job from the cache, or nil.
func (r *RestoreJobReconciler) getJob(ctx context.Context, rj *restorev1.RestoreJob) (*batchv1.Job, error) {
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: rj.Namespace, Name: rj.JobName()}, job)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Job %s: %w", rj.JobName(), err)
	}
	return job, nil
}

// start validates the spec, resolves the source, checks the objects the
// restore needs, records the artifact (a checkpoint: a retry or a restart
// restores this artifact, never a newer one) and creates the Job. It does
// nothing once the Job exists.
func (r *RestoreJobReconciler) start(ctx context.Context, p *pass) error {
	if p.State.job != nil {
		return nil
	}
	log := ctrl.LoggerFrom(ctx)
	rj := p.Obj
	errs := restorespec.ValidateName(rj.Name)
	errs = append(errs, restorespec.ValidateSpec(&p.State.spec, field.NewPath("spec"))...)
	if len(errs) > 0 {
		return reconcile.Stalled(cairnv1.InvalidSpecReason, "the spec is invalid: %s", errs.ToAggregate().Error())
	}
	// Only references the admission webhook approved (libs/access): not
	// even the source BackupJob is read otherwise.
	if checks := access.RestoreJobChecks(rj); !r.Guard.Approver.Approved(rj, access.RestoreJobKind, checks) {
		return reconcile.Stalled(cairnv1.ReferencesNotApprovedReason, "%s", access.NotApproved(rj, "RestoreJob", checks))
	}

	src, err := r.resolve(ctx, p)
	if err != nil {
		return err
	}
	prob, err := r.refs.Check(ctx, restoreReferences(rj.Namespace, &p.State.spec, src.Storage))
	if err != nil {
		return err
	}
	if prob != nil {
		for _, ref := range restoreJobReferences(rj) {
			if ref.Kind == prob.Ref.Kind && ref.Name == prob.Ref.Name {
				// Its events wake this RestoreJob (the reference index).
				return reconcile.Stalled(prob.Reason, "%s", prob.Message)
			}
		}
		// The source BackupJob's store credentials: not in the index;
		// look again.
		return r.wait(p, prob.Reason, "%s", prob.Message)
	}

	if rj.Status.Artifact == nil {
		rj.Status.Artifact = &src.Artifact
		conditions.MarkReconciling(rj, restorev1.RestoreJobArtifactResolvedReason,
			fmt.Sprintf("restoring artifact %s; creating Job %s", src.Artifact.Path, rj.JobName()))
		if err := p.Checkpoint(ctx); err != nil {
			return fmt.Errorf("recording the artifact to restore: %w", err)
		}
		log.Info("artifact resolved", "artifact", src.Artifact.Path, "catalogKey", src.CatalogKey)
	}
	src.Artifact = *rj.Status.Artifact

	desired := desiredJob(rj, &p.State.spec, src, r.AgentImage)
	// Create, never update: the cache holds Jobs without their spec
	// (agentjob.TransformRun), and a pass only gets here when the cache had
	// no Job of this name.
	err = r.applier.Create(ctx, rj, desired)
	var nc *ownership.NotControlledError
	switch {
	case errors.As(err, &nc):
		return reconcile.Stalled(cairnv1.NotControlledReason, "%s", nc.Error())
	case apierrors.IsAlreadyExists(err):
		// Ours, created by an earlier pass; the cache has not seen it yet.
		log.V(1).Info("Job exists but is not cached yet", "Job", desired.Name)
		p.RequeueAfter(time.Second)
		return reconcile.Done()
	case err != nil:
		return fmt.Errorf("creating Job %s: %w", desired.Name, err)
	}
	log.Info("restore Job created", "Job", desired.Name, "artifact", src.Artifact.Path)
	p.State.job = desired
	return nil
}

// resolve finds the store, the catalog key and the artifact, and applies the
// overwrite guard. It returns a Waiting error when the source is not ready,
// and a Stalled one when the spec cannot be acted on.
func (r *RestoreJobReconciler) resolve(ctx context.Context, p *pass) (source, error) {
	rj := p.Obj
	var src source
	switch s := p.State.spec.Source; {
	case s.BackupJob != nil:
		bj := &backupv1.BackupJob{}
		key := client.ObjectKey{Namespace: rj.Namespace, Name: s.BackupJob.Name}
		if err := r.Client.Get(ctx, key, bj); err != nil {
			if apierrors.IsNotFound(err) {
				return src, r.wait(p, restorev1.RestoreJobBackupJobNotFoundReason, "BackupJob %s not found; waiting for it", key.Name)
			}
			return src, fmt.Errorf("reading BackupJob %s: %w", key.Name, err)
		}
		if err := guardOverwrite(p, bj); err != nil {
			return src, err
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
			return src, r.wait(p, restorev1.RestoreJobNoArtifactReason, "BackupJob %s has no successful backup yet; waiting for its first one", key.Name)
		}
	case s.Store != nil:
		// The catalog key may name a BackupJob of this cluster: the guard
		// applies. It may be in a namespace the cache does not watch
		// (--watch-namespaces), so read it from the API server.
		if key, ok := restorespec.SourceBackupJob(rj); ok {
			bj := &backupv1.BackupJob{}
			err := r.APIReader.Get(ctx, key, bj)
			switch {
			case err == nil:
				if err := guardOverwrite(p, bj); err != nil {
					return src, err
				}
			case !apierrors.IsNotFound(err):
				return src, fmt.Errorf("reading BackupJob %s: %w", key, err)
			}
		}
		src.Storage = s.Store.Storage
		src.CatalogKey = s.Store.BackupJob
		src.Artifact = cairnv1.Artifact{Path: s.Store.Artifact}
		if rj.Status.Artifact != nil {
			src.Artifact = *rj.Status.Artifact
		}
	}
	return src, nil
}

// guardOverwrite refuses to restore into the database bj backs up unless
// spec.allowOverwriteSource says so.
func guardOverwrite(p *pass, bj *backupv1.BackupJob) error {
	rj := p.Obj.DeepCopy()
	rj.Spec = p.State.spec
	if ferr := restorespec.OverwriteError(rj, bj); ferr != nil {
		return reconcile.Stalled(restorev1.RestoreJobOverwritesSourceReason, "%s", ferr.Error())
	}
	return nil
}

// observe reads the Job's state into status.
func (r *RestoreJobReconciler) observe(ctx context.Context, p *pass) error {
	log := ctrl.LoggerFrom(ctx)
	rj, job, spec := p.Obj, p.State.job, &p.State.spec
	if !metav1.IsControlledBy(job, rj) {
		nc := &ownership.NotControlledError{Kind: "Job", Key: client.ObjectKeyFromObject(job)}
		return reconcile.Stalled(cairnv1.NotControlledReason, "%s", nc.Error())
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
		// without status): the Job says what it restores. The cache holds
		// Jobs without their spec: read this one past it (rare).
		live := &batchv1.Job{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), live); err != nil {
			return fmt.Errorf("reading Job %s: %w", job.Name, err)
		}
		if a := jobArtifact(live); a != "" {
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
			artifact, describeTarget(spec.Target), job.Name, max(rj.Status.Attempts, 1), *spec.MaxRetries+1))
		return nil
	}

	res, failure, perr := r.podResult(ctx, rj, job)
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
			p.RequeueAfter(2 * time.Second)
			return nil
		}
		if res != nil {
			rj.Status.Artifact = agentjob.Artifact(res)
			artifact = res.Artifact
			recordChecks(rj, res)
		} else {
			log.Info("Job complete but no agent report found; keeping the resolved artifact", "error", perr)
		}
		rj.Status.CompletionTime = &at
		restored := fmt.Sprintf("restored artifact %s into %s in %s",
			artifact, describeTarget(spec.Target), at.Sub(rj.Status.StartTime.Time).Round(time.Second))
		if reason, msg := checksOutcome(spec, rj.Status.Checks); reason != "" {
			rj.Status.Phase = restorev1.PhaseFailed
			conditions.MarkStalled(rj, reason, restored+", but "+msg+dropNote(spec, rj, res))
			return nil
		}
		rj.Status.Phase = restorev1.PhaseSucceeded
		if n := len(rj.Status.Checks); n > 0 {
			restored += fmt.Sprintf("; %d check(s) passed", n)
		}
		conditions.MarkReady(rj, cairnv1.SucceededReason, restored+dropNote(spec, rj, res))
		return nil
	}
	msg := fmt.Sprintf("restore Job %s failed after %d attempt(s)", job.Name, rj.Status.Attempts)
	if out.Reason != "" {
		msg += ": " + out.Reason
	}
	if out.Message != "" {
		msg += " (" + out.Message + ")"
	}
	if failure != nil {
		msg += "; agent: " + failure.Reason
	}
	msg += "; create a new RestoreJob to try again"
	rj.Status.Phase = restorev1.PhaseFailed
	rj.Status.CompletionTime = &at
	conditions.MarkStalled(rj, failedReason(failure), msg)
	return nil
}

// jobMissing handles a started RestoreJob whose Job is not in the cache: a
// cache lag right after creation, or a Job deleted before it finished. A
// deleted restore is not started again behind the user's back: it failed.
func (r *RestoreJobReconciler) jobMissing(ctx context.Context, p *pass) error {
	rj := p.Obj
	live := &batchv1.Job{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: rj.Namespace, Name: rj.JobName()}, live)
	switch {
	case err == nil:
		p.RequeueAfter(time.Second)
		return reconcile.Done()
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading Job %s: %w", rj.JobName(), err)
	}
	now := metav1.Now()
	rj.Status.Phase = restorev1.PhaseFailed
	rj.Status.CompletionTime = &now
	conditions.MarkStalled(rj, restorev1.RestoreJobJobDeletedReason, fmt.Sprintf(
		"restore Job %s was deleted before it finished; the target database may be partly restored; create a new RestoreJob to try again", rj.JobName()))
	return reconcile.Done()
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

// wait ends the pass of a RestoreJob waiting for its source: Pending,
// Reconciling with reason, looked at again within WaitInterval (BackupJob
// events wake it sooner).
func (r *RestoreJobReconciler) wait(p *pass, reason, format string, args ...any) error {
	p.Obj.Status.Phase = restorev1.PhasePending
	return reconcile.Waiting(r.WaitInterval, reason, format, args...)
}
