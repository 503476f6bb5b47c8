package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
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

// begin sets the status fields every phase shows and the first phase
// (reconcile.Reconciler.Begin: before a finished RestoreJob's pass ends).
func begin(p *pass) {
	rj := p.Obj
	rj.Status.Source = describeSource(rj)
	rj.Status.JobName = rj.JobName()
	if rj.Status.Phase == "" {
		rj.Status.Phase = restorev1.PhasePending
	}
}

// start validates the spec, resolves the source, checks the objects the
// restore needs, records the artifact (a checkpoint: a retry or a restart
// restores this artifact, never a newer one); the run step creates the
// Job. It does nothing once the Job was created, or when a Job of the
// RestoreJob's exists (its status was lost: the run step adopts it, and
// the artifact it restores is read from it).
func (r *RestoreJobReconciler) start(ctx context.Context, p *pass) error {
	if p.Obj.Status.Created() {
		return nil
	}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Obj.Namespace, Name: p.Obj.JobName()}, &batchv1.Job{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading Job %s: %w", p.Obj.JobName(), err)
	}
	log := ctrl.LoggerFrom(ctx)
	rj := p.Obj
	if err := reconcile.Valid(restorespec.Validate(rj.Name, &p.Defaulted.Spec), ""); err != nil {
		return err
	}
	// Only references the admission webhook approved (libs/access): not
	// even the source BackupJob is read otherwise.
	if err := reconcile.Approved(&r.Base, access.RestoreJob, rj); err != nil {
		return err
	}

	src, err := r.resolve(ctx, p)
	if err != nil {
		return err
	}
	prob, err := r.Refs.Check(ctx, restoreReferences(rj.Namespace, &p.Defaulted.Spec, src.Storage))
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

	if src.PointInTime != "" {
		conditions.MarkReconciling(rj, restorev1.RestoreJobArtifactResolvedReason,
			fmt.Sprintf("restoring to %s (the newest base before it, then its binary log); creating Job %s", src.PointInTime, rj.JobName()))
		p.State.src = &src
		return nil
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
	p.State.src = &src
	return nil
}

// resolve finds the store, the catalog key and the artifact, and applies the
// overwrite guard. It returns a Waiting error when the source is not ready,
// and a Stalled one when the spec cannot be acted on.
func (r *RestoreJobReconciler) resolve(ctx context.Context, p *pass) (source, error) {
	rj := p.Obj
	var src source
	switch s := p.Defaulted.Spec.Source; {
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
		case s.PointInTime != "" && bj.Spec.PointInTime == nil:
			return src, reconcile.Stalled(restorev1.RestoreJobPointInTimeNotEnabledReason,
				"source.pointInTime %s: BackupJob %s has no spec.pointInTime, so no archive to replay; turn it on (later backups are bases) or restore a dump", s.PointInTime, key.Name)
		case s.PointInTime != "" && bj.Status.LastArtifact == nil:
			return src, r.wait(p, restorev1.RestoreJobNoArtifactReason, "BackupJob %s has no successful backup yet (the base of a point-in-time restore); waiting for its first one", key.Name)
		case s.PointInTime != "":
			// The agent chooses the base: the newest dump that ended
			// before the time (status.artifact records it afterwards).
			src.PointInTime = s.PointInTime
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
	if ferr := restorespec.OverwriteError(p.Defaulted, bj); ferr != nil {
		return reconcile.Stalled(restorev1.RestoreJobOverwritesSourceReason, "%s", ferr.Error())
	}
	return nil
}

// run creates the restore Job (libs/agentjob.Run: its name is in status
// before it exists) and reads where it is into the pass' state; summarize
// decides what that means.
func (r *RestoreJobReconciler) run(ctx context.Context, p *pass) error {
	rj := p.Obj
	run := agentjob.Run[contract.Result]{
		Record: func() *cairnv1.AgentRun { return &rj.Status.AgentRun }, Namespace: rj.Namespace,
		Client: r.Client, Live: r.APIReader, Checkpoint: p.Checkpoint,
		Render: func() (*batchv1.Job, error) {
			if p.State.src == nil {
				return nil, errors.New("the restore's source was not resolved")
			}
			job := desiredJob(rj, &p.Defaulted.Spec, *p.State.src, r.AgentImage)
			return job, ownership.SetController(rj, job, r.Scheme)
		},
		Ours:  func(job *batchv1.Job) bool { return metav1.IsControlledBy(job, rj) },
		Parse: contract.Parse, Grace: r.ResultGrace, Now: r.Clock.Now,
	}
	obs, err := run.Observe(ctx)
	if err != nil {
		return err
	}
	p.State.run = &obs
	p.RequeueAfter(obs.RequeueAfter)
	if job := obs.Job; job != nil {
		rj.Status.Attempts = job.Status.Failed + job.Status.Succeeded + job.Status.Active
		if rj.Status.Artifact == nil && !obs.Created {
			// Status was lost (e.g. the object was restored from a backup
			// without status): the Job says what it restores. The cache
			// holds Jobs without their spec: read this one past it (rare).
			live := &batchv1.Job{}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(job), live); err != nil {
				return fmt.Errorf("reading Job %s: %w", job.Name, err)
			}
			if a := jobArtifact(live); a != "" {
				rj.Status.Artifact = &cairnv1.Artifact{Path: a}
			}
		}
	}
	if f := obs.Failure; f != nil && f.Server != nil {
		rj.Status.Server = &cairnv1.ServerInfo{Engine: f.Server.Engine, Version: f.Server.Version}
	}
	if res := obs.Result; res != nil {
		rj.Status.Artifact = agentjob.Artifact(res)
		if !res.RecoveryPoint.IsZero() {
			rj.Status.RecoveryPoint = &metav1.Time{Time: res.RecoveryPoint.UTC()}
		}
		recordChecks(rj, res)
		if res.Server != nil {
			rj.Status.Server = &cairnv1.ServerInfo{Engine: res.Server.Engine, Version: res.Server.Version}
		}
	}
	return nil
}

