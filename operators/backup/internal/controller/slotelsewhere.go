package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/names"
)

// runReleaseSlot is RunKindLabel's value on a slot release Job run in the
// operator's namespace (releaseSlotElsewhere).
const runReleaseSlot = "release-slot"

// slotJobElsewhereName is the name of bj's slot release Job in the
// operator's namespace: a hash of bj's UID, so it never collides with
// another BackupJob's (the for-uid annotation is checked as well).
func slotJobElsewhereName(bj *backupv1.BackupJob) string {
	sum := sha256.Sum256([]byte(bj.UID))
	return names.Prefix(bj.Name, 40) + "-release-slot-" + hex.EncodeToString(sum[:])[:8]
}

// hostElsewhere is the database host as a pod of another namespace reaches
// it: a short Service name (no dot, not an IP, not localhost) resolves only
// in the tenant's namespace ns, so it becomes <host>.<ns>.svc.
func hostElsewhere(host, ns string) string {
	if host == "" || host == "localhost" || strings.Contains(host, ".") || net.ParseIP(host) != nil {
		return host
	}
	return host + "." + ns + ".svc"
}

// slotJobElsewhere renders bj's slot release Job in the operator's
// namespace ns: `agent archive-status` with contract.EnvArchiveReleaseSlot,
// no store (the release reads no archive), the database host made
// resolvable from there (hostElsewhere) and its credentials read from the
// keys of DeleteCredentialsSecret written for this Job. No BackupJobLabel
// (its events must not map to a BackupJob of the operator's namespace; the
// finalizer polls it); ForNamespaceLabel and forUIDAnnotation say whose it
// is. It runs at most until the cleanup deadline (deadline from now).
func slotJobElsewhere(bj *backupv1.BackupJob, image, ns string, deadline time.Duration) *batchv1.Job {
	db := bj.Spec.Database
	db.Host = hostElsewhere(db.Host, bj.Namespace)
	labels := map[string]string{ManagedByLabel: ManagedByValue, RunKindLabel: runReleaseSlot, ForNamespaceLabel: bj.Namespace}
	spec := agentjob.Spec{
		Command:               contract.CommandArchiveStatus,
		Image:                 image,
		CatalogKey:            bj.Namespace + "/" + bj.Name,
		Database:              &db,
		Labels:                labels,
		BackoffLimit:          new(checkBackoffLimit),
		ActiveDeadlineSeconds: ptr.To(max(int64(deadline.Seconds()), 1)),
	}
	name := slotJobElsewhereName(bj)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels,
			Annotations: map[string]string{forUIDAnnotation: string(bj.UID)}},
		Spec: agentjob.JobSpec(spec),
	}
	job.Spec.TTLSecondsAfterFinished = ptr.To(elsewhereTTL)
	c := &job.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1.EnvVar{Name: contract.EnvArchiveReleaseSlot, Value: "true"})
	for i := range c.Env {
		if ref := c.Env[i].ValueFrom; ref != nil && ref.SecretKeyRef != nil {
			ref.SecretKeyRef.Name = DeleteCredentialsSecret
			ref.SecretKeyRef.Key = credKey(name, ref.SecretKeyRef.Key)
		}
	}
	return job
}

// dbCredentialKeys are the keys of a database credentials Secret the
// release Job elsewhere is handed.
var dbCredentialKeys = []string{agentjob.DatabaseUsernameKey, agentjob.DatabasePasswordKey}

// releaseSlotElsewhere releases bj's slot when bj's namespace is being
// deleted and refuses new Jobs: one slot release Job in the operator's
// namespace (slotJobElsewhere), the two keys of the tenant's database
// Secret (kept by CredentialsFinalizer) copied into DeleteCredentialsSecret
// for it. A failed release is run again releaseRetry after it ended, until
// the cleanup deadline (the finalizer then gives up: abandonSlot). True
// when the slot is gone; the Job and the keys are removed then.
func (r *BackupJobReconciler) releaseSlotElsewhere(ctx context.Context, bj *backupv1.BackupJob) (bool, error) {
	if r.OperatorNamespace == "" {
		r.slotLeft(bj, "the namespace is being deleted (no new Jobs) and the operator's namespace is unknown, so no Job may drop")
		return true, nil
	}
	remaining := bj.DeletionTimestamp.Add(r.CleanupDeadline).Sub(r.Now())
	want := slotJobElsewhere(bj, r.AgentImage, r.OperatorNamespace, remaining)
	job := &batchv1.Job{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), job)
	if apierrors.IsNotFound(err) {
		if err := r.captureDBCredentials(ctx, bj, want.Name); err != nil {
			return false, err
		}
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		ctrl.LoggerFrom(ctx).Info("releasing the archiver's replication slot from the operator's namespace", "Job", want.Namespace+"/"+want.Name)
		r.Recorder.Eventf(bj, nil, corev1.EventTypeNormal, "ReleasingSlot", "Cleanup",
			"namespace %s is being deleted: started Job %s/%s to drop the archiver's replication slot %s", bj.Namespace, want.Namespace, want.Name, slotName(bj))
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := notOurs(job, bj); err != nil {
		return false, err
	}
	if !job.DeletionTimestamp.IsZero() {
		return false, nil // a failed one going, before its retry
	}
	o := agentjob.JobOutcome(job)
	switch {
	case !o.Finished:
		return false, nil
	case o.Succeeded:
		r.slotsReleased.Store(bj.UID, true)
		ctrl.LoggerFrom(ctx).Info("dropped the archiver's replication slot from the operator's namespace", "slot", slotName(bj), "Job", job.Namespace+"/"+job.Name)
		r.Recorder.Eventf(bj, job, corev1.EventTypeNormal, "SlotReleased", "ReleaseSlot",
			"dropped the archiver's replication slot %s on the source (Job %s/%s)", slotName(bj), job.Namespace, job.Name)
		return true, r.removeSlotJobElsewhere(ctx, bj)
	}
	// Failed: run again once releaseRetry passed, with the keys it was
	// handed. Meanwhile the BackupJob's condition says why (the error; its
	// Events are refused in a namespace being deleted).
	why := r.slotReleaseFailure(ctx, job)
	if again := o.At.Add(releaseRetry); r.Now().Before(again) {
		return false, fmt.Errorf("the slot release Job %s/%s could not drop the archiver's replication slot %s (%s); it runs again at %s, until the cleanup deadline",
			job.Namespace, job.Name, slotName(bj), why, again.UTC().Format(time.RFC3339))
	}
	r.Recorder.Eventf(bj, job, corev1.EventTypeWarning, "SlotReleaseFailed", "ReleaseSlot",
		"could not drop the archiver's replication slot %s from Job %s/%s (%s); trying again until the cleanup deadline",
		slotName(bj), job.Namespace, job.Name, why)
	err = r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &job.UID})
	return false, client.IgnoreNotFound(err)
}

