package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testing/testenv"
)

// Bad plans are refused at admission with a message that names the field
// and the fix: by the CRD's own rules (an install without webhooks refuses
// them too) or by the validating webhook for what CEL cannot check.
func TestAdmissionRefusesBadPlans(t *testing.T) {
	startOperator(t, time.Now())
	ns := namespace(t)
	testenv.CheckRefused(t, env.Client, func() *platformv1.ProtectionPlan { return plan(ns, "bad") }, []testenv.Refusal[*platformv1.ProtectionPlan]{
		{Name: "scratch is the protected database", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.RestoreInto.Host = p.Spec.Database.Host
			p.Spec.Verification.RestoreInto.Database = p.Spec.Database.Database
		}, Want: "the scratch database is the protected database"},
		{Name: "scratch is the protected database, port spelled out and host in capitals", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.RestoreInto.Host = "ORDERS-DB.shop.svc"
			p.Spec.Verification.RestoreInto.Port = 5432
			p.Spec.Verification.RestoreInto.Database = p.Spec.Database.Database
		}, Want: "the scratch database is the protected database"},
		{Name: "scratch is the protected database, host with a trailing dot (webhook)", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.RestoreInto.Host = p.Spec.Database.Host + "."
			p.Spec.Verification.RestoreInto.Database = p.Spec.Database.Database
		}, Want: "spec.verification.restoreInto: Forbidden: the scratch database orders on orders-db.shop.svc.:5432 is the protected database"},
		{Name: "both everyNBackups and schedule", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.Schedule = ptr.To("0 4 * * 0")
		}, Want: "verification: set exactly one of everyNBackups or schedule"},
		{Name: "a backup schedule that does not parse (webhook)", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Backup.Schedule = "61 * * * *"
		}, Want: "spec.backup.schedule"},
		{Name: "an unknown time zone (webhook)", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.TimeZone = "Mars/Olympus_Mons"
		}, Want: "spec.timeZone"},
		{Name: "an RPO under a minute (webhook)", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Objectives.RPO = metav1.Duration{Duration: 30 * time.Second}
		}, Want: "spec.objectives.rpo: Invalid value: \"30s\": must be at least one minute"},
		{Name: "a sql check without an expected result", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.Checks = []restorev1.Check{{Name: "orders", SQL: "select count(*) from orders"}}
		}, Want: "a sql check needs an expected result"},
		{Name: "a check running a shell", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.Checks = []restorev1.Check{{Name: "env", SQL: `\! cat /proc/1/environ`, Equals: new("x")}}
		}, Want: "spec.verification.checks[0].sql"},
		{Name: "a name too long for the RestoreJobs", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Name = "orders-database-of-the-shop-in-production"
		}, Want: "metadata.name: at most 40 characters"},
	})
}

// A plan's checks go to its verification RestoreJobs (with the drop flag
// for the scratch database). A verification counts only when every check is
// reported passed: unreported checks (an agent older than the checks) or a
// failed check end it Failed. The RestoreJob status is what the restore
// operator writes (operators/restore TestChecksReportedIntoStatus): a failed
// check makes the RestoreJob Failed with reason ChecksFailed and its results
// in status.checks; the e2e test TestProtectionPlanVerifiesWithChecks runs
// the whole chain with real agents.
func TestChecksCountOnlyWhenReportedPassed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "checked")
	p.Spec.Verification.EveryNBackups = ptr.To(int32(1))
	p.Spec.Verification.Checks = []restorev1.Check{
		{Name: "has-orders", SQL: "select count(*) from orders", AtLeast: ptr.To(int64(1))},
		{Name: "row-counts", RowCountsMatchBackup: true},
	}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)

	backupSucceeded(t, bj, time.Now().Add(-3*time.Minute), artifact("20260102T180000.000Z"))
	rj := restoreJob(t, ns, "checked-verify-1")
	g.Expect(rj.Spec.Checks).To(Equal(p.Spec.Verification.Checks))
	g.Expect(rj.Spec.DropTargetAfterChecks).To(BeTrue())
	finishRestore(t, rj, restorev1.PhaseSucceeded, 5*time.Second, "restored")
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).Should(Equal("False/" + platformv1.VerificationFailedReason))
	cur := current(g, p)
	g.Expect(cur.Status.LastVerification.Message).To(ContainSubstring("checks has-orders, row-counts were not run"))
	g.Expect(cur.Status.RecoveryPoint).To(BeNil())

	// Reported, one failed: the restore operator fails the RestoreJob
	// (ChecksFailed) and keeps the results.
	backupSucceeded(t, bj, time.Now().Add(-2*time.Minute), artifact("20260103T180000.000Z"))
	rj = restoreJob(t, ns, "checked-verify-2")
	failedRows := restorev1.CheckResult{Name: "row-counts", Passed: false, Value: "2 tables, 23 rows", Message: "1 table(s) differ: public.orders: 11 restored, 12 recorded"}
	reportChecks(t, rj, []restorev1.CheckResult{{Name: "has-orders", Passed: true, Value: "12"}, failedRows})
	finishRestoreReason(t, rj, restorev1.PhaseFailed, 5*time.Second, restorev1.RestoreJobChecksFailedReason,
		"restored artifact x into postgres scratch:5432/orders_verify in 5s, but 1 of 2 check(s) failed: row-counts (1 table(s) differ: public.orders: 11 restored, 12 recorded)")
	g.Eventually(func(g Gomega) string { return current(g, p).Status.LastVerification.Message }).WithTimeout(timeout).
		Should(ContainSubstring("check(s) failed: row-counts"))
	g.Expect(condition(p, platformv1.RecoverabilityVerifiedCondition)(g)).To(Equal("False/" + platformv1.VerificationFailedReason))
	cur = current(g, p)
	g.Expect(cur.Status.LastVerification.Result).To(Equal(platformv1.VerificationFailed))
	g.Expect(cur.Status.LastVerification.Checks).To(ContainElement(failedRows))
	g.Expect(cur.Status.RecoveryPoint).To(BeNil())
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Warning/VerificationFailed"))

	// Reported, all passed: verified, the results in status.
	backupSucceeded(t, bj, time.Now().Add(-time.Minute), artifact("20260104T180000.000Z"))
	rj = restoreJob(t, ns, "checked-verify-3")
	reportChecks(t, rj, []restorev1.CheckResult{{Name: "has-orders", Passed: true, Value: "12"}, {Name: "row-counts", Passed: true}})
	finishRestore(t, rj, restorev1.PhaseSucceeded, 5*time.Second, "restored")
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).Should(Equal("True/" + platformv1.VerificationSucceededReason))
	cur = current(g, p)
	g.Expect(cur.Status.LastSuccessfulVerification.Checks).To(HaveLen(2))
	g.Expect(cur.Status.RecoveryPoint).NotTo(BeNil())
}

// reportChecks writes rj's check results, as the restore operator would
// once the agent reports them.
func reportChecks(t *testing.T, rj *restorev1.RestoreJob, results []restorev1.CheckResult) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &restorev1.RestoreJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(rj), cur); err != nil {
			return err
		}
		cur.Status.Checks = results
		return env.Client.Status().Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
}
