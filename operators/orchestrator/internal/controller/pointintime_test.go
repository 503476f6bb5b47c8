package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/testing/testenv"
)

// pitrPlan is plan on a MariaDB with point-in-time recovery (maxLag 2m),
// a 5-minute rpo and every backup verified.
func pitrPlan(ns, name string) *platformv1.ProtectionPlan {
	p := plan(ns, name)
	p.Spec.Database.Engine = cairnv1.MySQLEngine
	p.Spec.Backup.PointInTime = &backupv1.PointInTimeSpec{
		MaxSegmentAge: &metav1.Duration{Duration: 30 * time.Second}, MaxLag: &metav1.Duration{Duration: 2 * time.Minute}}
	p.Spec.Objectives.RPO = metav1.Duration{Duration: 5 * time.Minute}
	p.Spec.Verification.EveryNBackups = ptr.To(int32(1))
	return p
}

// setBackupCondition sets condition typ of bj for its current generation.
func setBackupCondition(bj *backupv1.BackupJob, typ string, s metav1.ConditionStatus, reason, msg string) {
	c := metav1.Condition{Type: typ, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: bj.Generation, LastTransitionTime: metav1.Now()}
	for i := range bj.Status.Conditions {
		if bj.Status.Conditions[i].Type == typ {
			bj.Status.Conditions[i] = c
			return
		}
	}
	bj.Status.Conditions = append(bj.Status.Conditions, c)
}

// The plan's spec.backup.pointInTime reaches its BackupJob, an edit of the
// child's (or its removal) is reverted like any other field, and its
// removal from the plan removes it from the child.
func TestPointInTimeTemplatePassedAndDriftReverted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	p := pitrPlan(ns, "orders")
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	g.Expect(bj.Spec.PointInTime).To(Equal(p.Spec.Backup.PointInTime))

	for _, edit := range []func(*backupv1.BackupJob){
		func(b *backupv1.BackupJob) { b.Spec.PointInTime.MaxLag = &metav1.Duration{Duration: 10 * time.Minute} },
		func(b *backupv1.BackupJob) { b.Spec.PointInTime = nil },
	} {
		g.Eventually(func() error {
			cur := &backupv1.BackupJob{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bj), cur); err != nil {
				return err
			}
			edit(cur)
			return env.Client.Update(ctx, cur)
		}).WithTimeout(timeout).Should(Succeed())
		g.Eventually(func(g Gomega) *backupv1.PointInTimeSpec { return get(g, bj).Spec.PointInTime }).
			WithTimeout(timeout).Should(Equal(p.Spec.Backup.PointInTime))
	}

	// A change of the plan's reaches it.
	updatePlan(g, p, func(cur *platformv1.ProtectionPlan) {
		cur.Spec.Backup.PointInTime.MaxLag = &metav1.Duration{Duration: 3 * time.Minute}
	})
	g.Eventually(func(g Gomega) time.Duration { return get(g, bj).Spec.PointInTime.MaxLag.Duration }).
		WithTimeout(timeout).Should(Equal(3 * time.Minute))

	// Turned off on the plan: off on the child too (an unset template
	// field is otherwise left as the child has it).
	updatePlan(g, p, func(cur *platformv1.ProtectionPlan) { cur.Spec.Backup.PointInTime = nil })
	g.Eventually(func(g Gomega) *backupv1.PointInTimeSpec { return get(g, bj).Spec.PointInTime }).
		WithTimeout(timeout).Should(BeNil())
	g.Consistently(func(g Gomega) *backupv1.PointInTimeSpec { return get(g, bj).Spec.PointInTime }).
		WithTimeout(2 * time.Second).Should(BeNil())
}

