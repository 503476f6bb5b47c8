package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
)

// TestAHostChangedWithoutTheWebhookRunsNothing (issue 47 item 1, the
// controller half): the approval binds where the credentials go. A
// BackupJob approved for one database host, moved to another while the
// webhooks are not installed, keeps its approval annotation but it no
// longer approves: ReferencesNotApproved, the CronJob suspended, nothing
// runs with the old credentials against the new host.
func TestAHostChangedWithoutTheWebhookRunsNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	bj := create(t, backupJob(ns, "moved"))
	key := client.ObjectKeyFromObject(bj)
	converged(t, key, backupv1.PhaseScheduled)

	withoutWebhooks(t, ns)
	update(t, key, func(b *backupv1.BackupJob) { b.Spec.Database.Host = "evil.example" })
	g.Eventually(func(g Gomega) {
		got := get(g, key)
		c := meta.FindStatusCondition(got.Status.Conditions, cairnv1.ReadyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(cairnv1.ReferencesNotApprovedReason))
		g.Expect(c.Message).To(ContainSubstring("does not approve them"))
		cj := &batchv1.CronJob{}
		g.Expect(env.Client.Get(ctx, key, cj)).To(Succeed())
		g.Expect(cj.Spec.Suspend).To(HaveValue(BeTrue()))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
