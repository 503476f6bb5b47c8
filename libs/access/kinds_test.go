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
		return slices.ContainsFunc(checks, func(c Check) bool { return c.key() == want.key() && c.Field == want.Field })
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
