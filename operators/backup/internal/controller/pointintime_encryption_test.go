package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// TestPointInTimeEncryptedArchiver: pointInTime beside encryption is
// admitted (the archived log is encrypted to the same recipients), and
// the archiver gets the recipients exactly as the backup runs do — by
// reference to the same Secret key, never a value, never an identity; a
// change of the reference reaches the archiver's pod template (a new
// archiver pod encrypts the next segments to the new recipients).
func TestPointInTimeEncryptedArchiver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-keys"},
		StringData: map[string]string{"recipients": "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n"}})).To(Succeed())
	b := mysqlBackupJob(ns, "sealed")
	b.Spec.PointInTime = &backupv1.PointInTimeSpec{}
	b.Spec.Encryption = &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
		SecretKeyRef: &cairnv1.KeySelector{Name: "backup-keys", Key: "recipients"}}}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)

	recipients := func(c corev1.Container) *corev1.EnvVar {
		e := envFor(c)
		g.Expect(e).NotTo(HaveKey(contract.EnvEncryptionIdentity), "a backup-side pod never gets an identity")
		r, ok := e[contract.EnvEncryptionRecipients]
		if !ok {
			return nil
		}
		return &r
	}
	g.Eventually(func(g Gomega) {
		arch := recipients(archiverOf(g, bj).Spec.Template.Spec.Containers[0])
		run := recipients(cronJob(g, key).Spec.JobTemplate.Spec.Template.Spec.Containers[0])
		g.Expect(arch).NotTo(BeNil(), "the archiver gets no recipients: its segments would be stored in clear")
		g.Expect(arch.Value).To(BeEmpty())
		g.Expect(arch.ValueFrom.SecretKeyRef.Name).To(Equal("backup-keys"))
		g.Expect(arch.ValueFrom.SecretKeyRef.Key).To(Equal("recipients"))
		g.Expect(arch).To(Equal(run), "the archiver and the backup runs encrypt to the same recipients")
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// Another reference (a ConfigMap): the archiver follows.
	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new-keys"},
		Data: map[string]string{"r": "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n"}})).To(Succeed())
	update(t, key, func(b *backupv1.BackupJob) {
		b.Spec.Encryption.Recipients = cairnv1.RecipientsSource{ConfigMapKeyRef: &cairnv1.KeySelector{Name: "new-keys", Key: "r"}}
	})
	g.Eventually(func(g Gomega) {
		arch := recipients(archiverOf(g, bj).Spec.Template.Spec.Containers[0])
		g.Expect(arch).NotTo(BeNil())
		g.Expect(arch.ValueFrom.ConfigMapKeyRef).NotTo(BeNil())
		g.Expect(arch.ValueFrom.ConfigMapKeyRef.Name).To(Equal("new-keys"))
		g.Expect(arch.ValueFrom.SecretKeyRef).To(BeNil())
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
