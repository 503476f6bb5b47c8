package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// With a verification schedule, the first backup is verified at once; the
// next verification waits for the schedule, read in the plan's time zone,
// and then restores the newest backup.
func TestScheduledVerification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	clock := startOperator(t, t0)
	ns := namespace(t)
	p := plan(ns, "weekly")
	p.Spec.Verification.EveryNBackups = nil
	p.Spec.Verification.Schedule = ptr.To("0 4 * * 0") // Sundays 04:00 in Asia/Shanghai
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	backupSucceeded(t, bj, t0.Add(-time.Hour), artifact("20260102T180000.000Z"))
	rj1 := restoreJob(t, ns, "weekly-verify-1")
	finishRestore(t, rj1, restorev1.PhaseSucceeded, 5*time.Second, "restored")
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).Should(Equal("True/" + platformv1.VerificationSucceededReason))

	var next time.Time
	g.Eventually(func(g Gomega) {
		n := current(g, p).Status.NextVerificationTime
		g.Expect(n).NotTo(BeNil())
		next = n.Time
	}).WithTimeout(timeout).Should(Succeed())
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	g.Expect(err).NotTo(HaveOccurred())
	local := next.In(shanghai)
	g.Expect(local.Weekday()).To(Equal(time.Sunday))
	g.Expect([]int{local.Hour(), local.Minute()}).To(Equal([]int{4, 0}))
	g.Expect(next).To(BeTemporally(">", get(g, rj1).Status.StartTime.Time))
	g.Expect(next).To(BeTemporally("<=", get(g, rj1).Status.StartTime.Add(7*24*time.Hour)))

	// Newer backups do not start a verification before the schedule fires.
	a2 := artifact("20260103T180000.000Z")
	backupSucceeded(t, bj, t0, a2)
	g.Eventually(func(g Gomega) int32 { return current(g, p).Status.BackupsSinceVerification }).WithTimeout(timeout).Should(Equal(int32(1)))
	g.Consistently(func(g Gomega) []string { return restoreJobNames(g, ns) }).WithTimeout(time.Second).Should(ConsistOf("weekly-verify-1"))

	// The schedule fires (on the controller's clock): the newest backup is verified.
	clock.SetTime(next.Add(time.Minute))
	updatePlan(g, p, func(cur *platformv1.ProtectionPlan) {
		cur.Annotations = map[string]string{"test.cairn.dev/wake": "1"}
	})
	rj2 := restoreJob(t, ns, "weekly-verify-2")
	g.Expect(rj2.Spec.Source.BackupJob.Artifact).To(Equal(a2.Path))
}