// With point-in-time recovery the rpo must cover the archiver's maxLag;
// without it an rpo shorter than the time between two scheduled backups
// is admitted with a warning (backups may come from run-now requests).
// Point-in-time beside encryption is admitted (the archived log is
// encrypted too).
func TestPointInTimeRPOAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	startOperator(t, time.Now())
	ns := namespace(t)
	testenv.CheckRefused(t, env.Client, func() *platformv1.ProtectionPlan { return pitrPlan(ns, "bad") }, []testenv.Refusal[*platformv1.ProtectionPlan]{
		{Name: "rpo under maxLag", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Objectives.RPO = metav1.Duration{Duration: time.Minute}
		}, Want: "objectives.rpo: at least backup.pointInTime.maxLag"},
		{Name: "rpo under the default maxLag", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Backup.PointInTime.MaxLag = nil
			p.Spec.Backup.PointInTime.MaxSegmentAge = nil
			p.Spec.Objectives.RPO = metav1.Duration{Duration: 4 * time.Minute}
		}, Want: "objectives.rpo: at least backup.pointInTime.maxLag (default 5m)"},
		{Name: "maxLag under maxSegmentAge", Mutate: func(p *platformv1.ProtectionPlan) {
			p.Spec.Backup.PointInTime.MaxSegmentAge = &metav1.Duration{Duration: 5 * time.Minute}
		}, Want: "pointInTime.maxLag: at least maxSegmentAge"},
	})

	// Admitted with pointInTime; every-minute backups meet a 5-minute rpo
	// without it.
	ok := pitrPlan(ns, "pitr")
	ok.Spec.Verification.Checks = []restorev1.Check{{Name: "row-counts", RowCountsMatchBackup: true}}
	g.Expect(env.Client.Create(ctx, ok)).To(Succeed())
	often := pitrPlan(ns, "often")
	often.Spec.Backup.PointInTime = nil
	often.Spec.Backup.Schedule = "*/5 * * * *"
	g.Expect(env.Client.Create(ctx, often)).To(Succeed())

	// A 5-minute rpo with a nightly schedule and no point-in-time: admitted
	// (with a warning); ObjectivesMet reports it when missed.
	nightly := pitrPlan(ns, "nightly")
	nightly.Spec.Backup.PointInTime = nil
	g.Expect(env.Client.Create(ctx, nightly)).To(Succeed())
	// Point-in-time beside encryption: admitted.
	enc := pitrPlan(ns, "encrypted")
	enc.Spec.Backup.Encryption = &cairnv1.EncryptionSpec{Recipients: cairnv1.RecipientsSource{
		ConfigMapKeyRef: &cairnv1.KeySelector{Name: "dr-recipients", Key: "recipients"}}}
	enc.Spec.Verification.Encryption = &cairnv1.DecryptionSpec{IdentitySecretRef: cairnv1.KeySelector{Name: "dr-key", Key: "identity"}}
	g.Expect(env.Client.Create(ctx, enc)).To(Succeed())
}

