package data_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
)

// Issue 30, RestoreJobs: a verification restore (dropTargetAfterChecks)
// into a scratch database it created is running a (slow) check when its
// namespace is deleted. The namespace controller deletes its pod; the agent,
// stopped, drops the scratch database before it exits; its pod, held by the
// restore operator's finalizer, keeps that report until the RestoreJob's
// cleanup read it; a Normal Event ScratchDatabaseDropped on the Namespace
// says so. The namespace is gone within a minute and the scratch database
// is not on the server. (Before: the database stayed, and nothing said so.)
func TestNamespaceDeletionDropsAStoppedVerificationsScratchDatabase(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src, scratch := dbName(ns, "shop"), dbName(ns, "verify")
	g.Expect(e.seed(src, 200)).To(Succeed())
	bj := backupJob(ns, "orders", e, src, fixtures.Yearly, s3Storage(ns+"/orders"))
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	before := time.Now()
	fixtures.SetRunNow(g, env.Client, bj, "one")
	waitSucceeded(t, bj, before, 2*time.Minute)

	rj := restoreJob(bj, "verify", e, scratch, "")
	rj.Spec.DropTargetAfterChecks = true
	rj.Spec.Checks = []restorev1.Check{
		{Name: "row-counts", RowCountsMatchBackup: true},
		{Name: "slow", SQL: "SELECT count(*) FROM (SELECT pg_sleep(300)) s", AtLeast: ptr.To[int64](0)},
	}
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	// The restore is done and the slow check runs: the scratch database
	// exists and the pod is running.
	g.Eventually(func(g Gomega) {
		ok, err := e.exists(scratch)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ok).To(BeTrue())
		pods := &corev1.PodList{}
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{restorev1.RestoreJobLabel: rj.Name})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
		g.Expect(pods.Items[0].Finalizers).To(ContainElement("restore.cairn.dev/scratch-report"))
		g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodRunning))
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	cur := &restorev1.RestoreJob{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rj), cur)).To(Succeed())
	g.Expect(cur.Finished()).To(BeFalse(), "the verification ended before the namespace was deleted")

	start := time.Now()
	g.Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue(), "the namespace is gone within a minute")
	t.Logf("namespace %s gone %s after the delete", ns, time.Since(start).Round(time.Second))
	ok, err := e.exists(scratch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "the stopped verification's scratch database is still on the server")
	g.Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		var notes []string
		for _, ev := range list.Items {
			if ev.Regarding.Kind == "Namespace" && ev.Regarding.Name == ns && ev.Reason == "ScratchDatabaseDropped" && ev.Type == corev1.EventTypeNormal {
				notes = append(notes, ev.Note)
			}
		}
		g.Expect(notes).To(ContainElement(And(ContainSubstring("RestoreJob "+ns+"/verify"), ContainSubstring(scratch))))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}
