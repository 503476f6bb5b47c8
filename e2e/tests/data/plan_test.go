package data_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/libs/conditions"
)

// A ProtectionPlan on the real PostgreSQL: its BackupJob runs at a
// wall-clock minute of Asia/Shanghai (hours away in any other zone), the
// orchestrator verifies that backup by a restore into a scratch database,
// where the agent runs the plan's checks and then drops the database it
// created; the plan reports RecoverabilityVerified=True with the measured
// restore duration and the checks' results. A check that fails on the next
// backup turns RecoverabilityVerified False, with a Warning Event.
func TestProtectionPlanVerifiesWithChecks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := postgres()
	ns := namespace(t, e)
	src, scratch := dbName(ns, "shop"), dbName(ns, "shop_verify")
	g.Expect(e.seed(src, orders)).To(Succeed())
	want, err := e.tables(src)
	g.Expect(err).NotTo(HaveOccurred())

	shanghai, err := time.LoadLocation("Asia/Shanghai")
	g.Expect(err).NotTo(HaveOccurred())
	at := time.Now().Add(75 * time.Second).In(shanghai).Truncate(time.Minute)
	schedule := fmt.Sprintf("%d %d * * *", at.Minute(), at.Hour())
	t.Logf("backup schedule %q in Asia/Shanghai: %s (%s UTC)", schedule, at.Format("15:04"), at.UTC().Format("15:04"))

	db := cairnv1.DatabaseRef{Engine: e.name, Host: "127.0.0.1", Port: int32(e.port), Database: src,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}}
	plan := &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"},
		Spec: platformv1.ProtectionPlanSpec{
			Database: db,
			TimeZone: "Asia/Shanghai",
			// In parts: the verification loads them over 2 connections
			// into the scratch database it creates.
			Backup: platformv1.BackupTemplate{Schedule: schedule, RetentionDays: 7, MaxRetries: ptr.To[int32](1),
				ActiveDeadlineSeconds: ptr.To[int64](600), Storage: s3Storage(ns), Parallelism: ptr.To[int32](2)},
			Verification: platformv1.VerificationSpec{
				EveryNBackups: ptr.To[int32](1),
				RestoreInto: platformv1.ScratchDatabase{Host: "127.0.0.1", Port: int32(e.port), Database: scratch,
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "db"}},
				Checks: []restorev1.Check{
					{Name: "has-orders", SQL: "select count(*) from orders", AtLeast: ptr.To[int64](1)},
					{Name: "orders-exact", SQL: "select count(*) from orders", Equals: ptr.To(fmt.Sprint(orders))},
					{Name: "row-counts", RowCountsMatchBackup: true},
				},
				TimeoutSeconds: ptr.To[int64](600),
			},
			Objectives:     platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}, RTO: &metav1.Duration{Duration: time.Hour}},
			DeletionPolicy: backupv1.DeletionPolicyDelete,
		},
	}
	g.Expect(env.Client.Create(ctx, plan)).To(Succeed())

	// The scheduled run at the Shanghai minute backs up; its backup is verified.
	bj := &backupv1.BackupJob{}
	bj.Namespace, bj.Name = ns, plan.Name
	st := waitSucceeded(t, bj, at.Add(-time.Second), 4*time.Minute)
	g.Expect(st.LastSuccessfulTime.Time).To(BeTemporally(">=", at.Add(-time.Second)), "not before the Shanghai minute")
	g.Expect(fixtures.Jobs(g, env.Client, bj, client.MatchingLabels{"backup.cairn.dev/run": "scheduled"})).NotTo(BeEmpty(),
		"the CronJob's scheduled run made the backup")

	cur := waitPlanCondition(t, plan, platformv1.RecoverabilityVerifiedCondition, 4*time.Minute)
	rv := conditions.Get(cur, platformv1.RecoverabilityVerifiedCondition)
	lv := cur.Status.LastVerification
	g.Expect(rv.Status).To(Equal(metav1.ConditionTrue), "RecoverabilityVerified: %s; last verification %+v", rv.Message, lv)
	g.Expect(lv.Result).To(Equal(platformv1.VerificationSucceeded))
	g.Expect(lv.Artifact.Path).To(Equal(st.LastArtifact.Path), "the verified artifact is the backup's")
	g.Expect(lv.Artifact.Path).To(HaveSuffix(".pgdump.parts"), "spec.backup.parallelism: a multi-part artifact")
	g.Expect(lv.RestoreDuration).NotTo(BeNil())
	g.Expect(cur.Status.RestoreDuration).To(Equal(lv.RestoreDuration))
	g.Expect(cur.Status.RecoveryPoint).NotTo(BeNil())
	var rows int64
	for _, tb := range want {
		rows += tb.Rows
	}
	g.Expect(lv.Checks).To(ConsistOf(
		restorev1.CheckResult{Name: "has-orders", Passed: true, Value: fmt.Sprint(orders)},
		restorev1.CheckResult{Name: "orders-exact", Passed: true, Value: fmt.Sprint(orders)},
		restorev1.CheckResult{Name: "row-counts", Passed: true, Value: fmt.Sprintf("%d table(s), %d row(s) recorded", len(want), rows)}))
	t.Logf("verified %s: restore took %s (RestoreJob %s); checks %+v", lv.Artifact.Path, lv.RestoreDuration.Duration, lv.RestoreJob, lv.Checks)

	rj := &restorev1.RestoreJob{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lv.RestoreJob}, rj)).To(Succeed())
	g.Expect(rj.Status.Phase).To(Equal(restorev1.PhaseSucceeded))
	g.Expect(rj.Status.TargetCreated).To(BeTrue(), "the verification created the scratch database")
	g.Expect(rj.Status.TargetDropped).To(BeTrue(), "and dropped it after the checks")
	g.Expect(lv.RestoreDuration.Duration).To(Equal(rj.Status.CompletionTime.Sub(rj.Status.StartTime.Time).Round(time.Second)))
	exists, err := e.exists(scratch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "the scratch database is gone")
	got, err := e.tables(src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "the protected database is untouched")
	g.Eventually(planEvents(plan)).WithTimeout(time.Minute).Should(ContainElement("Normal/VerificationSucceeded"))

	// A check that cannot hold: the next backup's verification fails.
	g.Eventually(func() error {
		p := &platformv1.ProtectionPlan{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(plan), p); err != nil {
			return err
		}
		p.Spec.Verification.Checks = append(p.Spec.Verification.Checks,
			restorev1.Check{Name: "orders-few", SQL: "select count(*) from orders", AtMost: ptr.To[int64](1)})
		return env.Client.Update(ctx, p)
	}).WithTimeout(30 * time.Second).Should(Succeed())
	before := st.LastSuccessfulTime.Time
	fixtures.SetRunNow(g, env.Client, bj, "second")
	waitSucceeded(t, bj, before, 3*time.Minute)
	g.Eventually(func(g Gomega) platformv1.VerificationResult {
		p := &platformv1.ProtectionPlan{}
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(plan), p)).To(Succeed())
		g.Expect(p.Status.LastVerification).NotTo(BeNil())
		g.Expect(p.Status.LastVerification.RestoreJob).NotTo(Equal(lv.RestoreJob))
		cur = p
		return p.Status.LastVerification.Result
	}).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Equal(platformv1.VerificationFailed))
	rv = conditions.Get(cur, platformv1.RecoverabilityVerifiedCondition)
	g.Expect(rv.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(rv.Reason).To(Equal(platformv1.VerificationFailedReason))
	lv2 := cur.Status.LastVerification
	g.Expect(lv2.Message).To(ContainSubstring("orders-few"))
	g.Expect(lv2.Checks).To(ContainElement(restorev1.CheckResult{Name: "orders-few", Passed: false, Value: fmt.Sprint(orders),
		Message: fmt.Sprintf("%d is more than 1", orders)}))
	g.Eventually(planEvents(plan)).WithTimeout(time.Minute).Should(ContainElement("Warning/VerificationFailed"))
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: lv2.RestoreJob}, rj)).To(Succeed())
	g.Expect(rj.Status.Phase).To(Equal(restorev1.PhaseFailed))
	g.Expect(conditions.Get(rj, cairnv1.ReadyCondition).Reason).To(Equal(restorev1.RestoreJobChecksFailedReason))
	g.Expect(rj.Status.TargetDropped).To(BeTrue(), "the scratch database is dropped after failed checks too")
	exists, err = e.exists(scratch)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse())
	t.Logf("failed verification: %s", lv2.Message)
}

// waitPlanCondition waits until the plan's condition typ is True or False
// and returns the plan.
func waitPlanCondition(t *testing.T, plan *platformv1.ProtectionPlan, typ string, timeout time.Duration) *platformv1.ProtectionPlan {
	t.Helper()
	p := &platformv1.ProtectionPlan{}
	NewWithT(t).Eventually(func(g Gomega) metav1.ConditionStatus {
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(plan), p)).To(Succeed())
		c := conditions.Get(p, typ)
		g.Expect(c).NotTo(BeNil())
		return c.Status
	}).WithTimeout(timeout).WithPolling(time.Second).Should(BeElementOf(metav1.ConditionTrue, metav1.ConditionFalse))
	return p
}

// planEvents returns "Type/Reason" of each Event about the plan.
func planEvents(plan *platformv1.ProtectionPlan) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(context.Background(), list, client.InNamespace(plan.Namespace))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Kind == "ProtectionPlan" && e.Regarding.Name == plan.Name {
				out = append(out, e.Type+"/"+e.Reason)
			}
		}
		return out
	}
}
