package access

import (
	"strings"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// This file lists, for every Cairn kind, every object its spec makes the
// operators use on the requester's behalf, and what the requester must be
// allowed to do with it. A new reference in apis/ must be added here.

// GroupKinds of the Cairn kinds, for Sign and Approved.
var (
	BackupJobKind      = backupv1.GroupVersion.WithKind("BackupJob").GroupKind()
	RestoreJobKind     = restorev1.GroupVersion.WithKind("RestoreJob").GroupKind()
	MigrationJobKind   = migrationv1.GroupVersion.WithKind("MigrationJob").GroupKind()
	ProtectionPlanKind = platformv1.GroupVersion.WithKind("ProtectionPlan").GroupKind()
)

func database(ns string, db *cairnv1.DatabaseRef, field string) []Check {
	if db == nil || db.CredentialsSecretRef.Name == "" {
		return nil
	}
	return []Check{GetSecret(ns, db.CredentialsSecretRef.Name, field+".credentialsSecretRef")}
}

// storage: get on an S3 store's credentials Secret, or on a PVC store's
// claim (the agent's pod mounts it: whoever could not see the claim must
// not make Cairn read or write its files).
func storage(ns string, st *cairnv1.StorageSpec, field string) []Check {
	switch {
	case st == nil:
		return nil
	case st.S3 != nil && st.S3.CredentialsSecretRef.Name != "":
		return []Check{GetSecret(ns, st.S3.CredentialsSecretRef.Name, field+".s3.credentialsSecretRef")}
	case st.PVC != nil && st.PVC.ClaimName != "":
		return []Check{GetClaim(ns, st.PVC.ClaimName, field+".pvc.claimName")}
	}
	return nil
}

func getBackupJob(ns, name, field string) Check {
	return Check{Verb: "get", Group: backupv1.GroupVersion.Group, Resource: "backupjobs", Namespace: ns, Name: name, Kind: "backupjob", Field: field}
}

// encryption: get on the recipients' Secret or ConfigMap (the agent reads
// it: whoever could not must not make Cairn read it for them).
func encryption(ns string, e *cairnv1.EncryptionSpec, field string) []Check {
	switch {
	case e == nil:
		return nil
	case e.Recipients.SecretKeyRef != nil && e.Recipients.SecretKeyRef.Name != "":
		return []Check{GetSecret(ns, e.Recipients.SecretKeyRef.Name, field+".recipients.secretKeyRef")}
	case e.Recipients.ConfigMapKeyRef != nil && e.Recipients.ConfigMapKeyRef.Name != "":
		return []Check{GetConfigMap(ns, e.Recipients.ConfigMapKeyRef.Name, field+".recipients.configMapKeyRef")}
	}
	return nil
}

// decryption: get on the identity's Secret (a private key).
func decryption(ns string, d *cairnv1.DecryptionSpec, field string) []Check {
	if d == nil || d.IdentitySecretRef.Name == "" {
		return nil
	}
	return []Check{GetSecret(ns, d.IdentitySecretRef.Name, field+".identitySecretRef")}
}

// UpdateSecret is the check that the requester may update Secret ns/name:
// asked for a Secret the operator will hold with a finalizer (libs/hold),
// which only someone who may change that Secret may ask for (get alone
// would let anyone who can read another team's Secret pin it Terminating).
func UpdateSecret(ns, name, field string) Check {
	return Check{Verb: "update", Resource: "secrets", Namespace: ns, Name: name, Kind: "secret", Field: field}
}

// heldByBackup are the update checks on the Secrets and the claim the
// backup operator holds for a BackupJob's cleanup (operators/backup
// protectedSecrets, protectedClaim): the S3 credentials or the claim of a
// Delete-policy BackupJob, and the database credentials of a PostgreSQL
// BackupJob with point-in-time recovery (its archiver's slot is released
// at deletion).
func heldByBackup(ns string, db *cairnv1.DatabaseRef, st *cairnv1.StorageSpec, policy backupv1.DeletionPolicy, pitr bool, field, dbField string) []Check {
	var out []Check
	if policy == backupv1.DeletionPolicyDelete && st.S3 != nil && st.S3.CredentialsSecretRef.Name != "" {
		out = append(out, UpdateSecret(ns, st.S3.CredentialsSecretRef.Name, field+".s3.credentialsSecretRef"))
	}
	if policy == backupv1.DeletionPolicyDelete && st.PVC != nil && st.PVC.ClaimName != "" {
		// The claim is held too, and its volume borrowed for the delete
		// (operators/backup protectedClaim).
		out = append(out, Check{Verb: "update", Resource: "persistentvolumeclaims", Namespace: ns, Name: st.PVC.ClaimName,
			Kind: "persistentvolumeclaim", Field: field + ".pvc.claimName"})
	}
	if pitr && db.Engine == cairnv1.PostgresEngine && db.CredentialsSecretRef.Name != "" {
		out = append(out, UpdateSecret(ns, db.CredentialsSecretRef.Name, dbField+".credentialsSecretRef"))
	}
	return out
}

// BackupJobChecks: get on the database's and the S3 store's credentials,
// and on the encryption recipients' Secret or ConfigMap; update on the
// Secrets held for its cleanup (heldByBackup).
func BackupJobChecks(bj *backupv1.BackupJob) []Check {
	out := append(database(bj.Namespace, &bj.Spec.Database, "spec.database"), storage(bj.Namespace, &bj.Spec.Storage, "spec.storage")...)
	out = append(out, encryption(bj.Namespace, bj.Spec.Encryption, "spec.encryption")...)
	out = append(out, heldByBackup(bj.Namespace, &bj.Spec.Database, &bj.Spec.Storage, bj.Spec.DeletionPolicy, bj.Spec.PointInTime != nil,
		"spec.storage", "spec.database")...)
	return with(out, backupJobUses(&bj.Spec))
}

// RestoreJobChecks: get on the target's credentials; for source.backupJob,
// get on that BackupJob (its store is read); for source.store, get on the
// store's S3 credentials and, when the catalog key names another
// namespace, get on that BackupJob (its catalog is read).
func RestoreJobChecks(rj *restorev1.RestoreJob) []Check {
	var u uses
	u.database(&rj.Spec.Target, "spec.target")
	if st := rj.Spec.Source.Store; st != nil {
		u.storage(&st.Storage, "spec.source.store.storage")
		u.add("spec.source.store.backupJob", st.BackupJob)
	}
	return with(restoreSpecChecks(rj.Namespace, &rj.Spec, "spec"), u)
}

func restoreSpecChecks(ns string, spec *restorev1.RestoreJobSpec, field string) []Check {
	out := database(ns, &spec.Target, field+".target")
	out = append(out, decryption(ns, spec.Encryption, field+".encryption")...)
	switch src := spec.Source; {
	case src.BackupJob != nil && src.BackupJob.Name != "":
		out = append(out, getBackupJob(ns, src.BackupJob.Name, field+".source.backupJob.name"))
	case src.Store != nil:
		out = append(out, storage(ns, &src.Store.Storage, field+".source.store.storage")...)
		if bns, name, ok := strings.Cut(src.Store.BackupJob, "/"); ok && bns != ns && bns != "" && name != "" {
			out = append(out, getBackupJob(bns, name, field+".source.store.backupJob"))
		}
	}
	return out
}

// MigrationJobChecks: get on the source's credentials, the local target's
// credentials (a remote target's are in the other cluster, read with the
// kubeconfig's identity), the kubeconfig Secret and the transfer store's
// S3 credentials; patch on the cutover's switchSecret.
func MigrationJobChecks(mj *migrationv1.MigrationJob) []Check {
	var u uses
	u.migration(&mj.Spec, "spec")
	return with(migrationSpecChecks(mj.Namespace, &mj.Spec, "spec"), u)
}

func migrationSpecChecks(ns string, spec *migrationv1.MigrationJobSpec, field string) []Check {
	out := database(ns, &spec.Source, field+".source")
	if k := spec.Target.KubeconfigSecretRef; k != nil {
		if k.Name != "" {
			out = append(out, GetSecret(ns, k.Name, field+".target.kubeconfigSecretRef"))
		}
	} else {
		out = append(out, database(ns, &spec.Target.DatabaseRef, field+".target")...)
	}
	out = append(out, storage(ns, spec.Transfer.Storage, field+".transfer.storage")...)
	if e := spec.Transfer.Encryption; e != nil {
		out = append(out, encryption(ns, &cairnv1.EncryptionSpec{Recipients: e.Recipients}, field+".transfer.encryption")...)
		if spec.Target.KubeconfigSecretRef == nil && e.IdentitySecretRef.Name != "" {
			// A remote target's identity is in the other cluster.
			out = append(out, GetSecret(ns, e.IdentitySecretRef.Name, field+".transfer.encryption.identitySecretRef"))
		}
	}
	if s := spec.Cutover.SwitchSecret; s != nil && s.Name != "" {
		out = append(out, PatchSecret(ns, s.Name, field+".cutover.switchSecret"))
	}
	// A Store transfer to another cluster: the kubeconfig Secret is held
	// for the cleanup there (operators/migration kubeconfigHold).
	if k := spec.Target.KubeconfigSecretRef; k != nil && k.Name != "" && spec.Transfer.Method == migrationv1.TransferStore {
		out = append(out, UpdateSecret(ns, k.Name, field+".target.kubeconfigSecretRef"))
	}
	return out
}

// ProtectionPlanChecks: the database's, the backup store's and the scratch
// database's credentials, and the migration template's references (whether
// or not it is started: the plan creates the MigrationJob later, as the
// orchestrator).
func ProtectionPlanChecks(p *platformv1.ProtectionPlan) []Check {
	ns := p.Namespace
	out := database(ns, &p.Spec.Database, "spec.database")
	out = append(out, storage(ns, &p.Spec.Backup.Storage, "spec.backup.storage")...)
	out = append(out, encryption(ns, p.Spec.Backup.Encryption, "spec.backup.encryption")...)
	out = append(out, heldByBackup(ns, &p.Spec.Database, &p.Spec.Backup.Storage, p.Spec.DeletionPolicy, p.Spec.Backup.PointInTime != nil,
		"spec.backup.storage", "spec.database")...)
	out = append(out, decryption(ns, p.Spec.Verification.Encryption, "spec.verification.encryption")...)
	if n := p.Spec.Verification.RestoreInto.CredentialsSecretRef.Name; n != "" {
		out = append(out, GetSecret(ns, n, "spec.verification.restoreInto.credentialsSecretRef"))
	}
	if m := p.Spec.Migration; m != nil {
		out = append(out, migrationSpecChecks(ns, &m.Template, "spec.migration.template")...)
	}
	return with(out, planUses(&p.Spec))
}
