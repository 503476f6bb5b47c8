package controller

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agentjob"
)

// releaseRetry is how long a failed slot release waits before its Job is
// run again.
const releaseRetry = time.Minute

// needsSlotRelease: bj archives a PostgreSQL cluster's WAL, or did (its
// status still records the archive): its archiver's replication slot must
// be dropped once the archiver is gone for good, or it would keep WAL on
// the source forever.
func needsSlotRelease(bj *backupv1.BackupJob) bool {
	return bj.Spec.Database.Engine == cairnv1.PostgresEngine && (bj.Spec.PointInTime != nil || bj.Status.PointInTime != nil)
}

// releaseJobName is the name of bj's slot release Job.
func releaseJobName(bj *backupv1.BackupJob) string { return bj.Name + "-release-slot" }

// releaseSlot drops the replication slot of bj's PostgreSQL archiver,
// whatever it retains, once the archiver is gone for good (point-in-time
// turned off, or the BackupJob deleted): the archiver's Deployment is
// deleted and its pods must be gone first (a running archiver would create
// the slot again), then one `agent archive-status` Job with
// contract.EnvArchiveReleaseSlot runs. True when the slot is gone. A
// failed release is run again after releaseRetry (the Job is deleted).
func (r *BackupJobReconciler) releaseSlot(ctx context.Context, bj *backupv1.BackupJob) (bool, time.Duration, error) {
	if err := r.removeArchiver(ctx, bj); err != nil {
		return false, 0, err
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(bj.Namespace), client.MatchingLabels{BackupJobLabel: bj.Name, RunKindLabel: runArchiver}); err != nil {
		return false, 0, err
	}
	if len(pods.Items) > 0 {
		return false, 2 * time.Second, nil // their events bring the next pass too
	}
	job := checkJob(bj, r.AgentImage, 0)
	job.Name = releaseJobName(bj)
	job.Spec.Template.Spec.Containers[0].Env = append(job.Spec.Template.Spec.Containers[0].Env,
		corev1.EnvVar{Name: contract.EnvArchiveReleaseSlot, Value: "true"})
	run := ownRun(r, bj, job, contract.ParseArchiveStatus)
	obs, err := run.Observe(ctx)
	if namespaceTerminating(err) {
		return false, 0, err
	}
	if err != nil {
		return false, 0, fmt.Errorf("slot release Job %s: %w", job.Name, err)
	}
	if obs.Created {
		ctrl.LoggerFrom(ctx).Info("releasing the archiver's replication slot", "Job", job.Name)
	}
	if obs.State != agentjob.RunSucceeded && obs.State != agentjob.RunFailed {
		return false, obs.RequeueAfter, nil
	}
	if rep := obs.Result; obs.State == agentjob.RunSucceeded && rep != nil && (rep.SlotReleased || !rep.SlotExists) {
		r.Recorder.Eventf(bj, obs.Job, corev1.EventTypeNormal, "SlotReleased", "ReleaseSlot",
			"dropped the archiver's replication slot %s on the source (it kept %d bytes of WAL)", rep.Slot, rep.RetainedWALBytes)
		// The Job stays until the caller recorded the release (the status
		// without pointInTime, or the finalizer gone): deleted first, a
		// pass that read the BackupJob before the record would start it
		// again (cleanReleaseJob removes such a leftover).
		return true, 0, nil
	}
	// Failed: kept until the retry is due (its deletion would bring a
	// pass that starts the next one at once), then said once and deleted.
	if wait := obs.Outcome.At.Add(releaseRetry).Sub(r.Now()); wait > 0 {
		return false, wait, nil
	}
	why := obs.FailureReason()
	if why == "" {
		why = obs.Outcome.Reason
	}
	r.Recorder.Eventf(bj, obs.Job, corev1.EventTypeWarning, "SlotReleaseFailed", "ReleaseSlot",
		"could not drop the archiver's replication slot %s (%s); trying again; by hand: SELECT pg_drop_replication_slot('%s')",
		slotName(bj), why, slotName(bj))
	return false, time.Second, r.deleteFinishedJob(ctx, bj, obs.Job, "slot release")
}

// cleanReleaseJob deletes bj's slot release Job when no release is under
// way: the finished one once its release is recorded, or one a pass that
// read the BackupJob before that record started again (it would otherwise
// stay, or drop the slot of an archiver turned on again).
func (r *BackupJobReconciler) cleanReleaseJob(ctx context.Context, bj *backupv1.BackupJob) error {
	return r.deleteOwnJob(ctx, bj, releaseJobName(bj), "slot release")
}

// slotName is the archiver's slot as the status last recorded it, else
// as the agent names it from the BackupJob (contract.SlotName).
func slotName(bj *backupv1.BackupJob) string {
	if st := bj.Status.PointInTime; st != nil && st.Check != nil && st.Check.Slot != "" {
		return st.Check.Slot
	}
	return contract.SlotName(bj.Namespace + "/" + bj.Name)
}

// releaseSlotOnDelete releases the slot during the BackupJob's cleanup
// (whatever its deletionPolicy: a slot is never data worth keeping, and
// left alone it fills the source's disk). In a namespace being deleted no
// Job may run there: the release runs in the operator's namespace
// (releaseSlotElsewhere) until the cleanup deadline; given up, the slot is
// said in a Warning Event on the Namespace with the statement that drops
// it (abandonSlot). Once released it is not run again by this process
// (the artifact delete may follow for a while).
func (r *BackupJobReconciler) releaseSlotOnDelete(ctx context.Context, bj *backupv1.BackupJob) (bool, error) {
	_, released := r.slotsReleased.Load(bj.UID)
	_, left := r.slotsLeft.Load(bj.UID)
	if released || left {
		return true, nil
	}
	if job, err := r.slotJobElsewhereOf(ctx, bj); err != nil || job != nil {
		if err != nil {
			return false, err
		}
		r.terminating.Store(bj.UID, true)
		return r.releaseSlotElsewhere(ctx, bj)
	}
	done, _, err := r.releaseSlot(ctx, bj)
	if done && err == nil {
		r.slotsReleased.Store(bj.UID, true)
		// The BackupJob goes next; its garbage collection takes a Job the
		// cache does not show yet.
		return true, r.cleanReleaseJob(ctx, bj)
	}
	if !namespaceTerminating(err) {
		return done, err
	}
	r.terminating.Store(bj.UID, true)
	return r.releaseSlotElsewhere(ctx, bj)
}