// A point-in-time plan's verification restores to now minus maxLag (not
// before the newest backup: it waits until the archive vouches for a
// second after it), with the plan's SQL checks but not rowCountsMatchBackup;
// it succeeds only when the restore reached that second. The rpo is judged
// on the archive while PointInTimeReady is True, on the newest backup
// otherwise, and status.rpo says which. A gap in the archive, or a drill
// refused outside the window, fails RecoverabilityVerified naming it.
func TestPointInTimeVerification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	t0 := time.Now().Truncate(time.Second)
	clock := startOperator(t, t0)
	ns := namespace(t)
	p := pitrPlan(ns, "orders")
	p.Spec.Verification.Checks = []restorev1.Check{
		{Name: "has-orders", SQL: "select count(*) from orders", AtLeast: ptr.To(int64(1))},
		{Name: "row-counts", RowCountsMatchBackup: true},
	}
	g.Expect(env.Client.Create(ctx, p)).To(Succeed())
	bj := backupJobOf(t, p)
	lag := 2 * time.Minute

	// A backup that finished 2 s short of maxLag ago: no second after it
	// is vouched for yet, so no verification.
	base := artifact("20260102T180000.000Z")
	backupAt := t0.Add(-lag + 2*time.Second)
	updateBackupStatus(t, bj, func(cur *backupv1.BackupJob) {
		ts := metav1.NewTime(backupAt)
		cur.Status.LastBackupTime, cur.Status.LastSuccessfulTime = &ts, &ts
		cur.Status.LastResult, cur.Status.LastArtifact, cur.Status.Phase = backupv1.RunSucceeded, &base, backupv1.PhaseSucceeded
		setReady(cur, metav1.ConditionTrue, cairnv1.SucceededReason, "the last run succeeded")
		setBackupCondition(cur, backupv1.PointInTimeReadyCondition, metav1.ConditionTrue, backupv1.ArchivingReason, "keeps up")
		cur.Status.PointInTime = &backupv1.PointInTimeStatus{Earliest: &ts, Latest: &ts, Archiver: cur.ArchiverName()}
	})
	g.Eventually(func(g Gomega) platformv1.RPOBasis {
		r := current(g, p).Status.RPO
		g.Expect(r).NotTo(BeNil())
		return r.Basis
	}).WithTimeout(timeout).Should(Equal(platformv1.RPOBasisPointInTime))
	g.Consistently(func(g Gomega) []string { return restoreJobNames(g, ns) }).WithTimeout(time.Second).Should(BeEmpty())

	// The plan requeued itself for the second the archive vouches for.
	now := t0.Add(5 * time.Second)
	clock.SetTime(now)
	rj := restoreJob(t, ns, "orders-verify-1")
	target := now.Add(-lag).UTC()
	g.Expect(rj.Spec.Source.PointInTime).To(Equal(target.Format(time.RFC3339)))
	g.Expect(rj.Spec.Source.BackupJob.Name).To(Equal("orders"))
	g.Expect(rj.Spec.Source.BackupJob.Artifact).To(BeEmpty(), "the restore chooses the base before the time")
	g.Expect(rj.Spec.Checks).To(HaveLen(1))
	g.Expect(rj.Spec.Checks[0].Name).To(Equal("has-orders"))
	g.Expect(rj.Spec.DropTargetAfterChecks).To(BeTrue())

	// A restore that reports another second than asked fails the drill.
	finishPointInTime(t, rj, restorev1.PhaseSucceeded, "", target.Add(-time.Second), base)
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("False/" + platformv1.RecoveryPointMismatchReason))

	// The next drill reaches its second: verified, the recovery point is
	// the target.
	now = now.Add(time.Minute)
	clock.SetTime(now)
	verifyNow(g, p, "second")
	rj2 := restoreJob(t, ns, "orders-verify-2")
	target2 := now.Add(-lag).UTC()
	g.Expect(rj2.Spec.Source.PointInTime).To(Equal(target2.Format(time.RFC3339)))
	finishPointInTime(t, rj2, restorev1.PhaseSucceeded, "", target2, base)
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("True/" + platformv1.VerificationSucceededReason))
	cur := current(g, p)
	g.Expect(cur.Status.RecoveryPoint.Time).To(BeTemporally("==", target2))
	g.Expect(cur.Status.LastVerification.TargetTime.Time).To(BeTemporally("==", target2))
	g.Expect(cur.Status.LastVerification.RecoveryPointReached.Time).To(BeTemporally("==", target2))
	g.Expect(cur.Status.LastVerification.Artifact.Path).To(Equal(base.Path))
	g.Expect(cur.Status.LastVerification.Checks).To(HaveLen(1))

	// The rpo: met on the archive although the newest backup is an hour
	// old; judged on that backup (and violated) once the archiver falls
	// behind.
	now = t0.Add(time.Hour)
	clock.SetTime(now)
	updateBackupStatus(t, bj, func(cur *backupv1.BackupJob) {
		setBackupCondition(cur, backupv1.PointInTimeReadyCondition, metav1.ConditionFalse, backupv1.ArchiverNotReadyReason, "no ready replica")
	})
	g.Eventually(condition(p, platformv1.ObjectivesMetCondition)).WithTimeout(timeout).Should(Equal("False/" + platformv1.ObjectivesViolatedReason))
	cur = current(g, p)
	g.Expect(cur.Status.RPO.Basis).To(Equal(platformv1.RPOBasisBackup))
	g.Expect(cur.Status.RPO.RecoveryPoint.Time).To(BeTemporally("==", backupAt))
	g.Expect(conditionMessage(cur, platformv1.ObjectivesMetCondition)).To(ContainSubstring(
		"judged on the newest backup: the point-in-time archive does not count while PointInTimeReady is False (ArchiverNotReady"))
	labels := map[string]string{"namespace": ns, "name": "orders", "basis": "Backup"}
	g.Eventually(func(g Gomega) float64 {
		return testenv.MetricValue(g, "cairn_protectionplan_rpo_basis", labels)
	}).WithTimeout(timeout).Should(Equal(1.0))

	updateBackupStatus(t, bj, func(cur *backupv1.BackupJob) {
		setBackupCondition(cur, backupv1.PointInTimeReadyCondition, metav1.ConditionTrue, backupv1.ArchivingReason, "keeps up")
	})
	g.Eventually(condition(p, platformv1.ObjectivesMetCondition)).WithTimeout(timeout).Should(Equal("True/" + platformv1.ObjectivesMetReason))
	cur = current(g, p)
	g.Expect(cur.Status.RPO.Basis).To(Equal(platformv1.RPOBasisPointInTime))
	g.Expect(cur.Status.RPO.MaxLag.Duration).To(Equal(lag))
	g.Expect(cur.Status.RPO.RecoveryPoint.Time).To(BeTemporally("==", backupAt), "the newest archived change as read")
	labels["basis"] = "PointInTime"
	g.Eventually(func(g Gomega) float64 {
		return testenv.MetricValue(g, "cairn_protectionplan_rpo_basis", labels)
	}).WithTimeout(timeout).Should(Equal(1.0))

	// A gap in the archive fails RecoverabilityVerified, naming it.
	updateBackupStatus(t, bj, func(cur *backupv1.BackupJob) {
		setBackupCondition(cur, backupv1.PointInTimeReadyCondition, metav1.ConditionFalse, backupv1.ArchiveGapReason,
			"the archive has 1 gap(s): mysql-bin.000007 is missing")
		cur.Status.PointInTime.Gaps = []string{"mysql-bin.000007 is missing"}
	})
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("False/" + platformv1.ArchiveGapReason))
	g.Expect(conditionMessage(current(g, p), platformv1.RecoverabilityVerifiedCondition)).To(ContainSubstring("mysql-bin.000007 is missing"))
	g.Expect(condition(p, cairnv1.ReadyCondition)(g)).To(HavePrefix("False/"))

	// The gap closed (a new base after it), a drill refused outside the
	// window fails it with that reason.
	updateBackupStatus(t, bj, func(cur *backupv1.BackupJob) {
		setBackupCondition(cur, backupv1.PointInTimeReadyCondition, metav1.ConditionTrue, backupv1.ArchivingReason, "keeps up")
		cur.Status.PointInTime.Gaps = nil
	})
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("True/" + platformv1.VerificationSucceededReason))
	verifyNow(g, p, "third")
	rj3 := restoreJob(t, ns, "orders-verify-3")
	finishPointInTime(t, rj3, restorev1.PhaseFailed, restorev1.RestoreJobOutsideWindowReason, time.Time{}, base)
	g.Eventually(condition(p, platformv1.RecoverabilityVerifiedCondition)).WithTimeout(timeout).
		Should(Equal("False/" + platformv1.OutsideRecoverableWindowReason))
}

