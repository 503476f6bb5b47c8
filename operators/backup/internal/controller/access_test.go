package controller_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/testing/testenv"
)

// withoutWebhooks removes the installed webhook configurations until the
// API server admits without them; the returned func puts them back and
// waits until it calls them again (at the latest when the test ends).
func withoutWebhooks(t *testing.T, ns string) (restore func()) {
	t.Helper()
	g := NewWithT(t)
	hooks := testenv.TakeWebhooks(t, env.Client)
	probe := func() *backupv1.BackupJob { return backupJob(ns, "probe") }
	g.Eventually(func(g Gomega) {
		p := probe()
		g.Expect(env.Client.Create(context.Background(), p, client.DryRunAll)).To(Succeed())
		g.Expect(p.Finalizers).To(BeEmpty(), "the mutating webhook still called")
	}).WithTimeout(30 * time.Second).Should(Succeed())
	var once sync.Once
	restore = func() { once.Do(func() { putBack(t, hooks, probe) }) }
	t.Cleanup(restore)
	return restore
}

func putBack(t *testing.T, hooks []client.Object, probe func() *backupv1.BackupJob) {
	{
		for _, o := range hooks {
			if err := env.Client.Create(context.Background(), o); err != nil {
				t.Error(err)
			}
		}
		NewWithT(t).Eventually(func(g Gomega) {
			p := probe()
			g.Expect(env.Client.Create(context.Background(), p, client.DryRunAll)).To(Succeed())
			g.Expect(slices.Contains(p.Finalizers, backupv1.CleanupFinalizer)).To(BeTrue())
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
}

// TestReferencesNotApprovedRunNothing: a BackupJob that did not pass the
// webhook (created while it was not installed, or with a forged approval)
// gets Ready=False/ReferencesNotApproved and no CronJob; deleting it works
// and, with deletionPolicy Delete, runs no artifact delete. An update
// through the webhook (once it is back) approves it, and it runs.
func TestReferencesNotApprovedRunNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	restore := withoutWebhooks(t, ns)

	plain := backupJob(ns, "plain")
	plain.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	forged := backupJob(ns, "forged")
	forged.Annotations = map[string]string{access.Annotation: "v1.forged"}
	for _, bj := range []*backupv1.BackupJob{plain, forged} {
		create(t, bj)
		key := client.ObjectKeyFromObject(bj)
		g.Eventually(func(g Gomega) {
			got := get(g, key)
			c := meta.FindStatusCondition(got.Status.Conditions, cairnv1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(BeEquivalentTo("False"))
			g.Expect(c.Reason).To(Equal(cairnv1.ReferencesNotApprovedReason))
			g.Expect(c.Message).To(ContainSubstring(`spec.database.credentialsSecretRef secret "orders-db-credentials"`))
			g.Expect(c.Message).To(ContainSubstring("were not approved by the operator's admission webhook"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// The condition is written by the pass that would have created it.
		err := env.Client.Get(ctx, key, &batchv1.CronJob{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no CronJob for unapproved references: %v", err)
	}

	// Deletion is not stuck, and deletes no stored artifact.
	g.Expect(env.Client.Delete(ctx, plain)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKeyFromObject(plain), &backupv1.BackupJob{}))
	}).WithTimeout(30 * time.Second).Should(BeTrue())
	var jobs batchv1.JobList
	g.Expect(env.Client.List(ctx, &jobs, client.InNamespace(ns))).To(Succeed())
	g.Expect(jobs.Items).To(BeEmpty(), "no artifact delete Job for unapproved references")

	// The webhook back: an annotation update passes it, which approves
	// the references (the cluster admin may read them) and the BackupJob
	// runs.
	restore()
	key := client.ObjectKeyFromObject(forged)
	g.Eventually(func() error {
		cur := &backupv1.BackupJob{}
		if err := env.Client.Get(ctx, key, cur); err != nil {
			return err
		}
		cur.Annotations["example.com/approve"] = "1"
		return env.Client.Update(ctx, cur)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	converged(t, key, backupv1.PhaseScheduled)
	g.Expect(env.Client.Get(ctx, key, &batchv1.CronJob{})).To(Succeed())
}
