package faults_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/e2e/cluster"
	"cairn.dev/e2e/fixtures"
)

// A run whose agent exits with its configuration-error code (2) is not
// retried: the Job's podFailurePolicy fails it after its first pod, although
// maxRetries allows three more, and the BackupJob records one failure. The
// exit code comes from kwok's Stages (a configuration the webhooks admit
// but the real agent rejects cannot be made on demand), so this test lives
// in the kwok-only faults package.
func TestConfigErrorFailsAtOnce(t *testing.T) {
	g := NewWithT(t)
	startBackup(t, "")
	ns := namespace(t)
	const maxRetries = 3
	bj := fixtures.BackupJob(ns, "misconfigured", yearly, cluster.ConfigErrorHost, maxRetries)
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	fixtures.SetRunNow(g, env.Client, bj, "first")
	jobsOf := func(g Gomega, bj *backupv1.BackupJob, extra client.MatchingLabels) []batchv1.Job {
		return fixtures.Jobs(g, env.Client, bj, extra)
	}
	get := func(g Gomega, bj *backupv1.BackupJob) func() backupv1.BackupJobStatus {
		return func() backupv1.BackupJobStatus { return fixtures.Get(g, env.Client, bj).Status }
	}

	var job batchv1.Job
	g.Eventually(func() []batchv1.Job { return jobsOf(g, bj, nil) }).WithTimeout(30 * time.Second).Should(HaveLen(1))
	started := time.Now()
	// No backoff: the Job fails as soon as its one pod has.
	g.Eventually(func() bool {
		job = jobsOf(g, bj, nil)[0]
		return fixtures.JobHas(job, batchv1.JobFailed)
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(BeTrue())
	t.Logf("Job %s failed %s after it was seen", job.Name, time.Since(started).Round(time.Second))
	g.Expect(ptr.Deref(job.Spec.BackoffLimit, -1)).To(BeEquivalentTo(maxRetries), "retries were allowed")
	g.Expect(job.Spec.PodFailurePolicy).NotTo(BeNil())
	var failedCond batchv1.JobCondition
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed {
			failedCond = c
		}
	}
	g.Expect(failedCond.Reason).To(Equal(batchv1.JobReasonPodFailurePolicy))
	g.Expect(failedCond.Message).To(ContainSubstring("exit code 2"))
	g.Expect(job.Status.Failed).To(BeEquivalentTo(1), "one failed pod, no retry")

	pods := &corev1.PodList{}
	g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"batch.kubernetes.io/job-name": job.Name})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1), "exactly one pod ran")
	g.Expect(pods.Items[0].Status.Phase).To(Equal(corev1.PodFailed))
	g.Expect(pods.Items[0].Status.ContainerStatuses[0].State.Terminated.ExitCode).To(BeEquivalentTo(2))

	var st backupv1.BackupJobStatus
	g.Eventually(func() backupv1.RunResult { st = get(g, bj)(); return st.LastResult }).
		WithTimeout(30 * time.Second).Should(Equal(backupv1.RunFailed))
	g.Expect(st.Phase).To(Equal(backupv1.PhaseFailed))
	g.Expect(st.ConsecutiveFailures).To(BeEquivalentTo(1))
	g.Expect(st.LastRunName).To(Equal(job.Name))
	g.Expect(st.LastFailureTime).NotTo(BeNil())

	var warning string
	g.Eventually(func() string {
		evs := &corev1.EventList{}
		g.Expect(env.Client.List(ctx, evs, client.InNamespace(ns))).To(Succeed())
		for _, e := range evs.Items {
			if e.InvolvedObject.Name == bj.Name && e.InvolvedObject.Kind == "BackupJob" && e.Type == corev1.EventTypeWarning && e.Reason == "BackupFailed" {
				warning = e.Message
			}
		}
		return warning
	}).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
	t.Logf("Warning Event: %s", warning)
	g.Expect(warning).To(ContainSubstring(batchv1.JobReasonPodFailurePolicy), "the Job's failure reason reaches the Event")
	g.Expect(warning).To(ContainSubstring("injected configuration error"), "the agent's reason reaches the Event")
	g.Expect(warning).To(ContainSubstring("failed without retries"), "the Event says the run was not retried")
}
