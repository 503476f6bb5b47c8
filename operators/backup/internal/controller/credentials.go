package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/hold"
)

// CredentialsFinalizer is the backup operator's finalizer on what the
// artifact delete of a BackupJob with deletionPolicy Delete needs once its
// namespace is being deleted: the S3 credentials Secret, or the claim of a
// PVC store. The namespace controller deletes them in the same sweep as the
// BackupJob; the finalizer keeps them (the Secret's keys, the claim's
// volume) until the artifacts are deleted — in the operator's namespace,
// since a namespace being deleted refuses new Jobs (deleteElsewhere). The
// operator adds and removes this finalizer and changes nothing else of a
// tenant's Secret or claim: the ValidatingAdmissionPolicies
// cairn-backup-secret-writes and cairn-backup-volume-writes refuse any
// other write (docs/security.md).
const CredentialsFinalizer = "backup.cairn.dev/artifact-delete"

// protectedSecret is the Secret bj's artifact delete needs after its
// namespace is gone: the S3 credentials of a Delete-policy BackupJob ("" for
// none: Retain, or a PVC store, whose claim is held instead).
func protectedSecret(bj *backupv1.BackupJob) string {
	if bj.Spec.DeletionPolicy != backupv1.DeletionPolicyDelete || bj.Spec.Storage.S3 == nil {
		return ""
	}
	return bj.Spec.Storage.S3.CredentialsSecretRef.Name
}

// needs adapts a BackupJob's one needed object to libs/hold.
func needs(name func(*backupv1.BackupJob) string) func(client.Object) []string {
	return func(o client.Object) []string {
		if bj, ok := o.(*backupv1.BackupJob); ok {
			return []string{name(bj)}
		}
		return nil
	}
}

// holds are the Secrets and claims a Delete-policy BackupJob keeps with
// CredentialsFinalizer. A held claim whose volume was rebound for a delete
// gets it back before it is released (releaseVolume).
func (r *BackupJobReconciler) holds() (secrets, claims *hold.Hold) {
	secrets = &hold.Hold{Finalizer: CredentialsFinalizer, Kind: corev1.SchemeGroupVersion.WithKind("Secret"),
		Owner: &backupv1.BackupJob{}, Owners: &backupv1.BackupJobList{}, Cleanup: backupv1.CleanupFinalizer,
		Needs: needs(protectedSecret)}
	claims = &hold.Hold{Finalizer: CredentialsFinalizer, Kind: corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
		Owner: &backupv1.BackupJob{}, Owners: &backupv1.BackupJobList{}, Cleanup: backupv1.CleanupFinalizer,
		Needs: needs(protectedClaim), Releasing: r.releaseVolume}
	return secrets, claims
}

// protectCredentials (a step, after the references were approved and found)
// puts CredentialsFinalizer on the S3 credentials Secret or the claim of a
// Delete-policy BackupJob. A pass that finds it there writes nothing. It is
// removed by the holds' releasers when no BackupJob needs the object any
// more.
func (r *BackupJobReconciler) protectCredentials(ctx context.Context, p *pass) error {
	if err := r.secretsHold.Ensure(ctx, r.Client, p.Obj); err != nil {
		return err
	}
	return r.claimsHold.Ensure(ctx, r.Client, p.Obj)
}
