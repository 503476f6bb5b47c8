package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testing/testenv"
)

// A plan with encrypted backups passes its recipients to the BackupJob and
// its identity to every verification RestoreJob; DecryptionVerified is True
// after a verification decrypted an encrypted backup, turns False when the
// next one is refused for its key (the identity was rotated away from the
// backups' recipients), with the metric alerted on at 0, and comes back
// when a verification decrypts again.
func TestDecryptionVerified(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "vault")
	p.Spec.Verification.EveryNBackups = new(int32(1))
	p.Spec.Backup.Encryption = &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
		ConfigMapKeyRef: &cairnv1.KeySelector{Name: "backup-keys", Key: "recipients"}}}
	p.Spec.Verification.Encryption = &cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "dr-key", Key: "identity"}}
	p.Spec.Backup.Retention = &backupv1.RetentionPolicy{KeepDaily: 7, KeepMonthly: 12, MinVerified: 2}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	g.Expect(bj.Spec.Encryption).To(Equal(p.Spec.Backup.Encryption))
	g.Expect(bj.Spec.Retention).To(Equal(p.Spec.Backup.Retention))
	g.Eventually(condition(p, platformv1.DecryptionVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("Unknown/" + platformv1.NoVerificationYetReason))

	a1 := artifact("20260102T180000.000Z")
	a1.EncryptedTo = []string{"age-fp:1111111111111111", "age-fp:2222222222222222"}
	backupSucceeded(t, bj, time.Now().Add(-3*time.Minute), a1)
	rj1 := restoreJob(t, ns, "vault-verify-1")
	g.Expect(rj1.Spec.Encryption).To(Equal(p.Spec.Verification.Encryption))
	g.Expect(rj1.Spec.RecordVerification).To(BeTrue(), "verifications are recorded in the store for minVerified")
	finishRestore(t, rj1, restorev1.PhaseSucceeded, 5*time.Second, "restored")
	g.Eventually(condition(p, platformv1.DecryptionVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("True/" + platformv1.IdentityDecryptsReason))
	g.Expect(current(g, p).Status.LastVerification.Artifact.EncryptedTo).To(Equal(a1.EncryptedTo))
	labels := map[string]string{"namespace": ns, "name": "vault"}
	g.Eventually(func(g Gomega) float64 {
		return testenv.MetricValue(g, "cairn_protectionplan_identity_decrypts", labels)
	}).
		WithTimeout(timeout).Should(Equal(1.0))

	// The recipients were rotated; the plan's identity was not.
	a2 := artifact("20260103T180000.000Z")
	a2.EncryptedTo = []string{"age-fp:3333333333333333"}
	backupSucceeded(t, bj, time.Now().Add(-2*time.Minute), a2)
	rj2 := restoreJob(t, ns, "vault-verify-2")
	finishRestoreReason(t, rj2, restorev1.PhaseFailed, time.Second, restorev1.RestoreJobEncryptionIdentityMismatchReason,
		"artifact ns/orders/x.age is encrypted to age-fp:3333333333333333 (age1…), but the identity given is age-fp:1111111111111111")
	g.Eventually(condition(p, platformv1.DecryptionVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("False/" + platformv1.IdentityCannotDecryptReason))
	c := current(g, p)
	g.Expect(c.Status.LastVerification.Reason).To(Equal(restorev1.RestoreJobEncryptionIdentityMismatchReason))
	for _, cond := range c.Status.Conditions {
		if cond.Type == platformv1.DecryptionVerifiedCondition {
			g.Expect(cond.Message).To(ContainSubstring("age-fp:3333333333333333"))
			g.Expect(cond.Message).To(ContainSubstring("Secret dr-key"))
		}
	}
	g.Expect(condition(p, platformv1.RecoverabilityVerifiedCondition)(g)).To(Equal("False/" + platformv1.VerificationFailedReason))
	g.Eventually(func(g Gomega) float64 {
		return testenv.MetricValue(g, "cairn_protectionplan_identity_decrypts", labels)
	}).
		WithTimeout(timeout).Should(Equal(0.0))

	// A verification that fails for another reason leaves the finding.
	a3 := artifact("20260104T180000.000Z")
	a3.EncryptedTo = a2.EncryptedTo
	backupSucceeded(t, bj, time.Now().Add(-time.Minute), a3)
	rj3 := restoreJob(t, ns, "vault-verify-3")
	finishRestore(t, rj3, restorev1.PhaseFailed, time.Second, "restore Job failed: database unreachable")
	g.Eventually(func(g Gomega) string { return current(g, p).Status.LastVerification.RestoreJob }).WithTimeout(timeout).Should(Equal("vault-verify-3"))
	g.Eventually(func(g Gomega) platformv1.VerificationResult { return current(g, p).Status.LastVerification.Result }).
		WithTimeout(timeout).Should(Equal(platformv1.VerificationFailed))
	g.Consistently(condition(p, platformv1.DecryptionVerifiedCondition)).WithTimeout(2 * time.Second).
		Should(Equal("False/" + platformv1.IdentityCannotDecryptReason))

	// The identity is fixed (the Secret holds the new key): the next
	// verification decrypts.
	a4 := artifact("20260105T180000.000Z")
	a4.EncryptedTo = a2.EncryptedTo
	backupSucceeded(t, bj, time.Now(), a4)
	rj4 := restoreJob(t, ns, "vault-verify-4")
	finishRestore(t, rj4, restorev1.PhaseSucceeded, 5*time.Second, "restored")
	g.Eventually(condition(p, platformv1.DecryptionVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("True/" + platformv1.IdentityDecryptsReason))

	// Without encryption the condition goes away.
	updatePlan(g, p, func(cur *platformv1.ProtectionPlan) { cur.Spec.Backup.Encryption = nil })
	g.Eventually(condition(p, platformv1.DecryptionVerifiedCondition)).WithTimeout(timeout).Should(Equal("missing"))
}

// Admission: encrypted backups need a verification identity.
func TestEncryptedPlanNeedsIdentity(t *testing.T) {
	g := NewWithT(t)
	startOperator(t, time.Now())
	p := plan(namespace(t), "noid")
	p.Spec.Backup.Encryption = &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
		SecretKeyRef: &cairnv1.KeySelector{Name: "backup-keys", Key: "recipients"}}}
	err := env.Client.Create(context.Background(), p)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("verification.encryption"))
	p.Spec.Backup.Encryption.Recipients.ConfigMapKeyRef = &cairnv1.KeySelector{Name: "x", Key: "y"}
	p.Spec.Verification.Encryption = &cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "k", Key: "identity"}}
	err = env.Client.Create(context.Background(), p)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("exactly one of secretKeyRef or configMapKeyRef"))
}
