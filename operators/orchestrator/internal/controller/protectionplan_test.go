package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/orchestrator/internal/controller"
)

// The plan's BackupJob is created once, from the plan's template, owned by
// the plan; a change made to it by hand is reverted; a change of the plan
// reaches it.
func TestBackupJobCreatedOnceAndDriftReverted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.DeletionPolicy = backupv1.DeletionPolicyDelete
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	// Defaults and the finalizer come from the mutating webhook.
	g.Expect(p.Finalizers).To(ContainElement(platformv1.CleanupFinalizer))
	g.Expect(p.Spec.Database.Port).To(Equal(int32(5432)))
	// retentionDays has no default (one or the other with retention); the
	// child has the 7 days written out, so that an edit of it is drift.
	g.Expect(p.Spec.Backup.RetentionDays).To(BeZero())
	g.Expect(*p.Spec.Verification.SuccessfulHistoryLimit).To(Equal(int32(3)))

	bj := backupJobOf(t, p)
	g.Expect(metav1.IsControlledBy(bj, current(g, p))).To(BeTrue())
	g.Expect(bj.Labels).To(HaveKeyWithValue(platformv1.PlanLabel, "orders"))
	g.Expect(bj.Spec.Database).To(Equal(p.Spec.Database))
	g.Expect(bj.Spec.Schedule).To(Equal("0 2 * * *"))
	g.Expect(bj.Spec.TimeZone).To(Equal("Asia/Shanghai"))
	g.Expect(bj.Spec.DeletionPolicy).To(Equal(backupv1.DeletionPolicyDelete))
	g.Expect(bj.Spec.Storage.PVC.ClaimName).To(Equal("backups"))
	g.Expect(bj.Spec.RetentionDays).To(Equal(backupv1.DefaultRetentionDays))
	uid := bj.UID

	// No condition from the child yet: Unknown, and the plan is not Ready.
	g.Eventually(condition(p, platformv1.BackupHealthyCondition)).WithTimeout(timeout).
		Should(Equal("Unknown/" + conditions.NotYetReportedReason))
	g.Expect(condition(p, cairnv1.ReadyCondition)(g)).To(HavePrefix("False/"))
	g.Expect(current(g, p).Status.Phase).To(Equal(platformv1.PhasePending))

	// Drift: someone edits the child; the plan's template wins.
	bj.Spec.Schedule = "*/5 * * * *"
	bj.Spec.DeletionPolicy = backupv1.DeletionPolicyRetain
	bj.Spec.RetentionDays = 30
	g.Expect(env.Client.Update(ctx, bj)).To(Succeed())
	g.Eventually(func(g Gomega) string { return get(g, bj).Spec.Schedule }).WithTimeout(timeout).Should(Equal("0 2 * * *"))
	g.Expect(bj.Spec.DeletionPolicy).To(Equal(backupv1.DeletionPolicyDelete))
	g.Expect(bj.Spec.RetentionDays).To(Equal(backupv1.DefaultRetentionDays))

	// A child suspended by hand (a boolean the template leaves false) is
	// resumed.
	g.Eventually(func() error {
		cur := &backupv1.BackupJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bj), cur); err != nil {
			return err
		}
		cur.Spec.Suspend = true
		return env.Client.Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())
	g.Eventually(func(g Gomega) bool { return get(g, bj).Spec.Suspend }).WithTimeout(timeout).Should(BeFalse())

	// A change of the plan reaches the child.
	updatePlan(g, p, func(pp *platformv1.ProtectionPlan) { pp.Spec.Backup.Schedule = "30 3 * * *" })
	g.Eventually(func(g Gomega) string { return get(g, bj).Spec.Schedule }).WithTimeout(timeout).Should(Equal("30 3 * * *"))
	// The plan's own suspend reaches it too (and is not drift then).
	cur := updatePlan(g, p, func(pp *platformv1.ProtectionPlan) { pp.Spec.Backup.Suspend = true })
	g.Eventually(func(g Gomega) bool { return get(g, bj).Spec.Suspend }).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(func(g Gomega) int64 { return current(g, p).Status.ObservedGeneration }).WithTimeout(timeout).Should(Equal(cur.Generation))
	g.Expect(get(g, bj).Spec.Suspend).To(BeTrue())

	// Created once: still the same one BackupJob, and no RestoreJob (no backup yet).
	list := &backupv1.BackupJobList{}
	g.Expect(env.Client.List(ctx, list)).To(Succeed())
	var mine []backupv1.BackupJob
	for _, b := range list.Items {
		if b.Namespace == ns {
			mine = append(mine, b)
		}
	}
	g.Expect(mine).To(HaveLen(1))
	g.Expect(mine[0].UID).To(Equal(uid))
	g.Consistently(func(g Gomega) []string { return restoreJobNames(g, ns) }).WithTimeout(time.Second).Should(BeEmpty())
}

