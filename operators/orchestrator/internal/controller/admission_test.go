package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	platformv1 "cairn.dev/apis/platform/v1"
)

// Bad plans are refused at admission with a message that names the field
// and the fix: by the CRD's own rules (an install without webhooks refuses
// them too) or by the validating webhook for what CEL cannot check.
func TestAdmissionRefusesBadPlans(t *testing.T) {
	startOperator(t, time.Now())
	ns := namespace(t)
	for _, tc := range []struct {
		name   string
		mutate func(*platformv1.ProtectionPlan)
		want   string
	}{
		{"scratch is the protected database", func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.RestoreInto.Host = p.Spec.Database.Host
			p.Spec.Verification.RestoreInto.Database = p.Spec.Database.Database
		}, "the scratch database is the protected database"},
		{"scratch is the protected database, port spelled out and host in capitals", func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.RestoreInto.Host = "ORDERS-DB.shop.svc"
			p.Spec.Verification.RestoreInto.Port = 5432
			p.Spec.Verification.RestoreInto.Database = p.Spec.Database.Database
		}, "the scratch database is the protected database"},
		{"scratch is the protected database, host with a trailing dot (webhook)", func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.RestoreInto.Host = p.Spec.Database.Host + "."
			p.Spec.Verification.RestoreInto.Database = p.Spec.Database.Database
		}, "spec.verification.restoreInto: Forbidden: the scratch database orders on orders-db.shop.svc.:5432 is the protected database"},
		{"both everyNBackups and schedule", func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.Schedule = ptr.To("0 4 * * 0")
		}, "verification: set exactly one of everyNBackups or schedule"},
		{"a backup schedule that does not parse (webhook)", func(p *platformv1.ProtectionPlan) {
			p.Spec.Backup.Schedule = "61 * * * *"
		}, "spec.backup.schedule"},
		{"an unknown time zone (webhook)", func(p *platformv1.ProtectionPlan) {
			p.Spec.TimeZone = "Mars/Olympus_Mons"
		}, "spec.timeZone"},
		{"an RPO under a minute (webhook)", func(p *platformv1.ProtectionPlan) {
			p.Spec.Objectives.RPO = metav1.Duration{Duration: 30 * time.Second}
		}, "spec.objectives.rpo: Invalid value: \"30s\": must be at least one minute"},
		{"a sql check without an expected result", func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.Checks = []platformv1.VerificationCheck{{Name: "orders", SQL: "select count(*) from orders"}}
		}, "a sql check needs an expected result"},
		{"a name too long for the RestoreJobs", func(p *platformv1.ProtectionPlan) {
			p.Name = "orders-database-of-the-shop-in-production"
		}, "metadata.name: at most 40 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p := plan(ns, "bad")
			tc.mutate(p)
			err := env.Client.Create(context.Background(), p)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
}

// A plan with checks is admitted with a warning: RestoreJob cannot run
// checks yet, so such verifications are reported as failed, never as
// verified.
func TestChecksAreNotCountedAsVerifiedUntilRun(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "checked")
	p.Spec.Verification.Checks = []platformv1.VerificationCheck{{Name: "orders", SQL: "select count(*) from orders", AtLeast: ptr.To(int64(1))}}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	backupSucceeded(t, bj, time.Now().Add(-time.Minute), artifact("20260102T180000.000Z"))
	rj := restoreJob(t, ns, "checked-verify-1")
	finishRestore(t, rj, "Succeeded", 5*time.Second, "restored")
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).Should(Equal("False/" + platformv1.VerificationFailedReason))
	cur := current(g, p)
	g.Expect(cur.Status.LastVerification.Message).To(ContainSubstring("checks orders were not run"))
	g.Expect(cur.Status.RecoveryPoint).To(BeNil())
}
