package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	platformv1 "cairn.dev/apis/platform/v1"
)

// The plan's spec.backup.parallelism reaches its BackupJob and its
// verification RestoreJobs (a parallel verification restore is what makes
// the plan's restore time drop), and its removal from the plan removes it
// from the BackupJob.
func TestParallelismReachesBackupAndVerification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.Backup.Parallelism = ptr.To(int32(3))
	p.Spec.Verification.EveryNBackups = ptr.To(int32(1))
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	g.Expect(bj.Spec.Parallelism).To(Equal(ptr.To(int32(3))))
	backupSucceeded(t, bj, time.Now().Add(-time.Minute), artifact("20260102T180000.000Z"))
	g.Expect(restoreJob(t, ns, "orders-verify-1").Spec.Parallelism).To(Equal(ptr.To(int32(3))))

	updatePlan(g, p, func(cur *platformv1.ProtectionPlan) { cur.Spec.Backup.Parallelism = nil })
	g.Eventually(func(g Gomega) *int32 { return get(g, bj).Spec.Parallelism }).WithTimeout(timeout).Should(BeNil())
}