// A BackupJob the plan did not create is never adopted or changed: the plan
// is Stalled with NotControlled, and recovers once it is gone.
func TestForeignBackupJobRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	foreign := &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orders"},
		Spec: backupv1.BackupJobSpec{Database: protectedDB(), Schedule: "0 5 * * *",
			Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "other"}}},
	}
	g.Expect(env.Client.Create(ctx, foreign)).To(Succeed())
	p := plan(ns, "orders")
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())

	g.Eventually(condition(p, cairnv1.StalledCondition)).WithTimeout(timeout).Should(Equal("True/" + cairnv1.NotControlledReason))
	g.Expect(condition(p, cairnv1.ReadyCondition)(g)).To(Equal("False/" + cairnv1.NotControlledReason))
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Warning/" + cairnv1.NotControlledReason))
	got := get(g, foreign)
	g.Expect(got.OwnerReferences).To(BeEmpty())
	g.Expect(got.Labels).NotTo(HaveKey(platformv1.PlanLabel))
	g.Expect(got.Spec.Schedule).To(Equal("0 5 * * *"))

	// Once the foreign object is gone, the plan creates its own.
	g.Expect(env.Client.Delete(ctx, foreign)).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, foreign)).WithTimeout(timeout).Should(BeTrue())
	// The plan is not woken by the deletion of an object it does not own;
	// touching the plan (any spec change) brings it back.
	updatePlan(g, p, func(cur *platformv1.ProtectionPlan) {
		cur.Spec.Backup.RetentionDays = 8
	})
	bj := backupJobOf(t, p)
	g.Expect(metav1.IsControlledBy(bj, current(g, p))).To(BeTrue())
	g.Eventually(condition(p, cairnv1.StalledCondition)).WithTimeout(timeout).Should(Equal("missing"))
}

