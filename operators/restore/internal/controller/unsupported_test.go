package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/testing/testenv"
)

// A restore whose agent found the target server unsupported by its image
// (exit code 4, failed at once by the podFailurePolicy) is Stalled with
// reason UnsupportedServerVersion and the agent's message (the server's
// version, the range the image supports), and no second Job starts. A
// restore that succeeds records the target server in status.server.
func TestUnsupportedTargetServer(t *testing.T) {
	g := NewWithT(t)
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	ctx := context.Background()
	last := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &last)

	rj := restoreJob(ns, "into-pg18", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	reason := "restore failed: unsupported server version: PostgreSQL 18.6 cannot be served by this agent image's tools (it supports PostgreSQL 15 and older); use an agent image with PostgreSQL 18 (or newer) tools"
	testenv.AgentPod(t, env.Client, job, 1, contract.ExitUnsupported, string(contract.FailureLineServer(reason, contract.CodeUnsupportedServer, &contract.ServerInfo{Engine: "postgres", Version: "18.6"})))
	testenv.UpdateJobStatus(t, env.Client, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		s.Failed, s.Active = 1, 0
		s.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonPodFailurePolicy, LastTransitionTime: now, LastProbeTime: now},
		}
	})
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseFailed))
	got := current(g, rj)
	stalled := conditions.Get(got, cairnv1.StalledCondition)
	g.Expect(stalled).NotTo(BeNil())
	g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(stalled.Reason).To(Equal(cairnv1.UnsupportedServerVersionReason))
	g.Expect(stalled.Message).To(And(ContainSubstring("PostgreSQL 18.6"), ContainSubstring("it supports PostgreSQL 15 and older")))
	ready := conditions.Get(got, cairnv1.ReadyCondition)
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(cairnv1.UnsupportedServerVersionReason))
	g.Expect(got.Status.Server).To(Equal(&cairnv1.ServerInfo{Engine: "postgres", Version: "18.6"}), "the refused target's server")
	g.Consistently(func(g Gomega) { g.Expect(jobs(g, ns)).To(HaveLen(1)) }).WithTimeout(2 * time.Second).Should(Succeed())

	ok := restoreJob(ns, "into-pg15", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())
	okJob := waitForJob(t, ok)
	now := time.Now().UTC()
	msg, err := contract.Marshal(contract.Result{Artifact: last.Path, Size: last.Size, Checksum: last.Checksum,
		Start: now.Add(-3 * time.Second), End: now, DurationSeconds: 3, Engine: "postgres",
		Server: &contract.ServerInfo{Engine: "postgres", Version: "15.20"}})
	g.Expect(err).NotTo(HaveOccurred())
	testenv.CompleteJob(t, env.Client, okJob, string(msg))
	g.Eventually(phaseOf(ok)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
	g.Expect(current(g, ok).Status.Server).To(Equal(&cairnv1.ServerInfo{Engine: "postgres", Version: "15.20"}))
}