// summarize decides the RestoreJob's phase and conditions from what the
// steps found (libs/reconcile's one place for it): waiting for the source
// is Pending; a running Job Running; a finished one Succeeded or Failed,
// by the Job's outcome and the checks' results.
func (r *RestoreJobReconciler) summarize(p *pass, err error) error {
	rj, spec, obs := p.Obj, &p.Defaulted.Spec, p.State.run
	var waiting *reconcile.WaitingError
	if errors.As(err, &waiting) {
		rj.Status.Phase = restorev1.PhasePending
	}
	if err != nil || obs == nil {
		return err
	}
	artifact := ""
	if rj.Status.Artifact != nil {
		artifact = rj.Status.Artifact.Path
	}
	if t := spec.Source.PointInTime; t != "" {
		artifact = "to " + t
		if rp := rj.Status.RecoveryPoint; rp != nil {
			artifact += fmt.Sprintf(" (reached %s", rp.UTC().Format(time.RFC3339))
			if rj.Status.Artifact != nil {
				artifact += " from base " + rj.Status.Artifact.Path
			}
			artifact += ")"
		}
	}
	switch obs.State {
	case agentjob.RunPending:
		if rj.Status.Created() {
			rj.Status.Phase = restorev1.PhaseRunning
		}
	case agentjob.RunRunning:
		rj.Status.Phase = restorev1.PhaseRunning
		conditions.MarkReconciling(rj, restorev1.RestoreJobRunningReason, fmt.Sprintf(
			"restoring artifact %s into %s with Job %s (attempt %d of at most %d)",
			artifact, describeTarget(spec.Target), rj.JobName(), max(rj.Status.Attempts, 1), *spec.MaxRetries+1))
	case agentjob.RunDeleted:
		// A deleted restore is not started again behind the user's back.
		now := metav1.Now()
		rj.Status.Phase, rj.Status.CompletionTime = restorev1.PhaseFailed, &now
		conditions.MarkStalled(rj, restorev1.RestoreJobJobDeletedReason, fmt.Sprintf(
			"restore Job %s was deleted before it finished; the target database may be partly restored; create a new RestoreJob to try again", rj.JobName()))
	case agentjob.RunSucceeded:
		restored := fmt.Sprintf("restored artifact %s into %s in %s",
			artifact, describeTarget(spec.Target), rj.Status.CompletionTime.Sub(rj.Status.StartTime.Time).Round(time.Second))
		if reason, msg := checksOutcome(spec, rj.Status.Checks); reason != "" {
			rj.Status.Phase = restorev1.PhaseFailed
			conditions.MarkStalled(rj, reason, restored+", but "+msg+dropNote(spec, rj, obs.Result))
			return nil
		}
		rj.Status.Phase = restorev1.PhaseSucceeded
		if n := len(rj.Status.Checks); n > 0 {
			restored += fmt.Sprintf("; %d check(s) passed", n)
		}
		conditions.MarkReady(rj, cairnv1.SucceededReason, restored+dropNote(spec, rj, obs.Result))
	case agentjob.RunFailed:
		msg := fmt.Sprintf("restore Job %s failed after %d attempt(s)", rj.JobName(), rj.Status.Attempts)
		if o := obs.Outcome; o.Reason != "" {
			msg += ": " + o.Reason
		}
		if o := obs.Outcome; o.Message != "" {
			msg += " (" + o.Message + ")"
		}
		if f := obs.FailureReason(); f != "" {
			msg += "; agent: " + f
		}
		rj.Status.Phase = restorev1.PhaseFailed
		conditions.MarkStalled(rj, failedReason(obs.Failure), msg+"; create a new RestoreJob to try again")
	}
	return nil
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

// wait ends the pass of a RestoreJob waiting for its source: Pending
// (summarize), Reconciling with reason, looked at again within
// WaitInterval (BackupJob events wake it sooner).
func (r *RestoreJobReconciler) wait(_ *pass, reason, format string, args ...any) error {
	after := r.WaitInterval
	if after <= 0 {
		after = DefaultWaitInterval
	}
	return reconcile.Waiting(after, reason, format, args...)
}

// failedReason is the Stalled reason of a failed restore: the agent's
// failure code when the operator knows it (an encrypted artifact restored
// without a matching identity: the target was not touched, and the
// message names the recipients the artifact needs; a target server the
// agent image cannot serve), else Failed. Decided
// on the code, never on the message's words.
func failedReason(f *contract.FailedError) string {
	if f != nil {
		switch f.Code {
		case contract.CodeEncryptionIdentityMissing:
			return restorev1.RestoreJobEncryptionIdentityMissingReason
		case contract.CodeEncryptionIdentityMismatch:
			return restorev1.RestoreJobEncryptionIdentityMismatchReason
		case contract.CodeOutsideWindow:
			return restorev1.RestoreJobOutsideWindowReason
		case contract.CodeArchiveGap:
			return restorev1.RestoreJobArchiveGapReason
		case contract.CodeUnsupportedServer:
			// No tool of the agent image can serve the target server
			// (exit code 4, not retried); the message names its version
			// and the range the image supports. Nothing was written.
			return cairnv1.UnsupportedServerVersionReason
		}
	}
	return cairnv1.FailedReason
}
