package faults_test

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
)

// kube-apiserver is killed and started again while the operator runs: the
// same operator process — not restarted — re-establishes its watches and
// keeps reconciling: a BackupJob created afterwards gets its CronJob, a
// CronJob deleted afterwards is recreated, a run-now request afterwards runs
// and is recorded. The outage is shorter than the renew deadline, so the
// operator keeps its lease; a longer outage makes it exit on purpose (a
// leader that cannot renew must stop) and its Deployment restarts it.
func TestAPIServerRestarted(t *testing.T) {
	g := NewWithT(t)
	op := startBackup(t, "-apiserver", "--leader-lease-duration=30s", "--leader-renew-deadline=20s", "--leader-retry-period=2s")
	ns := namespace(t)
	before := backupJob(ns, "before", yearly)
	g.Expect(k8s.Create(ctx, before)).To(Succeed())
	g.Eventually(func() int { return cronJobs(g, ns, before.Name) }).WithTimeout(time.Minute).Should(Equal(1))
	g.Eventually(func() backupv1.Phase { return getBJ(g, before).Status.Phase }).WithTimeout(30 * time.Second).Should(Equal(backupv1.PhaseScheduled))
	pid := op.Cmd.Process.Pid

	down, err := env.Cluster.RestartComponent(ctx, "kube-apiserver")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("kube-apiserver down for %s (SIGKILL to ready)", down.Round(time.Millisecond))
	recovered := time.Now()

	after := backupJob(ns, "after", yearly)
	g.Eventually(func() error {
		err := k8s.Create(ctx, after.DeepCopy())
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}).WithTimeout(time.Minute).Should(Succeed())
	g.Eventually(func() int { return cronJobs(g, ns, after.Name) }).WithTimeout(time.Minute).Should(Equal(1))
	g.Eventually(func() backupv1.Phase { return getBJ(g, after).Status.Phase }).WithTimeout(30 * time.Second).Should(Equal(backupv1.PhaseScheduled))
	t.Logf("a BackupJob created after the restart was reconciled %s after kube-apiserver was ready", time.Since(recovered).Round(100*time.Millisecond))

	cjs := &batchv1.CronJobList{}
	g.Expect(k8s.List(ctx, cjs, client.InNamespace(ns), client.MatchingLabels{"backup.cairn.dev/backupjob": before.Name})).To(Succeed())
	g.Expect(cjs.Items).To(HaveLen(1))
	old := cjs.Items[0]
	g.Expect(k8s.Delete(ctx, &old)).To(Succeed())
	g.Eventually(func() []string {
		l := &batchv1.CronJobList{}
		g.Expect(k8s.List(ctx, l, client.InNamespace(ns), client.MatchingLabels{"backup.cairn.dev/backupjob": before.Name})).To(Succeed())
		var uids []string
		for _, c := range l.Items {
			uids = append(uids, string(c.UID))
		}
		return uids
	}).WithTimeout(time.Minute).Should(And(HaveLen(1), Not(ContainElement(string(old.UID)))), "the deleted CronJob is recreated")

	setRunNow(g, after, "after-restart")
	g.Eventually(func() []string { return converged(g, []*backupv1.BackupJob{after}, 1) }).WithTimeout(time.Minute).Should(BeEmpty())

	g.Expect(op.Exited()).To(BeFalse(), "the operator process is still the one started before the restart")
	g.Expect(op.Cmd.Process.Pid).To(Equal(pid))
	g.Expect(strings.ToLower(op.Tail(100000))).NotTo(ContainSubstring("leader election lost"))
}
