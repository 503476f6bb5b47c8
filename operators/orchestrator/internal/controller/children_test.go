package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

// A verification whose RestoreJob is deleted before it finished has failed;
// a RestoreJob with the next verification's name that the plan did not
// create is never taken over: the plan is Stalled with NotControlled.
func TestVerificationRestoreJobDeletedOrForeign(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.Verification.EveryNBackups = new(int32(1))
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	backupSucceeded(t, bj, time.Now().Add(-2*time.Minute), artifact("20260102T180000.000Z"))
	rj := restoreJob(t, ns, "orders-verify-1")
	g.Eventually(func(g Gomega) platformv1.VerificationResult {
		return current(g, p).Status.LastVerification.Result
	}).WithTimeout(timeout).Should(Equal(platformv1.VerificationRunning))

	g.Expect(env.Client.Delete(ctx, rj)).To(Succeed())
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).Should(Equal("False/" + platformv1.VerificationFailedReason))
	g.Expect(current(g, p).Status.LastVerification.Message).To(ContainSubstring("was deleted before it finished"))

	// Someone else's RestoreJob carries the next verification's name.
	foreign := &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders-verify-2"},
		Spec: restorev1.RestoreJobSpec{
			Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders"}},
			Target: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "elsewhere", Port: 5432, Database: "x",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "c"}},
		},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	backupSucceeded(t, bj, time.Now().Add(-time.Minute), artifact("20260103T180000.000Z"))
	g.Eventually(condition(p, cairnv1.StalledCondition)).WithTimeout(timeout).Should(Equal("True/" + cairnv1.NotControlledReason))
	got := get(g, foreign)
	g.Expect(got.OwnerReferences).To(BeEmpty())
	g.Expect(got.Labels).NotTo(HaveKey(platformv1.PlanLabel))
	g.Expect(got.Spec.Target.Host).To(Equal("elsewhere"))
}
