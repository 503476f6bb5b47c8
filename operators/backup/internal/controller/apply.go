package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/reconcile"
)

// The operator caches its CronJobs as metadata only (no pod template): these
// two annotations let it tell from the metadata alone that a CronJob still
// matches what it would render.
const (
	// SpecHashAnnotation holds a hash of the desired CronJob (labels, owner
	// reference, spec) as rendered from the BackupJob.
	SpecHashAnnotation = "backup.cairn.dev/spec-hash"
	// SpecGenerationAnnotation holds the CronJob's metadata.generation at
	// which its spec was last checked or written to match that hash. The API
	// server bumps the generation on every spec change, so an edit of the
	// spec by anyone else makes the two differ, and the operator then reads
	// the whole CronJob and reverts the edit.
	SpecGenerationAnnotation = "backup.cairn.dev/spec-generation"
)

var cronJobGVK = batchv1.SchemeGroupVersion.WithKind("CronJob")

// cronJobMeta is an empty metadata-only CronJob, for reads from the cache.
func cronJobMeta() *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(cronJobGVK)
	return m
}

// ensureCronJob makes bj's CronJob match desiredCronJob, with bj as its
// controller: create it when missing, leave it alone when its metadata shows
// it unchanged since it last matched, else read it in full from the API
// server and revert any drift (fields the API server defaulted are not drift).
// Someone else's CronJob with the same name is never adopted or changed.
// ensureCronJob is the step that keeps the CronJob: a CronJob of the same
// name that another controller owns stalls the BackupJob.
func (r *BackupJobReconciler) ensureCronJob(ctx context.Context, p *pass) error {
	bj := p.Obj
	op, err := r.applyCronJob(ctx, bj, bj.Spec.Suspend)
	var nc *ownership.NotControlledError
	if errors.As(err, &nc) {
		bj.Status.Phase = backupv1.PhasePending
		return reconcile.Stalled(cairnv1.NotControlledReason, "%s", nc.Error())
	}
	if err != nil {
		return fmt.Errorf("ensuring the CronJob: %w", err)
	}
	if op != ownership.Unchanged {
		ctrl.LoggerFrom(ctx).Info("CronJob "+string(op), "CronJob", bj.Name)
	}
	return nil
}

// suspendCronJob suspends bj's CronJob if it exists (a reference it needs is
// missing): no run starts until the BackupJob is reconciled again.
func (r *BackupJobReconciler) suspendCronJob(ctx context.Context, bj *backupv1.BackupJob) error {
	cached := cronJobMeta()
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: bj.Namespace, Name: bj.Name}, cached)
	if apierrors.IsNotFound(err) || (err == nil && !metav1.IsControlledBy(cached, bj)) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = r.applyCronJob(ctx, bj, true)
	return err
}

func (r *BackupJobReconciler) applyCronJob(ctx context.Context, bj *backupv1.BackupJob, suspend bool) (ownership.Op, error) {
	desired := desiredCronJob(bj, r.AgentImage)
	desired.Spec.Suspend = &suspend
	if err := ownership.SetController(bj, desired, r.Scheme); err != nil {
		return "", err
	}
	hash, err := cronJobHash(desired)
	if err != nil {
		return "", err
	}
	key := client.ObjectKeyFromObject(desired)
	cached := cronJobMeta()
	err = r.Client.Get(ctx, key, cached)
	if apierrors.IsNotFound(err) {
		created := desired.DeepCopy()
		// A new CronJob starts at generation 1.
		setSpecAnnotations(created, hash, 1)
		err = r.Client.Create(ctx, created)
		if err == nil {
			return ownership.Created, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		// Not in the cache yet, or no longer (our label removed): look at
		// the API server's copy.
		return r.reconcileLiveCronJob(ctx, bj, key, desired, hash)
	}
	if err != nil {
		return "", err
	}
	if !metav1.IsControlledBy(cached, bj) {
		return "", &ownership.NotControlledError{Kind: "CronJob", Key: key}
	}
	if upToDate(cached, desired, hash) {
		return ownership.Unchanged, nil
	}
	return r.reconcileLiveCronJob(ctx, bj, key, desired, hash)
}

// upToDate: the cached metadata says the CronJob's spec matched desired (same
// hash) at its current generation, and the labels desired sets are in place.
func upToDate(cached *metav1.PartialObjectMetadata, desired *batchv1.CronJob, hash string) bool {
	a := cached.GetAnnotations()
	if a[SpecHashAnnotation] != hash || a[SpecGenerationAnnotation] != strconv.FormatInt(cached.Generation, 10) {
		return false
	}
	for k, v := range desired.Labels {
		if l, ok := cached.Labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// reconcileLiveCronJob reads the CronJob from the API server and compares it
// with desired field by field: every field desired sets must have the same
// value. A drifted CronJob is updated with desired laid over it; a matching
// one whose annotations are stale gets them refreshed (a metadata patch,
// which does not change its generation).
func (r *BackupJobReconciler) reconcileLiveCronJob(ctx context.Context, bj *backupv1.BackupJob, key types.NamespacedName, desired *batchv1.CronJob, hash string) (ownership.Op, error) {
	live := &batchv1.CronJob{}
	if err := r.APIReader.Get(ctx, key, live); err != nil {
		return "", err
	}
	if !metav1.IsControlledBy(live, bj) {
		return "", &ownership.NotControlledError{Kind: "CronJob", Key: key}
	}
	drifted, err := ownership.Drift(desired, live)
	if err != nil {
		return "", err
	}
	if drifted == nil {
		if live.Annotations[SpecHashAnnotation] == hash && live.Annotations[SpecGenerationAnnotation] == strconv.FormatInt(live.Generation, 10) {
			return ownership.Unchanged, nil // the cache was behind
		}
		patch := client.MergeFrom(live.DeepCopy())
		setSpecAnnotations(live, hash, live.Generation)
		if err := r.Client.Patch(ctx, live, patch); err != nil {
			return "", err
		}
		return ownership.Unchanged, nil
	}
	updated := drifted.(*batchv1.CronJob)
	// The API server bumps the generation when, and only when, the spec
	// changes; record the generation this write will produce.
	gen := live.Generation
	if !equality.Semantic.DeepEqual(updated.Spec, live.Spec) {
		gen++
	}
	setSpecAnnotations(updated, hash, gen)
	if err := r.Client.Update(ctx, updated); err != nil {
		return "", err
	}
	if updated.Generation != gen {
		// Our guess was wrong (e.g. a change the API server normalised
		// away): record the generation the write actually produced.
		patch := client.MergeFrom(updated.DeepCopy())
		setSpecAnnotations(updated, hash, updated.Generation)
		if err := r.Client.Patch(ctx, updated, patch); err != nil {
			return "", err
		}
	}
	return ownership.Updated, nil
}

func setSpecAnnotations(cj *batchv1.CronJob, hash string, generation int64) {
	if cj.Annotations == nil {
		cj.Annotations = map[string]string{}
	}
	cj.Annotations[SpecHashAnnotation] = hash
	cj.Annotations[SpecGenerationAnnotation] = strconv.FormatInt(generation, 10)
}

// cronJobHash hashes what the operator manages in a CronJob: its labels,
// owner references and spec.
func cronJobHash(cj *batchv1.CronJob) (string, error) {
	b, err := json.Marshal(struct {
		Labels          map[string]string       `json:"labels"`
		OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		Spec            batchv1.CronJobSpec     `json:"spec"`
	}{cj.Labels, cj.OwnerReferences, cj.Spec})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16]), nil
}
