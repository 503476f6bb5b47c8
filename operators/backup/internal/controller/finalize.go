package controller

import (
	"context"
	"fmt"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/ownership"
)

// cleanup is the finalizer's work for a BackupJob being deleted: first the
// CronJob and every run Job with its pods (no new run can start), then a
// PostgreSQL archiver's slot released (releaseSlotOnDelete), then, with
// deletionPolicy Delete, one agent Job that deletes the stored artifacts
// (in the operator's namespace when bj's namespace is being deleted, see
// deleteElsewhere). The
// finalizer goes when that is done, or at the cleanup deadline, or with the
// escape-hatch annotation — then a Warning Event says what was left behind.
func (r *BackupJobReconciler) cleanup(p *pass) finalizer.Cleanup {
	bj := p.Obj
	return finalizer.Cleanup{
		Run: func(ctx context.Context) (bool, error) {
			done, err := r.cleanupStep(ctx, bj)
			if done {
				r.forget(bj)
			}
			return done, err
		},
		LeftBehind: func(ctx context.Context) string { return r.leftBehind(ctx, bj) },
		// A delete or slot release given up drops its Job in the
		// operator's namespace and the credentials it was handed; a slot
		// not released is said on the Namespace (abandonSlot).
		Abandon: func(ctx context.Context) error {
			defer r.forget(bj)
			if err := r.abandonSlot(ctx, bj); err != nil {
				return err
			}
			return r.releaseElsewhere(ctx, bj)
		},
		// Events in a namespace being deleted are refused: say it on the
		// Namespace too, whose Events outlive it.
		AlsoReportOn: func(ctx context.Context) (client.Object, string) {
			if !r.inTerminatingNamespace(ctx, bj) {
				return nil, ""
			}
			return namespaceRef(bj.Namespace), "BackupJob " + bj.Namespace + "/" + bj.Name
		},
	}
}

// cleanupStep does the next step; true when nothing is left.
func (r *BackupJobReconciler) cleanupStep(ctx context.Context, bj *backupv1.BackupJob) (bool, error) {
	bg := client.PropagationPolicy("Background")
	cj := cronJobMeta()
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: bj.Namespace, Name: bj.Name}, cj)
	switch {
	case err == nil:
		if !ownsIt(bj, cj) {
			break // someone else's CronJob with our name: never ours to delete
		}
		if err := r.Client.Delete(ctx, cj, bg); client.IgnoreNotFound(err) != nil {
			return false, err
		}
		return false, nil
	case !apierrors.IsNotFound(err):
		return false, err
	}
	runs, err := r.liveRuns(ctx, bj)
	if err != nil {
		return false, err
	}
	if len(runs) > 0 {
		for i := range runs {
			if err := r.Client.Delete(ctx, &runs[i], bg); client.IgnoreNotFound(err) != nil {
				return false, err
			}
		}
		return false, nil
	}
	if needsSlotRelease(bj) {
		done, err := r.releaseSlotOnDelete(ctx, bj)
		if err != nil || !done {
			return false, err
		}
	}
	if bj.Spec.DeletionPolicy != backupv1.DeletionPolicyDelete {
		return true, nil
	}
	// Never run the artifact delete with references the webhook did not
	// approve (a BackupJob created without it, or whose spec changed while
	// it was being deleted — such updates skip the webhooks): the stored
	// artifacts are left alone.
	if !r.Guard.Approver.Approved(bj, access.BackupJobKind, access.BackupJobChecks(bj)) {
		r.Recorder.Eventf(bj, nil, "Warning", cairnv1.ReferencesNotApprovedReason, "Cleanup",
			"deletionPolicy Delete: the stored artifacts were NOT deleted: the BackupJob's references were not approved by the admission webhook")
		return true, nil
	}
	// The delete Job stays until the garbage collector removes it with the
	// BackupJob: its Complete condition is the record that the data is gone.
	want := deleteJob(bj, r.AgentImage)
	if err := ownership.SetController(bj, want, r.Scheme); err != nil {
		return false, err
	}
	job := &batchv1.Job{}
	err = r.Client.Get(ctx, client.ObjectKeyFromObject(want), job)
	if apierrors.IsNotFound(err) {
		if started, err := r.startedElsewhere(ctx, bj); err != nil || started {
			if err != nil {
				return false, err
			}
			return r.deleteElsewhere(ctx, bj)
		}
		if err := r.Client.Create(ctx, want); namespaceTerminating(err) {
			// The namespace is being deleted: no new Job may run in it.
			r.terminating.Store(bj.UID, true)
			return r.deleteElsewhere(ctx, bj)
		} else if err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		r.Recorder.Eventf(bj, want, "Normal", "DeletingArtifacts", "Cleanup", "started Job %s to delete the stored artifacts", want.Name)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !metav1.IsControlledBy(job, bj) {
		return false, fmt.Errorf("Job %s exists and is not controlled by this BackupJob; delete or rename it, or set %s=true", job.Name, finalizer.SkipCleanupAnnotation)
	}
	o := agentjob.JobOutcome(job)
	switch {
	case !o.Finished:
		return false, nil
	case o.Succeeded:
		return true, nil
	default:
		return false, fmt.Errorf("the artifact delete Job %s failed (%s %s); it is not retried: fix the store and delete the Job, or set %s=true", job.Name, o.Reason, o.Message, finalizer.SkipCleanupAnnotation)
	}
}