// A verification restores exactly the artifact of the backup it verifies,
// pinned when it was decided — never the newest by the time it runs; the
// children's conditions roll up into the plan; history limits hold.
func TestVerificationPinsArtifactAndConditionsRollUp(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	clock := startOperator(t, t0)
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.Verification.SuccessfulHistoryLimit = ptr.To(int32(1))
	p.Spec.Objectives.RTO = &metav1.Duration{Duration: time.Hour}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)

	// The first successful backup is verified at once.
	a1 := artifact("20260102T180000.000Z")
	backupSucceeded(t, bj, t0.Add(-time.Hour), a1)
	g.Eventually(condition(p, platformv1.BackupHealthyCondition)).WithTimeout(timeout).Should(Equal("True/" + cairnv1.SucceededReason))
	rj1 := restoreJob(t, ns, "orders-verify-1")
	g.Expect(metav1.IsControlledBy(rj1, current(g, p))).To(BeTrue())
	g.Expect(rj1.Labels).To(HaveKeyWithValue(platformv1.PlanLabel, "orders"))
	g.Expect(rj1.Spec.Source.BackupJob.Name).To(Equal("orders"))
	g.Expect(rj1.Spec.Source.BackupJob.Artifact).To(Equal(a1.Path), "the artifact is pinned by name")
	g.Expect(rj1.Spec.Target.Host).To(Equal("scratch-db.verify.svc"))
	g.Expect(rj1.Spec.Target.Database).To(Equal("orders_verify"))
	g.Expect(rj1.Spec.Target.Engine).To(Equal(cairnv1.PostgresEngine))
	g.Expect(*rj1.Spec.ActiveDeadlineSeconds).To(Equal(int64(3600)))
	g.Eventually(func(g Gomega) platformv1.Phase { return current(g, p).Status.Phase }).WithTimeout(timeout).Should(Equal(platformv1.PhaseVerifying))
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Normal/" + "VerificationStarted"))

	// A newer backup lands before the verification finishes: the running
	// verification still restores a1, and no second one starts (every 2nd).
	a2 := artifact("20260103T180000.000Z")
	backupSucceeded(t, bj, t0.Add(-30*time.Minute), a2)
	g.Eventually(func(g Gomega) int32 { return current(g, p).Status.BackupsSinceVerification }).WithTimeout(timeout).Should(Equal(int32(1)))
	g.Expect(get(g, rj1).Spec.Source.BackupJob.Artifact).To(Equal(a1.Path))
	g.Expect(current(g, p).Status.LastVerification.Artifact).To(Equal(a1))

	finishRestore(t, rj1, restorev1.PhaseSucceeded, 42*time.Second, "restored")
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).Should(Equal("True/" + platformv1.VerificationSucceededReason))
	cur := current(g, p)
	g.Expect(cur.Status.RecoveryPoint.Time).To(BeTemporally("==", t0.Add(-time.Hour)), "the recovery point is a1's time, not a2's")
	g.Expect(cur.Status.RestoreDuration.Duration).To(Equal(42 * time.Second))
	g.Expect(cur.Status.LastSuccessfulVerification.RestoreJob).To(Equal("orders-verify-1"))
	g.Eventually(condition(p, platformv1.ObjectivesMetCondition)).WithTimeout(timeout).Should(Equal("True/" + platformv1.ObjectivesMetReason))
	g.Eventually(condition(p, cairnv1.ReadyCondition)).WithTimeout(timeout).Should(Equal("True/" + cairnv1.SucceededReason))
	g.Expect(current(g, p).Status.Phase).To(Equal(platformv1.PhaseProtected))
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Normal/" + platformv1.VerificationSucceededReason))
	labels := map[string]string{"namespace": ns, "name": "orders"}
	g.Eventually(func(g Gomega) float64 {
		return testenv.MetricValue(g, "cairn_protectionplan_recovery_point_timestamp_seconds", labels)
	}).WithTimeout(timeout).Should(Equal(float64(t0.Add(-time.Hour).Unix())))
	g.Expect(testenv.MetricValue(g, "cairn_protectionplan_restore_duration_seconds", labels)).To(Equal(42.0))
	g.Expect(testenv.MetricValue(g, "cairn_protectionplan_verification_succeeded", labels)).To(Equal(1.0))

	// The child's condition rolls up: a failing backup makes the plan not Ready.
	updateBackupStatus(t, bj, func(cur *backupv1.BackupJob) {
		setReady(cur, metav1.ConditionFalse, backupv1.BackupJobLastRunFailedReason, "the last run failed")
	})
	g.Eventually(condition(p, platformv1.BackupHealthyCondition)).WithTimeout(timeout).Should(Equal("False/" + backupv1.BackupJobLastRunFailedReason))
	g.Eventually(condition(p, cairnv1.ReadyCondition)).WithTimeout(timeout).Should(Equal("False/" + backupv1.BackupJobLastRunFailedReason))
	g.Expect(current(g, p).Status.Phase).To(Equal(platformv1.PhaseAtRisk))
	// A child condition that disappears is Unknown, never Ready.
	updateBackupStatus(t, bj, func(cur *backupv1.BackupJob) { cur.Status.Conditions = nil })
	g.Eventually(condition(p, platformv1.BackupHealthyCondition)).WithTimeout(timeout).Should(Equal("Unknown/" + conditions.NotYetReportedReason))
	g.Expect(condition(p, cairnv1.ReadyCondition)(g)).To(HavePrefix("False/"))

	// The second backup since the verification: verify it (a3), and it fails.
	a3 := artifact("20260104T180000.000Z")
	clock.SetTime(t0.Add(time.Minute))
	backupSucceeded(t, bj, t0, a3)
	g.Eventually(condition(p, platformv1.BackupHealthyCondition)).WithTimeout(timeout).Should(Equal("True/" + cairnv1.SucceededReason))
	rj2 := restoreJob(t, ns, "orders-verify-2")
	g.Expect(rj2.Spec.Source.BackupJob.Artifact).To(Equal(a3.Path))
	finishRestore(t, rj2, restorev1.PhaseFailed, 10*time.Second, "restore Job failed: checksum mismatch")
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).Should(Equal("False/" + platformv1.VerificationFailedReason))
	g.Eventually(condition(p, cairnv1.ReadyCondition)).WithTimeout(timeout).Should(Equal("False/" + platformv1.VerificationFailedReason))
	g.Expect(current(g, p).Status.Phase).To(Equal(platformv1.PhaseAtRisk))
	g.Expect(current(g, p).Status.RecoveryPoint.Time).To(BeTemporally("==", t0.Add(-time.Hour)), "a failed verification does not move the recovery point")
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Warning/" + platformv1.VerificationFailedReason))
	g.Eventually(func(g Gomega) float64 {
		return testenv.MetricValue(g, "cairn_protectionplan_verification_succeeded", labels)
	}).WithTimeout(timeout).Should(Equal(0.0))

	// Two more backups, a third verification that succeeds: only one
	// succeeded RestoreJob is kept (successfulHistoryLimit 1); the failed
	// one stays (failedHistoryLimit 3).
	backupSucceeded(t, bj, t0.Add(20*time.Second), artifact("20260105T180000.000Z"))
	g.Eventually(func(g Gomega) int32 { return current(g, p).Status.BackupsSinceVerification }).WithTimeout(timeout).Should(Equal(int32(1)))
	a5 := artifact("20260106T180000.000Z")
	backupSucceeded(t, bj, t0.Add(40*time.Second), a5)
	rj3 := restoreJob(t, ns, "orders-verify-3")
	g.Expect(rj3.Spec.Source.BackupJob.Artifact).To(Equal(a5.Path))
	finishRestore(t, rj3, restorev1.PhaseSucceeded, 20*time.Second, "restored")
	g.Eventually(condition(p, cairnv1.ReadyCondition)).WithTimeout(timeout).Should(Equal("True/" + cairnv1.SucceededReason))
	g.Expect(current(g, p).Status.RecoveryPoint.Time).To(BeTemporally("==", t0.Add(40*time.Second)))
	g.Eventually(func(g Gomega) []string { return restoreJobNames(g, ns) }).WithTimeout(timeout).
		Should(ConsistOf("orders-verify-2", "orders-verify-3"))
}

