package faults_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/e2e/install"
)

// Two replicas with leader election; the leader is SIGKILLed (no lease
// release) two seconds before its BackupJob's CronJob fires, and a run-now
// request arrives while nobody leads. The CronJob controller runs the
// scheduled backup while there is no leader; the other replica takes over
// once the lease expires, records that run and starts the run-now Job — each
// run recorded exactly once, no second CronJob, no second Job. Webhooks go
// through the operator's Service (a proxy to the ready replicas), so
// admission keeps working while a replica dies.
func TestLeaderKilledOtherTakesOver(t *testing.T) {
	g := NewWithT(t)
	// A 10 s lease leaves the CronJob controller's run ~8 s or more to finish
	// while nobody leads.
	lease10s := []string{"--leader-lease-duration=10s", "--leader-renew-deadline=7s", "--leader-retry-period=1s"}
	replicas := []*install.Operator{startBackup(t, "-0", lease10s...), startBackup(t, "-1", lease10s...)}

	ns := namespace(t)
	bj := backupJob(ns, "minutely", "* * * * *")
	g.Expect(k8s.Create(ctx, bj)).To(Succeed())
	g.Eventually(func() int { return cronJobs(g, ns, bj.Name) }).WithTimeout(time.Minute).Should(Equal(1))
	g.Eventually(func() backupv1.Phase { return getBJ(g, bj).Status.Phase }).WithTimeout(30 * time.Second).Should(Equal(backupv1.PhaseScheduled))

	var leader, other *install.Operator
	g.Eventually(func() int {
		leader, other = nil, nil
		n := 0
		for _, r := range replicas {
			if acquiredLease(r) {
				leader, n = r, n+1
			} else {
				other = r
			}
		}
		return n
	}).WithTimeout(30*time.Second).Should(Equal(1), "exactly one replica acquired the lease")
	lease := func() *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: leaseNamespace, Name: leaseName}, l)).To(Succeed())
		return l
	}
	leaderID := ptr.Deref(lease().Spec.HolderIdentity, "")
	g.Expect(leaderID).NotTo(BeEmpty())

	// Kill the leader 2 s before the next minute, when the CronJob fires.
	untilMinute := func() time.Duration { return time.Until(time.Now().Truncate(time.Minute).Add(time.Minute)) }
	g.Eventually(untilMinute).WithTimeout(70 * time.Second).WithPolling(20 * time.Millisecond).
		Should(And(BeNumerically("<=", 2*time.Second), BeNumerically(">", time.Second)))
	before := names(jobs(g, ns, bj.Name)) // runs of earlier minutes, recorded by the old leader
	fireAt := time.Now().Truncate(time.Minute).Add(time.Minute)
	killed := time.Now()
	g.Expect(leader.Kill()).To(Succeed())
	setRunNow(g, bj, "during-failover") // admitted by the surviving replica's webhook

	g.Eventually(func() string { return ptr.Deref(lease().Spec.HolderIdentity, "") }).WithTimeout(time.Minute).
		WithPolling(100 * time.Millisecond).ShouldNot(Or(Equal(leaderID), BeEmpty()))
	takeover := time.Since(killed)
	t.Logf("takeover: %s after SIGKILL of the leader (lease duration 10s, retry period 1s)", takeover.Round(100*time.Millisecond))
	// The replica logs "successfully acquired lease" after its Lease update
	// returned, so the log line can trail the Lease the test just read.
	g.Eventually(func() bool { return acquiredLease(other) }).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).
		Should(BeTrue(), "the surviving replica holds the lease")
	acquired := lease().Spec.AcquireTime.Time

	// Exactly the runs of before, the scheduled one at fireAt and the run-now
	// one (later minutes may add runs: they are left out); all finished; each
	// recorded exactly once.
	want := len(before) + 2
	upToFire := func() []batchv1.Job {
		var out []batchv1.Job
		for _, j := range jobs(g, ns, bj.Name) {
			if j.Labels["backup.cairn.dev/run"] == "run-now" || !scheduledAt(j).After(fireAt) {
				out = append(out, j)
			}
		}
		return out
	}
	g.Eventually(func() []string { return names(upToFire()) }).WithTimeout(2 * time.Minute).Should(HaveLen(want))
	all := upToFire()
	var scheduled, runNow string
	for _, j := range all {
		switch {
		case j.Labels["backup.cairn.dev/run"] == "run-now":
			runNow = j.Name
		case scheduledAt(j).Equal(fireAt):
			scheduled = j.Name
		}
	}
	g.Expect(scheduled).NotTo(BeEmpty(), "the CronJob fired at %s while nobody led: %v", fireAt, names(all))
	g.Expect(runNow).NotTo(BeEmpty(), "the run-now request made while nobody led started a Job: %v", names(all))
	g.Eventually(func() map[string]int { return recordedRuns(g, ns) }).WithTimeout(2 * time.Minute).
		Should(And(HaveKeyWithValue(scheduled, 1), HaveKeyWithValue(runNow, 1)))
	for _, j := range all {
		if j.Name == scheduled {
			g.Expect(j.Status.CompletionTime).NotTo(BeNil())
			t.Logf("scheduled run finished %s after its minute; the new leader acquired the lease %s after it",
				j.Status.CompletionTime.Time.Sub(fireAt), acquired.Sub(fireAt).Round(time.Millisecond))
			g.Expect(j.Status.CompletionTime.Time.Before(acquired)).To(BeTrue(),
				"the scheduled run (done %s) finished while nobody led (new leader since %s)", j.Status.CompletionTime.Time, acquired)
		}
	}
	g.Consistently(func() string {
		runs := recordedRuns(g, ns)
		bad := ""
		for _, j := range jobs(g, ns, bj.Name) {
			if runs[j.Name] > 1 || (finished(j) && runs[j.Name] == 0 && slices.Contains(names(all), j.Name)) {
				bad += fmt.Sprintf("%s recorded %d times; ", j.Name, runs[j.Name])
			}
		}
		return fmt.Sprintf("cronjobs=%d jobs=%d %s", cronJobs(g, ns, bj.Name), len(upToFire()), bad)
	}).WithTimeout(5 * time.Second).Should(Equal(fmt.Sprintf("cronjobs=1 jobs=%d ", want)))
	g.Expect(getBJ(g, bj).Status.LastResult).To(Equal(backupv1.RunSucceeded))
}
