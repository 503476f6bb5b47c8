package access

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// The encryption keys a spec names are references too: whoever makes
// Cairn read a recipients Secret or ConfigMap, or an identity Secret,
// must be allowed to get it.
func TestEncryptionReferencesAreChecked(t *testing.T) {
	om := metav1.ObjectMeta{Namespace: "team", Name: "x"}
	has := func(checks []Check, want Check) bool {
		return slices.ContainsFunc(checks, func(c Check) bool { return c.ref() == want.ref() && c.Field == want.Field })
	}
	bj := &backupv1.BackupJob{ObjectMeta: om, Spec: backupv1.BackupJobSpec{Encryption: &cairnv1.EncryptionSpec{
		Recipients: cairnv1.RecipientsSource{ConfigMapKeyRef: &cairnv1.KeySelector{Name: "keys", Key: "r"}}}}}
	if !has(BackupJobChecks(bj), GetConfigMap("team", "keys", "spec.encryption.recipients.configMapKeyRef")) {
		t.Errorf("BackupJob recipients ConfigMap not checked: %+v", BackupJobChecks(bj))
	}
	bj.Spec.Encryption.Recipients = cairnv1.RecipientsSource{SecretKeyRef: &cairnv1.KeySelector{Name: "keys", Key: "r"}}
	if !has(BackupJobChecks(bj), GetSecret("team", "keys", "spec.encryption.recipients.secretKeyRef")) {
		t.Errorf("BackupJob recipients Secret not checked: %+v", BackupJobChecks(bj))
	}
	rj := &restorev1.RestoreJob{ObjectMeta: om, Spec: restorev1.RestoreJobSpec{
		Encryption: &cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "dr", Key: "identity"}}}}
	if !has(RestoreJobChecks(rj), GetSecret("team", "dr", "spec.encryption.identitySecretRef")) {
		t.Errorf("RestoreJob identity not checked: %+v", RestoreJobChecks(rj))
	}
	p := &platformv1.ProtectionPlan{ObjectMeta: om}
	p.Spec.Backup.Encryption = bj.Spec.Encryption
	p.Spec.Verification.Encryption = rj.Spec.Encryption
	checks := ProtectionPlanChecks(p)
	if !has(checks, GetSecret("team", "keys", "spec.backup.encryption.recipients.secretKeyRef")) ||
		!has(checks, GetSecret("team", "dr", "spec.verification.encryption.identitySecretRef")) {
		t.Errorf("plan keys not checked: %+v", checks)
	}
}

// Every check of an object carries every destination of the object: a
// moved scratch database changes the uses of the plan's database
// credentials too (issue 47: the verification restores the whole backup
// there).
func TestUsesNameEveryDestination(t *testing.T) {
	p := &platformv1.ProtectionPlan{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"}}
	p.Spec.Database = cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "db", Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "creds"}}
	p.Spec.Backup.Storage.PVC = &cairnv1.PVCStorage{ClaimName: "backups"}
	p.Spec.Verification.RestoreInto = platformv1.ScratchDatabase{Host: "scratch", Database: "v",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-creds"}}
	old := ProtectionPlanChecks(p)
	moved := p.DeepCopy()
	moved.Spec.Verification.RestoreInto.Host = "evil"
	changed := Changed(old, ProtectionPlanChecks(moved))
	if len(changed) != len(old) {
		t.Fatalf("moving restoreInto.host re-asks %d of %d checks: %+v", len(changed), len(old), changed)
	}
	for _, c := range changed {
		if c.Because != "this update changes spec.verification.restoreInto.host, where it is used" {
			t.Errorf("%s: Because %q", c.Field, c.Because)
		}
	}
	// The port defaults to the engine's: 0 and 5432 are the same use.
	p5432 := p.DeepCopy()
	p5432.Spec.Database.Port = 5432
	if got := Changed(old, ProtectionPlanChecks(p5432)); len(got) != 0 {
		t.Errorf("defaulting the port re-asks %+v", got)
	}
}

// The Secrets the operators hold with a finalizer need update, not only get.
func TestHeldSecretsNeedUpdate(t *testing.T) {
	bj := &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b"}}
	bj.Spec.Database = cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}}
	bj.Spec.Storage.S3 = &cairnv1.S3Storage{CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3"}}
	update := func(name string) bool {
		return slices.ContainsFunc(BackupJobChecks(bj), func(c Check) bool { return c.Verb == "update" && c.Name == name })
	}
	if update("s3") || update("db") {
		t.Fatal("a Retain BackupJob without point-in-time asks update")
	}
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	bj.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	if !update("s3") || !update("db") {
		t.Fatalf("held Secrets without update: %+v", BackupJobChecks(bj))
	}
	bj.Spec.Storage = cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}
	if !update("backups") {
		t.Fatalf("held claim without update: %+v", BackupJobChecks(bj))
	}
}