// Objectives are evaluated on the controller's clock: when the newest
// backup becomes older than the RPO, ObjectivesMet turns False by itself —
// the plan requeued itself for that moment; nothing else wakes it.
func TestObjectivesViolatedWhenNewestBackupOlderThanRPO(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	backupAt := time.Now().Add(-48 * time.Hour).Truncate(time.Second)
	rpo := 26 * time.Hour
	// Three seconds before the RPO is violated.
	clock := startOperator(t, backupAt.Add(rpo-3*time.Second))
	ns := namespace(t)
	p := plan(ns, "orders")
	p.Spec.Objectives.RPO = metav1.Duration{Duration: rpo}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	backupSucceeded(t, bj, backupAt, artifact("20260101T000000.000Z"))

	g.Eventually(condition(p, platformv1.ObjectivesMetCondition)).WithTimeout(timeout).Should(Equal("True/" + platformv1.ObjectivesMetReason))
	// Time passes on the controller's clock; no object changes.
	clock.SetTime(backupAt.Add(rpo + time.Minute))
	g.Eventually(condition(p, platformv1.ObjectivesMetCondition)).WithTimeout(timeout).Should(Equal("False/" + platformv1.ObjectivesViolatedReason))
	cur := current(g, p)
	var msg string
	for _, c := range cur.Status.Conditions {
		if c.Type == platformv1.ObjectivesMetCondition {
			msg = c.Message
		}
	}
	g.Expect(msg).To(ContainSubstring("rpo: the newest successful backup is 26h1m0s old, more than 26h0m0s"))
	g.Expect(cur.Status.Phase).To(Equal(platformv1.PhaseAtRisk))
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Warning/ObjectivesViolated"))
	labels := map[string]string{"namespace": ns, "name": "orders"}
	g.Expect(testenv.MetricValue(g, "cairn_protectionplan_last_backup_timestamp_seconds", labels)).To(Equal(float64(backupAt.Unix())))
	g.Expect(testenv.MetricValue(g, "cairn_protectionplan_rpo_seconds", labels)).To(Equal(rpo.Seconds()))

	// A new backup meets the RPO again.
	clock.SetTime(backupAt.Add(rpo + 2*time.Minute))
	backupSucceeded(t, bj, backupAt.Add(rpo+90*time.Second), artifact("20260102T020000.000Z"))
	g.Eventually(condition(p, platformv1.ObjectivesMetCondition)).WithTimeout(timeout).Should(Equal("True/" + platformv1.ObjectivesMetReason))
	g.Eventually(eventReasons(p)).WithTimeout(timeout).Should(ContainElement("Normal/ObjectivesMet"))
}

