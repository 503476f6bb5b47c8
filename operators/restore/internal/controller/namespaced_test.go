package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testing/testenv"
)

// Namespace-scoped mode (platform/components/namespaced): the operator
// runs with --watch-namespaces and its generated ClusterRole granted by a
// RoleBinding in that namespace only — no cluster-wide right at all — and a
// restore still succeeds end to end, deletion included.
func TestRunsNamespaceScoped(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := namespace(t)
	cfg, err := env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: "restore", Namespaces: []string{ns}})
	g.Expect(err).NotTo(HaveOccurred())

	startOperator(t, operatorOptions{config: cfg, leaderElection: true, args: []string{"--watch-namespaces=" + ns}})
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	rj := restoreJob(ns, "scoped", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	completeJob(t, job, last)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))

	g.Expect(env.Client.Delete(ctx, rj)).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, job)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(testenv.Gone(env.Client, rj)).WithTimeout(timeout).Should(BeTrue())
}
