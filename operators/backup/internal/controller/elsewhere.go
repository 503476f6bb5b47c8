package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/finalizer"
)

// DeleteCredentialsSecret is the Secret, in the operator's namespace, that
// holds the S3 credentials of the artifact deletes running there: shipped
// empty (deploy/backup/admission), its keys written by the operator for one
// delete Job (<job>.accessKeyID, <job>.secretAccessKey) and removed when
// that Job is done or given up.
const DeleteCredentialsSecret = "cairn-backup-delete-credentials"

// Labels of an artifact delete Job run in the operator's namespace. It has
// no BackupJobLabel: its events must not map to a BackupJob of the
// operator's namespace; the finalizer looks at it on every poll.
const (
	// ForNamespaceLabel names the namespace of the BackupJob it deletes for.
	ForNamespaceLabel = "backup.cairn.dev/for-namespace"
	// forUIDAnnotation holds that BackupJob's UID (the Job's name is derived
	// from it; the annotation is checked, so a Job someone else made with
	// that name is never taken for ours).
	forUIDAnnotation = "backup.cairn.dev/for-uid"
	// elsewhereTTL removes a finished delete Job the operator did not
	// (a restart between its end and the operator's next look).
	elsewhereTTL = int32(3600)
)

// namespaceTerminating: the API refused a create because the namespace is
// being deleted (the NamespaceLifecycle admission plugin).
func namespaceTerminating(err error) bool {
	var se *apierrors.StatusError
	return errors.As(err, &se) && apierrors.HasStatusCause(se, corev1.NamespaceTerminatingCause)
}

// elsewhereJob renders the artifact delete Job of bj in the operator's
// namespace ns: the Job deleteJob renders, its S3 credentials read from the
// keys of DeleteCredentialsSecret written for it, or its PVC store mounted
// from claim, the operator's claim bound to the tenant claim's volume
// (volumeElsewhere; "" leaves the volume as rendered).
func elsewhereJob(bj *backupv1.BackupJob, image, ns string, deadline time.Duration, claim string) *batchv1.Job {
	job := deleteJob(bj, image)
	job.Namespace = ns
	labels := map[string]string{ManagedByLabel: ManagedByValue, RunKindLabel: runDelete, ForNamespaceLabel: bj.Namespace}
	job.Labels = labels
	job.Annotations = map[string]string{forUIDAnnotation: string(bj.UID)}
	job.Spec.Template.Labels = labels
	job.Spec.TTLSecondsAfterFinished = ptr.To(elsewhereTTL)
	job.Spec.ActiveDeadlineSeconds = ptr.To(max(int64(deadline.Seconds()), 1))
	for i := range job.Spec.Template.Spec.Volumes {
		if v := job.Spec.Template.Spec.Volumes[i].PersistentVolumeClaim; v != nil && claim != "" {
			v.ClaimName = claim
		}
	}
	keys := map[string]string{agentjob.S3AccessKeyIDKey: credKey(job.Name, agentjob.S3AccessKeyIDKey),
		agentjob.S3SecretAccessKeyKey: credKey(job.Name, agentjob.S3SecretAccessKeyKey)}
	for i := range job.Spec.Template.Spec.Containers {
		for j := range job.Spec.Template.Spec.Containers[i].Env {
			ref := job.Spec.Template.Spec.Containers[i].Env[j].ValueFrom
			if ref == nil || ref.SecretKeyRef == nil {
				continue
			}
			ref.SecretKeyRef.Name = DeleteCredentialsSecret
			ref.SecretKeyRef.Key = keys[ref.SecretKeyRef.Key]
		}
	}
	return job
}

func credKey(job, key string) string { return job + "." + key }