// forget drops what this process remembered of bj's cleanup.
func (r *BackupJobReconciler) forget(bj *backupv1.BackupJob) {
	r.terminating.Delete(bj.UID)
	r.slotsReleased.Delete(bj.UID)
	r.slotsLeft.Delete(bj.UID)
}

func ownsIt(bj *backupv1.BackupJob, obj client.Object) bool {
	for _, ref := range obj.GetOwnerReferences() {
		if ref.UID == bj.UID && ref.Controller != nil && *ref.Controller {
			return true
		}
	}
	return false
}

// leftBehind says what remains, for the Warning Event when cleanup is abandoned.
func (r *BackupJobReconciler) leftBehind(ctx context.Context, bj *backupv1.BackupJob) string {
	var parts []string
	cj := cronJobMeta()
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: bj.Namespace, Name: bj.Name}, cj); err == nil && ownsIt(bj, cj) {
		parts = append(parts, fmt.Sprintf("CronJob %s/%s (garbage-collected with the BackupJob)", bj.Namespace, bj.Name))
	}
	if runs, err := r.liveRuns(ctx, bj); err == nil && len(runs) > 0 {
		parts = append(parts, fmt.Sprintf("%d run Job(s) (garbage-collected with the BackupJob)", len(runs)))
	}
	if r.slotStillHeld(bj) {
		parts = append(parts, fmt.Sprintf("the PostgreSQL archiver's replication slot %s on %s (it keeps WAL on the source until dropped: SELECT pg_drop_replication_slot('%s'))",
			slotName(bj), dbAddress(bj.Spec.Database), slotName(bj)))
	}
	if bj.Spec.DeletionPolicy == backupv1.DeletionPolicyDelete {
		done := false
		job := &batchv1.Job{}
		if err := r.Client.Get(ctx, client.ObjectKeyFromObject(deleteJob(bj, "")), job); err == nil && metav1.IsControlledBy(job, bj) {
			done = agentjob.JobOutcome(job).Succeeded
		}
		done = done || r.elsewhereSucceeded(ctx, bj)
		if !done {
			parts = append(parts, "stored artifacts at "+storeLocation(bj.Spec.Storage)+" under "+bj.Namespace+"/"+bj.Name)
		}
	}
	return strings.Join(parts, "; ")
}

func storeLocation(s cairnv1.StorageSpec) string {
	switch {
	case s.S3 != nil:
		return fmt.Sprintf("s3://%s/%s (endpoint %s)", s.S3.Bucket, s.S3.Prefix, s.S3.Endpoint)
	case s.PVC != nil:
		return fmt.Sprintf("PVC %s/%s", s.PVC.ClaimName, s.PVC.SubPath)
	}
	return "(no store)"
}

// liveRuns are bj's run Jobs not being deleted yet.
func (r *BackupJobReconciler) liveRuns(ctx context.Context, bj *backupv1.BackupJob) ([]batchv1.Job, error) {
	runs, err := r.listRuns(ctx, bj)
	if err != nil {
		return nil, err
	}
	out := runs[:0]
	for _, j := range runs {
		if j.DeletionTimestamp.IsZero() {
			out = append(out, j)
		}
	}
	return out, nil
}
