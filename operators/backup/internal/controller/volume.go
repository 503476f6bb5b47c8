package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
)

// A PVC store of a BackupJob whose namespace is being deleted (issue 30).
// No pod may start in that namespace any more, and a claim is mounted only
// by pods of its own namespace. So the operator reaches the claim's volume
// from its own namespace, for the one artifact delete, and gives it back:
//
//  1. While a Delete-policy BackupJob on a PVC store lives, the claim
//     carries CredentialsFinalizer (claims hold): the namespace's sweep
//     deletes the claim, the finalizer keeps it — and so keeps its volume
//     bound to it (a volume whose reclaim policy is Delete is not deleted
//     while its claim exists).
//  2. The delete finds the claim's volume and checks that the two name each
//     other (claim.spec.volumeName is the volume; the volume's claimRef is
//     this claim, by UID): only the volume the tenant's own claim is bound to
//     is ever touched. It makes a claim in the operator's namespace,
//     volumeClaimPrefix + a hash of the tenant claim's UID, pre-bound to that
//     volume (spec.volumeName), then points the volume's claimRef at it and
//     records the tenant claim in ClaimOfAnnotation on the volume. The
//     PersistentVolume controller binds them; the tenant claim shows Lost
//     meanwhile.
//  3. The delete Job runs in the operator's namespace on that claim.
//  4. When no BackupJob of the namespace needs the tenant claim any more
//     (its deletes succeeded or were given up), the claims hold's
//     releaser points the volume back at the tenant claim (from the
//     annotation, which it removes), deletes the operator's claim and
//     removes the finalizer. The tenant claim is deleted, and the volume is
//     released or deleted by its reclaim policy, as it would have been
//     without Cairn.
//
// The ValidatingAdmissionPolicy cairn-backup-volume-writes holds the
// operator to exactly these writes (docs/security.md).
const (
	// ClaimOfAnnotation, on a volume rebound to the operator's namespace,
	// holds the tenant claim it was bound to: "<namespace>/<name>/<uid>".
	ClaimOfAnnotation = "backup.cairn.dev/claim-of"
	// volumeClaimPrefix begins the name of the operator's claims.
	volumeClaimPrefix = "cairn-backup-delete-"
	// forClaimAnnotation, on the operator's claim, is the tenant claim it
	// stands in for ("<namespace>/<name>/<uid>").
	forClaimAnnotation = "backup.cairn.dev/for-claim"
)

// protectedClaim is the claim bj's artifact delete needs after its
// namespace is gone: the PVC store of a Delete-policy BackupJob.
func protectedClaim(bj *backupv1.BackupJob) string {
	if bj.Spec.DeletionPolicy != backupv1.DeletionPolicyDelete || bj.Spec.Storage.PVC == nil {
		return ""
	}
	return bj.Spec.Storage.PVC.ClaimName
}

// claimID is how a claim is recorded: namespace/name/uid.
func claimID(c *corev1.PersistentVolumeClaim) string {
	return c.Namespace + "/" + c.Name + "/" + string(c.UID)
}

// volumeClaimName is the operator's claim standing in for tenant claim uid.
func volumeClaimName(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return volumeClaimPrefix + hex.EncodeToString(sum[:])[:16]
}

// errUnreachable is a PVC store the operator cannot reach from its
// namespace; the message says why. Cleanup ends with a Warning Event.
type errUnreachable struct{ why string }

func (e *errUnreachable) Error() string { return e.why }

// volumeElsewhere makes bj's claim's volume mountable in the operator's
// namespace (steps 1-2 above) and returns the operator's claim. An
// *errUnreachable says why it cannot be; "" and no error: the claim was
// never bound, nothing was ever stored on it.
func (r *BackupJobReconciler) volumeElsewhere(ctx context.Context, bj *backupv1.BackupJob) (string, error) {
	claim := &corev1.PersistentVolumeClaim{}
	key := types.NamespacedName{Namespace: bj.Namespace, Name: bj.Spec.Storage.PVC.ClaimName}
	if err := r.APIReader.Get(ctx, key, claim); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &errUnreachable{fmt.Sprintf("the claim %s is gone (it was not held for the delete)", key)}
		}
		return "", err
	}
	if claim.Spec.VolumeName == "" {
		return "", nil
	}
	pv := &corev1.PersistentVolume{}
	if err := r.APIReader.Get(ctx, types.NamespacedName{Name: claim.Spec.VolumeName}, pv); err != nil {
		if apierrors.IsNotFound(err) {
			return "", &errUnreachable{fmt.Sprintf("the claim's volume %s is gone", claim.Spec.VolumeName)}
		}
		return "", forbiddenUnreachable(err)
	}
	name := volumeClaimName(claim.UID)
	if pv.Annotations[ClaimOfAnnotation] == claimID(claim) {
		return name, nil // rebound by an earlier pass
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.UID != claim.UID || ref.Namespace != claim.Namespace || ref.Name != claim.Name {
		return "", &errUnreachable{fmt.Sprintf("the volume %s is not bound to the claim %s", pv.Name, key)}
	}
	own, err := r.ensureVolumeClaim(ctx, claim, pv, name)
	if err != nil {
		return "", err
	}
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{ClaimOfAnnotation: claimID(claim)}, "resourceVersion": pv.ResourceVersion},
		"spec": map[string]any{"claimRef": map[string]any{"kind": "PersistentVolumeClaim", "apiVersion": "v1",
			"namespace": own.Namespace, "name": own.Name, "uid": string(own.UID), "resourceVersion": nil, "fieldPath": nil}},
	}
	if err := r.patchVolume(ctx, pv, patch); err != nil {
		return "", forbiddenUnreachable(fmt.Errorf("rebinding the volume %s to %s/%s: %w", pv.Name, own.Namespace, own.Name, err))
	}
	r.Recorder.Eventf(bj, nil, corev1.EventTypeNormal, "VolumeRebound", "Cleanup",
		"namespace %s is being deleted: the volume %s of the claim %s is bound to %s/%s for the artifact delete", bj.Namespace, pv.Name, key, own.Namespace, own.Name)
	return name, nil
}

