package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// everyNBackups counts backups since the last verification started: a
// backup below the count is not verified; lowering everyNBackups to the
// count makes a verification due at once, of the newest backup.
func TestLoweringEveryNBackupsVerifiesNewestAtOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.Verification.EveryNBackups = new(int32(3))
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)

	a1 := artifact("20260102T180000.000Z")
	backupSucceeded(t, bj, time.Now().Add(-3*time.Minute), a1)
	rj1 := restoreJob(t, ns, "orders-verify-1")
	finishRestore(t, rj1, restorev1.PhaseSucceeded, 5*time.Second, "restored")
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("True/" + platformv1.VerificationSucceededReason))

	a2 := artifact("20260103T180000.000Z")
	backupSucceeded(t, bj, time.Now().Add(-2*time.Minute), a2)
	g.Eventually(func(g Gomega) int32 { return current(g, p).Status.BackupsSinceVerification }).WithTimeout(timeout).Should(Equal(int32(1)))
	g.Consistently(func(g Gomega) []string { return restoreJobNames(g, ns) }).WithTimeout(2*time.Second).
		Should(ConsistOf("orders-verify-1"), "1 of 3 backups: not due")

	updatePlan(g, p, func(cur *platformv1.ProtectionPlan) {
		cur.Spec.Verification.EveryNBackups = new(int32(1))
	})
	rj2 := restoreJob(t, ns, "orders-verify-2")
	g.Expect(rj2.Spec.Source.BackupJob.Artifact).To(Equal(a2.Path))
	g.Eventually(func(g Gomega) string { return current(g, p).Status.LastVerification.Message }).WithTimeout(timeout).
		Should(ContainSubstring("1 successful backup(s) since the last verification (everyNBackups 1)"))
	g.Expect(current(g, p).Status.BackupsSinceVerification).To(Equal(int32(0)))
}

// A verification RestoreJob that reports Stalled before it started (e.g. its
// scratch credentials Secret is missing) rolls up: the verification has
// failed, RecoverabilityVerified is False with the child's message, Ready is
// False, and a Warning Event says so.
func TestStalledVerificationRestoreJobRollsUp(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	backupSucceeded(t, bj, time.Now().Add(-time.Minute), artifact("20260102T180000.000Z"))
	rj := restoreJob(t, ns, "orders-verify-1")
	g.Eventually(func(g Gomega) platformv1.VerificationResult {
		return current(g, p).Status.LastVerification.Result
	}).WithTimeout(timeout).Should(Equal(platformv1.VerificationRunning))

	msg := `Secret "scratch-credentials" not found`
	g.Eventually(func() error {
		cur := &restorev1.RestoreJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rj), cur); err != nil {
			return err
		}
		cur.Status.ObservedGeneration = cur.Generation
		for _, typ := range []string{cairnv1.StalledCondition, cairnv1.ReadyCondition} {
			s := metav1.ConditionTrue
			if typ == cairnv1.ReadyCondition {
				s = metav1.ConditionFalse
			}
			cur.Status.Conditions = append(cur.Status.Conditions, metav1.Condition{Type: typ, Status: s,
				Reason: cairnv1.ReferenceNotFoundReason, Message: msg, ObservedGeneration: cur.Generation, LastTransitionTime: metav1.Now()})
		}
		return env.Client.Status().Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())

	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("False/" + platformv1.VerificationFailedReason))
	lv := current(g, p).Status.LastVerification
	g.Expect(lv.Result).To(Equal(platformv1.VerificationFailed))
	g.Expect(lv.Message).To(Equal("RestoreJob orders-verify-1 cannot start: " + msg))
	g.Expect(lv.CompletionTime).NotTo(BeNil())
	g.Eventually(condition(p, cairnv1.ReadyCondition)).WithTimeout(timeout).Should(Equal("False/" + platformv1.VerificationFailedReason))
	g.Expect(current(g, p).Status.Phase).To(Equal(platformv1.PhaseAtRisk))
	g.Expect(current(g, p).Status.RecoveryPoint).To(BeNil())
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Warning/" + platformv1.VerificationFailedReason))
}

// The verify-now annotation starts one verification of the newest backup
// per distinct value, even when everyNBackups is not reached; the value
// acted on is recorded, so the same value never starts a second one.
func TestVerifyNowVerifiesNewestOncePerRequest(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.Verification.EveryNBackups = new(int32(100))
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	backupSucceeded(t, bj, time.Now().Add(-3*time.Minute), artifact("20260102T180000.000Z"))
	finishRestore(t, restoreJob(t, ns, "orders-verify-1"), restorev1.PhaseSucceeded, 5*time.Second, "restored")
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("True/" + platformv1.VerificationSucceededReason))
	a2 := artifact("20260103T180000.000Z")
	backupSucceeded(t, bj, time.Now().Add(-2*time.Minute), a2)
	g.Eventually(func(g Gomega) int32 { return current(g, p).Status.BackupsSinceVerification }).WithTimeout(timeout).Should(Equal(int32(1)))

	annotate := func(id string) {
		g.Eventually(func() error {
			cur := &platformv1.ProtectionPlan{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
				return err
			}
			if cur.Annotations == nil {
				cur.Annotations = map[string]string{}
			}
			cur.Annotations[platformv1.VerifyNowAnnotation] = id
			return env.Client.Update(ctx, cur)
		}).WithTimeout(timeout).Should(Succeed())
	}
	annotate("req-1")
	rj2 := restoreJob(t, ns, "orders-verify-2")
	g.Expect(rj2.Spec.Source.BackupJob.Artifact).To(Equal(a2.Path))
	g.Eventually(func(g Gomega) string { return current(g, p).Status.LastVerifyNowRequest }).WithTimeout(timeout).Should(Equal("req-1"))
	g.Expect(current(g, p).Status.LastVerification.Message).To(ContainSubstring(`the verify-now request "req-1"`))
	finishRestore(t, rj2, restorev1.PhaseSucceeded, 5*time.Second, "restored")
	g.Eventually(func(g Gomega) platformv1.VerificationResult { return current(g, p).Status.LastVerification.Result }).
		WithTimeout(timeout).Should(Equal(platformv1.VerificationSucceeded))
	g.Consistently(func(g Gomega) []string { return restoreJobNames(g, ns) }).WithTimeout(2*time.Second).
		Should(ConsistOf("orders-verify-1", "orders-verify-2"), "the same request never starts a second verification")
	annotate("req-2")
	g.Expect(restoreJob(t, ns, "orders-verify-3").Spec.Source.BackupJob.Artifact).To(Equal(a2.Path))
}