// slotReleaseFailure is why the failed release Job job failed: the agent's
// reason from its pods' termination messages (read live: the operator's
// namespace may not be cached), else the Job's condition.
func (r *BackupJobReconciler) slotReleaseFailure(ctx context.Context, job *batchv1.Job) string {
	o := agentjob.JobOutcome(job)
	why := strings.TrimSpace(o.Reason + " " + o.Message)
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingLabels{RunKindLabel: runReleaseSlot}); err != nil {
		return why
	}
	var own []corev1.Pod
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == job.UID {
			own = append(own, p)
		}
	}
	if _, failure, err := agentjob.NewestResult(own, contract.ParseArchiveStatus); err == nil && failure != nil {
		return failure.Error()
	}
	return why
}

// captureDBCredentials copies the two keys of bj's database credentials
// Secret into DeleteCredentialsSecret, under keys of the release Job named
// job.
func (r *BackupJobReconciler) captureDBCredentials(ctx context.Context, bj *backupv1.BackupJob, job string) error {
	return r.handOver(ctx, types.NamespacedName{Namespace: bj.Namespace, Name: bj.Spec.Database.CredentialsSecretRef.Name},
		"database credentials", "slot release", dbCredentialKeys, job)
}

// removeSlotJobElsewhere deletes bj's slot release Job in the operator's
// namespace (and its pods) and the keys it was handed. Safe to repeat;
// nothing to do when no release ran there.
func (r *BackupJobReconciler) removeSlotJobElsewhere(ctx context.Context, bj *backupv1.BackupJob) error {
	if !needsSlotRelease(bj) {
		return nil
	}
	return r.removeElsewhere(ctx, bj, slotJobElsewhereName(bj), dbCredentialKeys)
}

// slotJobElsewhereOf reads bj's slot release Job in the operator's
// namespace (live); nil when there is none for bj.
func (r *BackupJobReconciler) slotJobElsewhereOf(ctx context.Context, bj *backupv1.BackupJob) (*batchv1.Job, error) {
	return r.ownJobElsewhere(ctx, bj, slotJobElsewhereName(bj))
}

// slotLeft says once, in a Warning Event on bj's Namespace (Events
// outlive it) and on bj, that bj's slot stays on the source and the
// statement that drops it.
func (r *BackupJobReconciler) slotLeft(bj *backupv1.BackupJob, why string) {
	if _, said := r.slotsLeft.LoadOrStore(bj.UID, true); said {
		return
	}
	msg := fmt.Sprintf("BackupJob %s/%s: %s the PostgreSQL archiver's replication slot %s on %s; it keeps WAL on the source until dropped: SELECT pg_drop_replication_slot('%s')",
		bj.Namespace, bj.Name, why, slotName(bj), dbAddress(bj.Spec.Database), slotName(bj))
	r.Recorder.Eventf(namespaceRef(bj.Namespace), nil, corev1.EventTypeWarning, "SlotLeft", "Cleanup", "%s", msg)
	r.Recorder.Eventf(bj, nil, corev1.EventTypeWarning, "SlotLeft", "Cleanup", "%s", msg)
}

func dbAddress(db cairnv1.DatabaseRef) string {
	port := db.Port
	if port == 0 {
		port = 5432
	}
	return fmt.Sprintf("%s:%d", db.Host, port)
}

// slotStillHeld: bj's cleanup owes a slot release it has not seen done
// (for what is left behind when cleanup is given up).
func (r *BackupJobReconciler) slotStillHeld(bj *backupv1.BackupJob) bool {
	if !needsSlotRelease(bj) {
		return false
	}
	_, released := r.slotsReleased.Load(bj.UID)
	return !released
}

// abandonSlot is cleanup given up (the deadline, or the escape hatch) for
// the slot: the release Job elsewhere and its keys go, and a slot not
// released is said (slotLeft).
func (r *BackupJobReconciler) abandonSlot(ctx context.Context, bj *backupv1.BackupJob) error {
	if r.slotStillHeld(bj) {
		why := "cleanup was given up before it dropped"
		if job, err := r.slotJobElsewhereOf(ctx, bj); err == nil && job != nil {
			if o := agentjob.JobOutcome(job); o.Finished && !o.Succeeded {
				why = fmt.Sprintf("the release from the operator's namespace failed until the cleanup was given up (last: %s), so nothing dropped", r.slotReleaseFailure(ctx, job))
			}
		}
		r.slotLeft(bj, why)
	}
	r.slotsReleased.Delete(bj.UID)
	return r.removeSlotJobElsewhere(ctx, bj)
}
