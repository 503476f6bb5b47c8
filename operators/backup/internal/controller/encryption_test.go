package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// A BackupJob encrypting to recipients in a ConfigMap waits for the
// ConfigMap (its creation wakes it), then its CronJob's agent gets the
// recipients by reference — no key in the spec — and nothing else does.
func TestEncryptionRecipientsFromConfigMap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	b := backupJob(ns, "sealed")
	b.Spec.Encryption = &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
		ConfigMapKeyRef: &cairnv1.KeySelector{Name: "backup-keys", Key: "recipients"}}}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(get(g, key).Status.Conditions, cairnv1.StalledCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cairnv1.ReferenceNotFoundReason))
		g.Expect(c.Message).To(ContainSubstring("ConfigMap " + ns + "/backup-keys (spec.encryption.recipients.configMapKeyRef) not found"))
	}).WithTimeout(30 * time.Second).Should(Succeed())

	g.Expect(env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-keys"},
		Data: map[string]string{"recipients": "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p\n"}})).To(Succeed())
	converged(t, key, backupv1.PhaseScheduled)
	env := cronJob(g, key).Spec.JobTemplate.Spec.Template.Spec.Containers[0].Env
	var rec *corev1.EnvVar
	for i := range env {
		if env[i].Name == contract.EnvEncryptionRecipients {
			rec = &env[i]
		}
		g.Expect(env[i].Name).NotTo(Equal(contract.EnvEncryptionIdentity))
	}
	g.Expect(rec).NotTo(BeNil())
	g.Expect(rec.Value).To(BeEmpty())
	g.Expect(rec.ValueFrom.ConfigMapKeyRef.Name).To(Equal("backup-keys"))
	g.Expect(rec.ValueFrom.ConfigMapKeyRef.Key).To(Equal("recipients"))
}