// Deleting the plan deletes its BackupJob and every verification RestoreJob,
// then the plan itself: nothing is left.
func TestDeletionLeavesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := plan(ns, "orders")
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	backupSucceeded(t, bj, time.Now().Add(-time.Minute), artifact("20260102T180000.000Z"))
	rj := restoreJob(t, ns, "orders-verify-1")

	g.Expect(env.Client.Delete(ctx, current(g, p))).To(Succeed())
	g.Eventually(testenv.Gone(env.Client, rj)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(testenv.Gone(env.Client, bj)).WithTimeout(timeout).Should(BeTrue())
	g.Eventually(testenv.Gone(env.Client, p)).WithTimeout(timeout).Should(BeTrue())
	g.Expect(restoreJobNames(g, ns)).To(BeEmpty())
}

// A new plan's first status already reflects its BackupJob: the pass that
// creates the child goes on with the created object (its create event is
// dropped: one pass per plan at creation), so no version of the plan ever
// says the BackupJob is missing.
func TestFirstStatusReflectsCreatedBackupJob(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	startOperator(t, time.Now())
	ns := namespace(t)
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &platformv1.ProtectionPlanList{}, client.InNamespace(ns))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()
	p := plan(ns, "orders")
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch ended before the plan's status reflected its BackupJob")
			}
			pp, isPlan := ev.Object.(*platformv1.ProtectionPlan)
			if !isPlan {
				continue
			}
			bh := apimeta.FindStatusCondition(pp.Status.Conditions, platformv1.BackupHealthyCondition)
			if bh != nil && bh.Reason == platformv1.BackupJobMissingReason {
				t.Fatalf("a status write said the BackupJob is missing: %+v", bh)
			}
			if bh != nil && pp.Status.ObservedGeneration == pp.Generation {
				g.Expect(bh.Reason).To(Equal(conditions.NotYetReportedReason))
				return
			}
		case <-ctx.Done():
			t.Fatal("the plan's status did not reflect its BackupJob in time")
		}
	}
}

// The plan's own BackupJob, as the API server returns it after the create
// (CRD defaults applied: status.observedGeneration -1), is recognised as
// the operator's own create, so its create event does not wake the plan a
// second time; once the backup operator wrote a status it is not.
func TestBackupJobAsCreatedWithAPIDefaults(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	ns := namespace(t)
	p := plan(ns, "orders")
	bj := controller.DesiredBackupJob(p)
	g.Expect(env.Client.Create(ctx, bj)).To(Succeed())
	got := &backupv1.BackupJob{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(bj), got)).To(Succeed())
	g.Expect(controller.BackupJobAsCreated(got)).To(BeTrue(), "status as created: %+v", got.Status)
	got.Status.ObservedGeneration = got.Generation
	g.Expect(env.Client.Status().Update(ctx, got)).To(Succeed())
	g.Expect(controller.BackupJobAsCreated(got)).To(BeFalse())
}
