package controller_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	restorev1 "cairn.dev/apis/restore/v1"
)

// The operator's cache holds the restore Job without its spec (heap), and
// the one thing the controller reads from a Job's spec — the artifact it
// restores, when status.artifact was lost — is read from the Job past the
// cache. The Job's status changes still reach the RestoreJob.
func TestCachedJobHasNoSpecAndALostArtifactIsReadFromTheJob(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	op := startOperator(t, operatorOptions{})
	ns := namespace(t)
	first := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &first)
	rj := restoreJob(ns, "lost", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseRunning))

	cached := &batchv1.Job{}
	g.Eventually(func() error {
		return op.Manager.GetClient().Get(ctx, client.ObjectKeyFromObject(job), cached)
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(cached.Spec.Template.Spec.Containers).To(BeEmpty(), "the cache keeps the Job's spec")
	g.Expect(cached.Labels).To(HaveKeyWithValue(restorev1.RestoreJobLabel, rj.Name))
	g.Expect(cached.OwnerReferences).To(HaveLen(1))
	g.Expect(envOf(job, "CAIRN_ARTIFACT")).To(Equal(first.Path))

	// status.artifact lost (as after restoring the object without status).
	g.Eventually(func() error {
		cur := &restorev1.RestoreJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rj), cur); err != nil {
			return err
		}
		cur.Status.Artifact = nil
		return env.Client.Status().Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())
	// A Job status change brings the RestoreJob back; the artifact comes
	// from the Job's environment.
	startJob(t, job)
	g.Eventually(func(g Gomega) *restorev1.RestoreJob { return current(g, rj) }).WithTimeout(timeout).Should(
		WithTransform(func(r *restorev1.RestoreJob) string {
			if r.Status.Artifact == nil || r.Status.Attempts != 1 {
				return ""
			}
			return r.Status.Artifact.Path
		}, Equal(first.Path)))

	completeJob(t, job, first)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
}

// A restore Job that fails while the operator is down is seen by the
// restarted operator, with no later event (the Job's create event is
// filtered only while the Job is as created, and never in the initial list).
func TestJobFinishedWhileTheOperatorWasDown(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	op := startOperator(t, operatorOptions{})
	ns := namespace(t)
	first := artifactOf("orders-db", "20260102T030405.123Z")
	createBackupJob(t, ns, "orders-db", sourceDB(), &first)
	rj := restoreJob(ns, "down", fromBackupJob("orders-db", ""))
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseRunning))
	g.Expect(op.Stop()).To(Succeed())

	failJob(t, job, 1, "restore failed: connection refused")

	startOperator(t, operatorOptions{})
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseFailed))
}