// finishPointInTime reports point-in-time restore rj finished as the
// restore operator would: reached (when set) and the base used, the
// checks passed; a failure with reason.
func finishPointInTime(t *testing.T, rj *restorev1.RestoreJob, phase restorev1.Phase, reason string, reached time.Time, base cairnv1.Artifact) {
	t.Helper()
	if phase == restorev1.PhaseFailed {
		finishRestoreReason(t, rj, phase, 5*time.Second, reason, "2026-12-05T10:00:00Z is after the newest archived change")
		return
	}
	NewWithT(t).Eventually(func() error {
		cur := &restorev1.RestoreJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(rj), cur); err != nil {
			return err
		}
		start := metav1.NewTime(time.Now().Add(-5 * time.Second).Truncate(time.Second))
		end := metav1.NewTime(start.Add(5 * time.Second))
		cur.Status.ObservedGeneration = cur.Generation
		cur.Status.Phase = phase
		cur.Status.StartTime, cur.Status.CompletionTime = &start, &end
		cur.Status.RecoveryPoint = &metav1.Time{Time: reached}
		cur.Status.Artifact = &base
		cur.Status.Checks = []restorev1.CheckResult{{Name: "has-orders", Passed: true, Value: "3"}}
		cur.Status.Conditions = append(cur.Status.Conditions, metav1.Condition{Type: cairnv1.ReadyCondition,
			Status: metav1.ConditionTrue, Reason: cairnv1.SucceededReason, Message: "restored",
			ObservedGeneration: cur.Generation, LastTransitionTime: metav1.Now()})
		return env.Client.Status().Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
}

// verifyNow asks for a verification now (the verify-now annotation).
func verifyNow(g Gomega, p *platformv1.ProtectionPlan, id string) {
	updatePlan(g, p, func(cur *platformv1.ProtectionPlan) {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[platformv1.VerifyNowAnnotation] = id
	})
}

func conditionMessage(p *platformv1.ProtectionPlan, typ string) string {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}