// ensureVolumeClaim creates the operator's claim pre-bound to pv, standing
// in for claim (or finds the one an earlier pass made).
func (r *BackupJobReconciler) ensureVolumeClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, pv *corev1.PersistentVolume, name string) (*corev1.PersistentVolumeClaim, error) {
	own := &corev1.PersistentVolumeClaim{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.OperatorNamespace, Name: name}, own)
	if err == nil {
		if own.Annotations[forClaimAnnotation] != claimID(claim) {
			return nil, fmt.Errorf("the claim %s/%s exists and does not stand in for %s", own.Namespace, own.Name, claimID(claim))
		}
		return own, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	class := pv.Spec.StorageClassName
	own = &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.OperatorNamespace, Name: name,
			Labels:      map[string]string{ManagedByLabel: ManagedByValue, ForNamespaceLabel: claim.Namespace},
			Annotations: map[string]string{forClaimAnnotation: claimID(claim)}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      pv.Spec.AccessModes,
			StorageClassName: &class,
			VolumeName:       pv.Name,
			VolumeMode:       pv.Spec.VolumeMode,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: pv.Spec.Capacity[corev1.ResourceStorage]}},
		},
	}
	if err := r.Client.Create(ctx, own); err != nil {
		return nil, forbiddenUnreachable(fmt.Errorf("creating the claim %s/%s for the volume %s: %w", own.Namespace, own.Name, pv.Name, err))
	}
	return own, nil
}

func (r *BackupJobReconciler) patchVolume(ctx context.Context, pv *corev1.PersistentVolume, patch map[string]any) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	return r.Client.Patch(ctx, pv, client.RawPatch(types.MergePatchType, body))
}

// forbiddenUnreachable turns a refusal of the operator's rights (no rights
// on volumes: namespace-scoped mode) into errUnreachable: waiting until
// the deadline would not change it.
func forbiddenUnreachable(err error) error {
	if apierrors.IsForbidden(err) {
		return &errUnreachable{err.Error()}
	}
	return err
}

// releaseVolume gives the tenant claim key its volume back (step 4): it
// points a volume rebound for the claim back at it, drops the annotation,
// and deletes the operator's claim. Safe to repeat; nothing to do when the
// volume was never rebound. The claims hold's releaser calls it before it
// removes the finalizer.
func (r *BackupJobReconciler) releaseVolume(ctx context.Context, key types.NamespacedName) error {
	claim := &corev1.PersistentVolumeClaim{}
	if err := r.APIReader.Get(ctx, key, claim); err != nil {
		return client.IgnoreNotFound(err)
	}
	if claim.Spec.VolumeName != "" && r.OperatorNamespace != "" {
		pv := &corev1.PersistentVolume{}
		err := r.APIReader.Get(ctx, types.NamespacedName{Name: claim.Spec.VolumeName}, pv)
		if client.IgnoreNotFound(err) != nil {
			return err
		}
		if err == nil && pv.Annotations[ClaimOfAnnotation] == claimID(claim) {
			patch := map[string]any{
				"metadata": map[string]any{"annotations": map[string]any{ClaimOfAnnotation: nil}, "resourceVersion": pv.ResourceVersion},
				"spec": map[string]any{"claimRef": map[string]any{"kind": "PersistentVolumeClaim", "apiVersion": "v1",
					"namespace": claim.Namespace, "name": claim.Name, "uid": string(claim.UID), "resourceVersion": nil, "fieldPath": nil}},
			}
			if err := r.patchVolume(ctx, pv, patch); err != nil {
				return fmt.Errorf("binding the volume %s back to the claim %s: %w", pv.Name, key, err)
			}
		}
	}
	if r.OperatorNamespace == "" {
		return nil
	}
	own := &corev1.PersistentVolumeClaim{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.OperatorNamespace, Name: volumeClaimName(claim.UID)}, own)
	if err != nil || own.Annotations[forClaimAnnotation] != claimID(claim) {
		return client.IgnoreNotFound(err)
	}
	if err := r.Client.Delete(ctx, own, client.Preconditions{UID: &own.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting the claim %s/%s: %w", own.Namespace, own.Name, err)
	}
	return nil
}

// unreachableNote is the Warning Event's note when a PVC store cannot be
// reached for the artifact delete.
func unreachableNote(bj *backupv1.BackupJob, why string) string {
	return fmt.Sprintf("deletionPolicy Delete: namespace %s is being deleted and the store cannot be reached from the operator's namespace (%s): the stored artifacts at %s under %s/%s were NOT deleted by Cairn; they go with the claim's volume only if its reclaim policy is Delete",
		bj.Namespace, strings.TrimSuffix(why, "."), storeLocation(bj.Spec.Storage), bj.Namespace, bj.Name)
}
