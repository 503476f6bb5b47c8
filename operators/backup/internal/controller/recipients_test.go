package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/references"
)

// A recipient that is not an age X25519 public key (issue 47 item 13), in
// the ConfigMap the BackupJob names, stalls it before anything runs —
// reason InvalidKeys, the message naming the key's line and position and
// the field — instead of failing its first run; a private key pasted there
// is refused without being shown. Fixed, the BackupJob is scheduled.
func TestRecipientsThatAreNotAgeKeysStallTheBackupJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	const good = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "backup-keys"},
		Data: map[string]string{"recipients": "# team\n" + good + "\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIbad team@laptop\n"}}
	g.Expect(env.Client.Create(ctx, cm)).To(Succeed())
	b := backupJob(ns, "badkeys")
	b.Spec.Encryption = &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
		ConfigMapKeyRef: &cairnv1.KeySelector{Name: "backup-keys", Key: "recipients"}}}
	bj := create(t, b)
	key := client.ObjectKeyFromObject(bj)
	stalledWith := func(want ...string) {
		t.Helper()
		g.Eventually(func(g Gomega) {
			c := meta.FindStatusCondition(get(g, key).Status.Conditions, cairnv1.StalledCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Reason).To(Equal(references.InvalidKeysReason))
			for _, w := range want {
				g.Expect(c.Message).To(ContainSubstring(w))
			}
			g.Expect(c.Message).NotTo(ContainSubstring("AS7GK7NC5NHCVCCKCNGGKZ"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
	stalledWith("ConfigMap "+ns+"/backup-keys key recipients (spec.encryption.recipients.configMapKeyRef)",
		"line 3 (key 2) is not an age X25519 public key")
	noRun := func() {
		t.Helper()
		var jobs batchv1.JobList
		g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
		g.Expect(jobs.Items).To(BeEmpty())
		cj := &batchv1.CronJob{}
		if err := env.Client.Get(ctx, key, cj); err == nil {
			g.Expect(cj.Spec.Suspend).To(HaveValue(BeTrue()), "a CronJob of a stalled BackupJob runs")
		}
	}
	noRun()

	// A private key where a public key belongs: refused, not shown.
	cm.Data["recipients"] = "AGE-SECRET-KEY-1AS7GK7NC5NHCVCCKCNGGKZRLFJYTGQZ2GKCRZVVXKHA7MR3XADYS0H826Y\n"
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	stalledWith("line 1 (key 1) is a private key")
	noRun()

	cm.Data["recipients"] = good + "\n"
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	converged(t, key, backupv1.PhaseScheduled)
}