// deleteElsewhere runs bj's artifact delete when bj's namespace is being
// deleted and refuses new Jobs, in the operator's own namespace: for an S3
// store with the credentials read from the tenant's Secret (kept by
// CredentialsFinalizer) into keys of DeleteCredentialsSecret; for a PVC
// store on the claim's volume, bound for it to a claim of the operator's
// namespace (volumeElsewhere). A store that cannot be reached from there
// ends cleanup at once with a Warning Event that says what stays where:
// waiting until the deadline would not change it.
func (r *BackupJobReconciler) deleteElsewhere(ctx context.Context, bj *backupv1.BackupJob) (bool, error) {
	if r.OperatorNamespace == "" {
		if bj.Spec.Storage.PVC != nil {
			return r.unreachable(bj, "the operator's namespace is unknown")
		}
		return false, fmt.Errorf("namespace %s is being deleted (no new Jobs) and the operator's namespace is unknown: the artifact delete cannot run elsewhere", bj.Namespace)
	}
	remaining := bj.DeletionTimestamp.Add(r.CleanupDeadline).Sub(r.Now())
	want := elsewhereJob(bj, r.AgentImage, r.OperatorNamespace, remaining, "")
	job := &batchv1.Job{}
	err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), job)
	if apierrors.IsNotFound(err) {
		if bj.Spec.Storage.PVC != nil {
			claim, err := r.volumeElsewhere(ctx, bj)
			var un *errUnreachable
			switch {
			case errors.As(err, &un):
				return r.unreachable(bj, un.why)
			case err != nil:
				return false, err
			case claim == "":
				r.Recorder.Eventf(bj, nil, corev1.EventTypeNormal, "NothingStored", "Cleanup",
					"the claim %s was never bound to a volume: no artifact was stored on it", bj.Spec.Storage.PVC.ClaimName)
				return true, nil
			}
			want = elsewhereJob(bj, r.AgentImage, r.OperatorNamespace, remaining, claim)
		} else if err := r.captureCredentials(ctx, bj, want.Name); err != nil {
			return false, err
		}
		if err := r.Client.Create(ctx, want); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		r.Recorder.Eventf(bj, nil, corev1.EventTypeNormal, "DeletingArtifacts", "Cleanup",
			"namespace %s is being deleted: started Job %s/%s to delete the stored artifacts at %s", bj.Namespace, want.Namespace, want.Name, storeLocation(bj.Spec.Storage))
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if err := notOurs(job, bj); err != nil {
		return false, err
	}
	o := agentjob.JobOutcome(job)
	switch {
	case !o.Finished:
		return false, nil
	case o.Succeeded:
		return true, r.releaseElsewhere(ctx, bj)
	default:
		return false, fmt.Errorf("the artifact delete Job %s/%s failed (%s %s); it is not retried: fix the store and delete the Job, or set %s=true", job.Namespace, job.Name, o.Reason, o.Message, finalizer.SkipCleanupAnnotation)
	}
}

// unreachable ends the cleanup of bj, whose PVC store cannot be reached
// from the operator's namespace, with a Warning Event on bj and its
// Namespace (Events in a namespace being deleted are refused).
func (r *BackupJobReconciler) unreachable(bj *backupv1.BackupJob, why string) (bool, error) {
	note := unreachableNote(bj, why)
	r.Recorder.Eventf(bj, nil, corev1.EventTypeWarning, "ArtifactsNotDeleted", "Cleanup", "%s", note)
	r.Recorder.Eventf(namespaceRef(bj.Namespace), nil, corev1.EventTypeWarning, "ArtifactsNotDeleted", "Cleanup",
		"BackupJob %s/%s: %s", bj.Namespace, bj.Name, note)
	return true, nil
}

// captureCredentials copies the two S3 keys of bj's credentials Secret into
// DeleteCredentialsSecret, under keys of the delete Job named job.
func (r *BackupJobReconciler) captureCredentials(ctx context.Context, bj *backupv1.BackupJob, job string) error {
	return r.handOver(ctx, types.NamespacedName{Namespace: bj.Namespace, Name: bj.Spec.Storage.S3.CredentialsSecretRef.Name},
		"S3 credentials", "artifact delete", s3CredentialKeys, job)
}

// s3CredentialKeys are the keys of an S3 credentials Secret an artifact
// delete elsewhere is handed.
var s3CredentialKeys = []string{agentjob.S3AccessKeyIDKey, agentjob.S3SecretAccessKeyKey}

// handOver copies keys of the tenant's Secret key (read live: the cache
// holds Secrets as metadata only; kept by CredentialsFinalizer) into
// DeleteCredentialsSecret, under keys of the Job named job (credKey).
func (r *BackupJobReconciler) handOver(ctx context.Context, key types.NamespacedName, what, forWhat string, keys []string, job string) error {
	src := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, src); err != nil {
		return fmt.Errorf("reading the %s Secret %s for the %s: %w", what, key, forWhat, err)
	}
	data := map[string][]byte{}
	for _, k := range keys {
		v, ok := src.Data[k]
		if !ok {
			return fmt.Errorf("the %s Secret %s has no key %s", what, key, k)
		}
		data[credKey(job, k)] = v
	}
	return r.patchDeleteCredentials(ctx, data)
}

// takeBack removes the keys handed over to the Job named job (handOver).
// Safe to repeat.
func (r *BackupJobReconciler) takeBack(ctx context.Context, keys []string, job string) error {
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.OperatorNamespace, Name: DeleteCredentialsSecret}, sec); err != nil {
		return client.IgnoreNotFound(err)
	}
	drop := map[string][]byte{}
	for _, k := range keys {
		if _, ok := sec.Data[credKey(job, k)]; ok {
			drop[credKey(job, k)] = nil
		}
	}
	if len(drop) == 0 {
		return nil
	}
	return r.patchDeleteCredentials(ctx, drop)
}

