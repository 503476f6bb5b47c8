package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testing/testenv"
)

// The operator runs with nothing but its generated ClusterRole and the base's
// leader-election Role (bound in the Lease's namespace), and a restore still
// succeeds end to end: leader election, webhook read of the BackupJob, Job
// creation, status, Events.
func TestRunsWithOnlyTheGeneratedRole(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, err := env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: "restore"})
	g.Expect(err).NotTo(HaveOccurred())

	startOperator(t, operatorOptions{config: cfg, leaderElection: true})
	ns := namespace(t)
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)
	// The webhook's overwrite guard reads the BackupJob with the operator's rights.
	bad := restoreJob(ns, "overwrite", fromBackupJob("orders-db", ""))
	bad.Spec.Target = sourceDB()
	err = env.Client.Create(ctx, bad)
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("restoring would overwrite it"))

	rj := restoreJob(ns, "rbac", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	completeJob(t, job, last)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
	g.Eventually(testenv.EventReasons(env.Client, ns, "RestoreJob", "rbac")).WithTimeout(timeout).Should(ContainElement("Normal/" + cairnv1.SucceededReason))

	// Deletion (the finalizer's Job cleanup) works with the role too.
	g.Expect(env.Client.Delete(ctx, rj)).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, job)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(testenv.Gone(env.Client, rj)).WithTimeout(timeout).Should(BeTrue())
}
