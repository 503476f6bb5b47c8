package faults_test

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
)

// An operator busy with 30 new BackupJobs, each with a run-now request, is
// SIGKILLed after its first CronJobs — throttled to 5 API requests/s so that
// the kill lands mid-work. A new process converges every BackupJob: one
// CronJob, one run-now Job, the run recorded, nothing duplicated.
func TestOperatorRestartedWhileReconciling(t *testing.T) {
	g := NewWithT(t)
	const n = 30
	slow := startBackup(t, "-slow", append([]string{"--kube-api-qps=5", "--kube-api-burst=5"}, shortLease...)...)
	ns := namespace(t)
	var bjs []*backupv1.BackupJob
	for i := range n {
		bj := withRunNow(backupJob(ns, fmt.Sprintf("db-%02d", i), yearly), "first")
		g.Expect(k8s.Create(ctx, bj)).To(Succeed())
		bjs = append(bjs, bj)
	}
	allCronJobs := func() int {
		l := &batchv1.CronJobList{}
		g.Expect(k8s.List(ctx, l, client.InNamespace(ns))).To(Succeed())
		return len(l.Items)
	}
	g.Eventually(allCronJobs).WithTimeout(2 * time.Minute).WithPolling(20 * time.Millisecond).Should(BeNumerically(">=", 3))
	g.Expect(slow.Kill()).To(Succeed())
	atKill := converged(g, bjs, 1)
	allJobs := &batchv1.JobList{}
	g.Expect(k8s.List(ctx, allJobs, client.InNamespace(ns))).To(Succeed())
	t.Logf("SIGKILL with %d CronJobs and %d Jobs for %d BackupJobs; %d not converged", allCronJobs(), len(allJobs.Items), n, len(atKill))
	g.Expect(atKill).NotTo(BeEmpty(), "the kill landed mid-work")

	fresh := startBackup(t, "-fresh", shortLease...)
	start := time.Now()
	g.Eventually(func() []string { return converged(g, bjs, 1) }).WithTimeout(3 * time.Minute).WithPolling(500 * time.Millisecond).Should(BeEmpty())
	t.Logf("the restarted operator converged %d BackupJobs %s after it was ready", n, time.Since(start).Round(100*time.Millisecond))
	g.Consistently(func() []string { return converged(g, bjs, 1) }).WithTimeout(5 * time.Second).Should(BeEmpty())
	g.Expect(allCronJobs()).To(Equal(n))
	g.Expect(acquiredLease(fresh)).To(BeTrue())
}