// patchDeleteCredentials sets (value) or removes (nil) keys of
// DeleteCredentialsSecret: a JSON merge patch of those keys only, so deletes
// running at once for other BackupJobs keep theirs.
func (r *BackupJobReconciler) patchDeleteCredentials(ctx context.Context, data map[string][]byte) error {
	body, err := json.Marshal(map[string]any{"data": data})
	if err != nil {
		return err
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.OperatorNamespace, Name: DeleteCredentialsSecret}}
	if err := r.Client.Patch(ctx, sec, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("writing the delete credentials into %s/%s: %w", r.OperatorNamespace, DeleteCredentialsSecret, err)
	}
	return nil
}

// releaseElsewhere deletes bj's delete Job in the operator's namespace (and
// its pods) and the credentials it was given. Safe to repeat; nothing to do
// when no delete ran there.
func (r *BackupJobReconciler) releaseElsewhere(ctx context.Context, bj *backupv1.BackupJob) error {
	var keys []string
	if bj.Spec.Storage.S3 != nil {
		keys = s3CredentialKeys
	}
	return r.removeElsewhere(ctx, bj, elsewhereJob(bj, "", r.OperatorNamespace, time.Second, "").Name, keys)
}

// removeElsewhere deletes bj's Job name in the operator's namespace (and
// its pods; only one started for bj: ownJobElsewhere) and the keys it was
// handed (takeBack). Safe to repeat.
func (r *BackupJobReconciler) removeElsewhere(ctx context.Context, bj *backupv1.BackupJob, name string, keys []string) error {
	if r.OperatorNamespace == "" {
		return nil
	}
	job, err := r.ownJobElsewhere(ctx, bj, name)
	if err != nil {
		return err
	}
	if job != nil {
		if err := r.Client.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground)); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if len(keys) == 0 {
		return nil
	}
	return r.takeBack(ctx, keys, name)
}

// jobElsewhere reads bj's delete Job in the operator's namespace (live: the
// cache may not cover that namespace); nil when there is none for bj.
func (r *BackupJobReconciler) jobElsewhere(ctx context.Context, bj *backupv1.BackupJob) (*batchv1.Job, error) {
	return r.ownJobElsewhere(ctx, bj, elsewhereJob(bj, "", r.OperatorNamespace, time.Second, "").Name)
}

// notOurs refuses a Job of the operator's namespace that was not started
// for bj (its for-uid annotation): it is never adopted.
func notOurs(job *batchv1.Job, bj *backupv1.BackupJob) error {
	if job.Annotations[forUIDAnnotation] == string(bj.UID) {
		return nil
	}
	return fmt.Errorf("job %s/%s exists and was not started for this BackupJob; delete or rename it, or set %s=true", job.Namespace, job.Name, finalizer.SkipCleanupAnnotation)
}

// ownJobElsewhere reads the Job name in the operator's namespace (live);
// nil when there is none, or it was not started for bj (its for-uid
// annotation).
func (r *BackupJobReconciler) ownJobElsewhere(ctx context.Context, bj *backupv1.BackupJob, name string) (*batchv1.Job, error) {
	if r.OperatorNamespace == "" {
		return nil, nil
	}
	job := &batchv1.Job{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.OperatorNamespace, Name: name}, job); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if notOurs(job, bj) != nil {
		return nil, nil
	}
	return job, nil
}

// startedElsewhere: bj's delete already runs in the operator's namespace
// (so no create is tried, and refused, in bj's namespace on every poll).
func (r *BackupJobReconciler) startedElsewhere(ctx context.Context, bj *backupv1.BackupJob) (bool, error) {
	job, err := r.jobElsewhere(ctx, bj)
	return job != nil, err
}

// elsewhereSucceeded: bj's delete Job in the operator's namespace finished
// successfully (for leftBehind).
func (r *BackupJobReconciler) elsewhereSucceeded(ctx context.Context, bj *backupv1.BackupJob) bool {
	job, err := r.jobElsewhere(ctx, bj)
	return err == nil && job != nil && agentjob.JobOutcome(job).Succeeded
}

// inTerminatingNamespace: bj's namespace refused its delete or slot
// release Job (seen by this process) or one runs in the operator's
// namespace.
func (r *BackupJobReconciler) inTerminatingNamespace(ctx context.Context, bj *backupv1.BackupJob) bool {
	if _, ok := r.terminating.Load(bj.UID); ok {
		return true
	}
	started, err := r.startedElsewhere(ctx, bj)
	if err == nil && started {
		return true
	}
	job, err := r.slotJobElsewhereOf(ctx, bj)
	return err == nil && job != nil
}

// namespaceRef is namespace ns as the object an Event is about (Events
// about a namespace are stored in "default" and outlive it).
func namespaceRef(ns string) *corev1.Namespace {
	return &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: ns}}
}
