package controller

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/operators/orchestrator/internal/planspec"
)

// Point-in-time recovery in a plan (spec.backup.pointInTime, docs/pitr.md):
// the rpo is judged on the archive while the BackupJob's PointInTimeReady
// is True, a verification restores to now minus maxLag, and a gap in the
// archive fails RecoverabilityVerified.

// pointInTimeOn reports whether the plan's backups archive the change log.
func pointInTimeOn(spec *platformv1.ProtectionPlanSpec) bool { return spec.Backup.PointInTime != nil }

// maxLag is the archiver's maxLag: how far behind it may be and still be
// ready. Everything written before now minus maxLag is archived while
// PointInTimeReady is True.
func maxLag(spec *platformv1.ProtectionPlanSpec) time.Duration {
	return planspec.MaxLag(spec.Backup.PointInTime)
}

// drillTarget is the second a point-in-time verification restores to,
// decided at now: now minus maxLag (what the archiver vouches for), to the
// second. It is never before the newest successful backup, so the restore
// starts from that base (or a newer one) and replays its log: until then
// (a backup that just finished) ok is false and the verification waits
// until notBefore.
func drillTarget(spec *platformv1.ProtectionPlanSpec, lb *platformv1.BackupRecord, now time.Time) (target, notBefore time.Time, ok bool) {
	lag := maxLag(spec)
	target = now.Add(-lag).Truncate(time.Second)
	if lb != nil && lb.SuccessfulTime != nil && target.Before(lb.SuccessfulTime.Time) {
		return time.Time{}, lb.SuccessfulTime.Add(lag).Truncate(time.Second).Add(time.Second), false
	}
	return target, time.Time{}, true
}

// verificationChecks are the checks a verification's RestoreJob runs: all
// of the plan's, except that a point-in-time verification leaves out
// rowCountsMatchBackup — the row counts the base recorded describe the
// dump, not the database after its log was replayed to the target time.
// The replay is checked instead by the recovery point reached
// (readPointInTime) and by the plan's SQL checks.
func verificationChecks(spec *platformv1.ProtectionPlanSpec, lv *platformv1.VerificationRecord) []restorev1.Check {
	if lv.TargetTime == nil {
		return spec.Verification.Checks
	}
	var out []restorev1.Check
	for _, c := range spec.Verification.Checks {
		if !c.RowCountsMatchBackup {
			out = append(out, c)
		}
	}
	return out
}

// readPointInTime checks what a succeeded point-in-time verification
// reached: the RestoreJob's recovery point must be the target second. It
// records the base the restore used as lv's artifact. It returns a failure
// message, or "".
func readPointInTime(lv *platformv1.VerificationRecord, rj *restorev1.RestoreJob) string {
	if a := rj.Status.Artifact; a != nil && a.Path != "" {
		lv.Artifact = *a
	}
	lv.RecoveryPointReached = rj.Status.RecoveryPoint.DeepCopy()
	want := lv.TargetTime.UTC().Truncate(time.Second)
	switch got := rj.Status.RecoveryPoint; {
	case got == nil:
		return fmt.Sprintf("the point-in-time restore succeeded but RestoreJob %s reported no recovery point; %s was asked for",
			rj.Name, want.Format(time.RFC3339))
	case !got.UTC().Truncate(time.Second).Equal(want):
		return fmt.Sprintf("the point-in-time restore reached %s, not the %s asked for",
			got.UTC().Format(time.RFC3339), want.Format(time.RFC3339))
	}
	return ""
}

// failureReason is RecoverabilityVerified's reason for failed verification
// lv: the archive's own words when a point-in-time restore was refused
// across a gap or outside the window, else VerificationFailed.
func failureReason(lv *platformv1.VerificationRecord) string {
	switch lv.Reason {
	case restorev1.RestoreJobArchiveGapReason:
		return platformv1.ArchiveGapReason
	case restorev1.RestoreJobOutsideWindowReason:
		return platformv1.OutsideRecoverableWindowReason
	case platformv1.RecoveryPointMismatchReason:
		return platformv1.RecoveryPointMismatchReason
	}
	return platformv1.VerificationFailedReason
}

// archiveGap is the BackupJob's PointInTimeReady condition when it reports
// a gap in the archive (for the plan's current template), else nil.
func archiveGap(spec *platformv1.ProtectionPlanSpec, bj *backupv1.BackupJob) *metav1.Condition {
	if !pointInTimeOn(spec) || bj == nil || bj.Spec.PointInTime == nil {
		return nil
	}
	c := conditions.Get(bj, backupv1.PointInTimeReadyCondition)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != backupv1.ArchiveGapReason {
		return nil
	}
	return c
}

// archiveReady is the BackupJob's PointInTimeReady condition when it is
// True for the BackupJob's current generation; else nil and why not.
func archiveReady(bj *backupv1.BackupJob) (*metav1.Condition, string) {
	if bj == nil {
		return nil, "the BackupJob does not exist yet"
	}
	if bj.Spec.PointInTime == nil {
		return nil, "the BackupJob has no spec.pointInTime yet"
	}
	c := conditions.Get(bj, backupv1.PointInTimeReadyCondition)
	switch {
	case c == nil:
		return nil, "the BackupJob reports no PointInTimeReady yet"
	case c.ObservedGeneration != bj.Generation:
		return nil, "the BackupJob's PointInTimeReady is not about its current spec yet"
	case c.Status != metav1.ConditionTrue:
		return nil, fmt.Sprintf("PointInTimeReady is %s (%s: %s)", c.Status, c.Reason, c.Message)
	}
	return c, ""
}

// judgeRPO decides what the rpo is judged on at now and records it in
// status.rpo: the archive while the BackupJob's PointInTimeReady is True,
// else the newest successful backup. For the archive, age is the recovery
// point's age: the smaller of the newest archived change's age (as the
// last backup run read it) and maxLag — the archiver is ready only while
// everything older than maxLag is archived. why says why the archive does
// not count (point-in-time plans).
func judgeRPO(plan *platformv1.ProtectionPlan, spec *platformv1.ProtectionPlanSpec, bj *backupv1.BackupJob, now time.Time) (age time.Duration, why string) {
	st := &platformv1.RPOStatus{Basis: platformv1.RPOBasisBackup}
	defer func() { plan.Status.RPO = st }()
	if pointInTimeOn(spec) {
		_, why = archiveReady(bj)
		if why == "" {
			lag := maxLag(spec)
			age = lag
			st.Basis, st.MaxLag = platformv1.RPOBasisPointInTime, &metav1.Duration{Duration: lag}
			if pt := bj.Status.PointInTime; pt != nil && pt.Latest != nil {
				st.RecoveryPoint = pt.Latest.DeepCopy()
				age = min(lag, max(0, now.Sub(pt.Latest.Time)))
			}
			st.Message = fmt.Sprintf("PointInTimeReady is True: the archive is at most maxLag (%s) behind", lag)
			return round(age), ""
		}
	}
	if lb := plan.Status.LastBackup; lb != nil && lb.SuccessfulTime != nil {
		st.RecoveryPoint = lb.SuccessfulTime.DeepCopy()
	}
	st.Message = "the newest successful backup"
	if why != "" {
		st.Message += "; the point-in-time archive does not count: " + why
	}
	return 0, why
}
