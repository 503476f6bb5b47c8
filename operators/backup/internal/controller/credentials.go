package controller

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/hold"
)

// CredentialsFinalizer is the backup operator's finalizer on what the
// cleanup of a BackupJob needs once its namespace is being deleted: the S3
// credentials Secret or the claim of a PVC store (the artifact delete of a
// deletionPolicy Delete BackupJob), and the database credentials Secret of
// a PostgreSQL BackupJob whose archiver's replication slot is still to be
// released (whatever its deletionPolicy). The namespace controller deletes
// them in the same sweep as the BackupJob; the finalizer keeps them (the
// Secret's keys, the claim's volume) until that work is done — in the
// operator's namespace, since a namespace being deleted refuses new Jobs
// (deleteElsewhere, releaseSlotElsewhere). The operator adds and removes
// this finalizer and changes nothing else of a tenant's Secret or claim:
// the ValidatingAdmissionPolicies cairn-backup-secret-writes and
// cairn-backup-volume-writes refuse any other write (docs/security.md).
const CredentialsFinalizer = "backup.cairn.dev/artifact-delete"

// protectedSecrets are the Secrets bj's cleanup needs after its namespace
// is gone: the S3 credentials of a Delete-policy BackupJob on S3 (a PVC
// store's claim is held instead), and the database credentials while a
// PostgreSQL archiver's slot is to be released (needsSlotRelease: point-in-
// time on, or a slot not released yet), whatever the deletionPolicy.
func protectedSecrets(bj *backupv1.BackupJob) []string {
	var out []string
	if bj.Spec.DeletionPolicy == backupv1.DeletionPolicyDelete && bj.Spec.Storage.S3 != nil {
		out = append(out, bj.Spec.Storage.S3.CredentialsSecretRef.Name)
	}
	if needsSlotRelease(bj) {
		out = append(out, bj.Spec.Database.CredentialsSecretRef.Name)
	}
	return out
}

// needs adapts the objects a BackupJob needs held to libs/hold.
func needs(names func(*backupv1.BackupJob) []string) func(client.Object) []string {
	return func(o client.Object) []string {
		if bj, ok := o.(*backupv1.BackupJob); ok {
			return names(bj)
		}
		return nil
	}
}

// one is a BackupJob's one needed object as a list ("" for none).
func one(name func(*backupv1.BackupJob) string) func(*backupv1.BackupJob) []string {
	return func(bj *backupv1.BackupJob) []string { return []string{name(bj)} }
}

// holds are the Secrets and claims a BackupJob keeps with
// CredentialsFinalizer (protectedSecrets, protectedClaim). A held claim whose volume was rebound for a delete
// gets it back before it is released (releaseVolume).
func (r *BackupJobReconciler) holds() (secrets, claims *hold.Hold) {
	secrets = &hold.Hold{Finalizer: CredentialsFinalizer, Kind: corev1.SchemeGroupVersion.WithKind("Secret"),
		Owner: &backupv1.BackupJob{}, Owners: &backupv1.BackupJobList{}, Cleanup: backupv1.CleanupFinalizer,
		Needs: needs(protectedSecrets)}
	claims = &hold.Hold{Finalizer: CredentialsFinalizer, Kind: corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim"),
		Owner: &backupv1.BackupJob{}, Owners: &backupv1.BackupJobList{}, Cleanup: backupv1.CleanupFinalizer,
		Needs: needs(one(protectedClaim)), Releasing: r.releaseVolume}
	return secrets, claims
}

// protectCredentials (a step, after the references were approved and found)
// puts CredentialsFinalizer on the Secrets and the claim bj's cleanup
// needs (protectedSecrets, protectedClaim). A pass that finds it there writes nothing. It is
// removed by the holds' releasers when no BackupJob needs the object any
// more.
func (r *BackupJobReconciler) protectCredentials(ctx context.Context, p *pass) error {
	if err := r.secretsHold.Ensure(ctx, r.Client, p.Obj); err != nil {
		return err
	}
	return r.claimsHold.Ensure(ctx, r.Client, p.Obj)
}
