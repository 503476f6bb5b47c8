package migration_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
)

// Issue 30, MigrationJobs: the target-side Jobs of a Store transfer run in
// a second cluster, with no owner reference (none can cross clusters); the
// MigrationJob's finalizer deletes them through its kubeconfig Secret,
// which the operator keeps (finalizer migration.cairn.dev/remote-cleanup)
// while the namespace is swept. A MigrationJob is held at its import (its
// pods refused in the second cluster), its namespace deleted: the
// namespace is gone within a minute and the second cluster holds none of
// its Jobs. Then the second cluster is down when another such namespace is
// deleted (a migration operator started with --cleanup-deadline=40s): the
// namespace goes at the deadline and a Warning Event on the Namespace says
// which Jobs were left in which namespace of the target cluster.
func TestNamespaceDeletionCleansTheTargetCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	restart := withMigrationOperator(t, "--cleanup-deadline=40s")
	defer restart()
	d := engine(cairnv1.PostgresEngine)
	b := startRemote(t, g, d)
	// Lifted when the test ends (the second cluster is stopped by then).
	holdPods(t, g, b.client, remoteNamespace, contract.StepImport)

	held := func() *migrationv1.MigrationJob {
		mj, _, _ := setup(t, g, d, 200, storeTransfer(), migrationv1.CutoverSpec{Mode: migrationv1.CutoverManual})
		toRemote(g, b, mj)
		g.Expect(env.Client.Create(ctx, mj)).To(Succeed())
		waitJob(g, b.client, mj, remoteNamespace, contract.StepImport)
		g.Eventually(func(g Gomega) {
			sec := &corev1.Secret{}
			g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: mj.Namespace, Name: "cluster-b"}, sec)).To(Succeed())
			g.Expect(sec.Finalizers).To(ContainElement("migration.cairn.dev/remote-cleanup"))
		}).WithTimeout(time.Minute).Should(Succeed())
		return get(g, mj)
	}
	deleteNamespace := func(ns string, within time.Duration) time.Duration {
		start := time.Now()
		g.Expect(env.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Client.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}))
		}).WithTimeout(within).WithPolling(time.Second).Should(BeTrue(), "namespace %s is gone within %s", ns, within)
		return time.Since(start).Round(time.Second)
	}

	mj := held()
	g.Expect(jobSteps(g, b.client, mj)).To(ContainElement(contract.StepImport))
	took := deleteNamespace(mj.Namespace, time.Minute)
	g.Expect(jobSteps(g, b.client, mj)).To(BeEmpty(), "the deleted namespace's Jobs in the second cluster")
	t.Logf("namespace %s gone %s after the delete; the second cluster holds none of its Jobs", mj.Namespace, took)

	down := held()
	g.Expect(b.Stop()).To(Succeed())
	took = deleteNamespace(down.Namespace, 3*time.Minute)
	g.Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(ctx, list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		var notes []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "Namespace" && e.Regarding.Name == down.Namespace && e.Reason == "CleanupDeadlineExceeded" {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(And(ContainSubstring("MigrationJob "+down.Namespace+"/orders"),
			ContainSubstring(fmt.Sprintf("%s in namespace %s of the target cluster", down.UID, remoteNamespace)))))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	t.Logf("second cluster down: namespace %s gone %s after the delete (deadline 40s), with the Event", down.Namespace, took)
}

// withMigrationOperator replaces the package's migration operator by one
// started with extra flags; the returned func puts a default one back.
func withMigrationOperator(t *testing.T, extra ...string) func() {
	t.Helper()
	old := env.Operators["migration"]
	if err := old.Stop(); err != nil {
		t.Fatal(err)
	}
	suffix := fmt.Sprintf("-%d", time.Now().UnixNano())
	op, err := env.StartOperator(context.Background(), "migration", suffix, extra)
	if err != nil {
		t.Fatal(err)
	}
	env.Operators["migration"] = op
	return func() {
		if t.Failed() {
			t.Logf("--- %s log (last 60 lines)\n%s", op.Name, op.Tail(60))
		}
		_ = op.Stop()
		next, err := env.StartOperator(context.Background(), "migration", strings.Replace(suffix, "-", "-default-", 1), nil)
		if err != nil {
			t.Fatalf("starting a default migration operator again: %v", err)
		}
		env.Operators["migration"] = next
	}
}
