package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	backupv1 "cairn.dev/apis/backup/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/operators/orchestrator/internal/planspec"
)

// desiredBackupJob is the plan's BackupJob: named like the plan, the plan's
// database, time zone and deletion policy, and its backup template. spec is
// the defaulted plan spec, so every field the backup webhook would default
// is set here and a defaulted child is no drift.
func desiredBackupJob(plan *platformv1.ProtectionPlan, spec *platformv1.ProtectionPlanSpec) *backupv1.BackupJob {
	b := spec.Backup.DeepCopy()
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: plan.Namespace, Name: plan.Name,
			Labels: map[string]string{platformv1.PlanLabel: plan.Name},
		},
		Spec: backupv1.BackupJobSpec{
			Database:              spec.Database,
			Schedule:              b.Schedule,
			TimeZone:              spec.TimeZone,
			RetentionDays:         retentionDays(b),
			Retention:             b.Retention,
			MaxRetries:            b.MaxRetries,
			ActiveDeadlineSeconds: b.ActiveDeadlineSeconds,
			Suspend:               b.Suspend,
			Storage:               b.Storage,
			DeletionPolicy:        spec.DeletionPolicy,
			ObjectLock:            b.ObjectLock,
			Encryption:            b.Encryption,
			PointInTime:           b.PointInTime,
			Parallelism:           b.Parallelism,
		},
	}
}

// backupJobOwned are the BackupJob's optional fields the plan's template
// sets or leaves unset (none has a default): one the plan turns off is
// removed from its BackupJob — point-in-time off takes the archiver and a
// PostgreSQL source's replication slot with it; encryption, object lock or
// a retention form switched is not left behind beside the new one.
var backupJobOwned = [][]string{
	{"spec", "pointInTime"}, {"spec", "encryption"}, {"spec", "objectLock"},
	{"spec", "retention"}, {"spec", "retentionDays"}, {"spec", "parallelism"},
}

// desiredRestoreJob is the RestoreJob of verification lv: it restores
// exactly lv's artifact of the plan's BackupJob (pinned by path, never
// "the newest") into the scratch database, runs the plan's checks there
// and drops the scratch database afterwards if the restore created it. A
// RestoreJob's spec is immutable, so it is created once and never updated.
//
// A point-in-time verification (lv.targetTime) restores the plan's
// BackupJob to that second instead (spec.source.pointInTime, no artifact:
// the restore takes the newest base that ended before it) and runs the
// plan's checks but rowCountsMatchBackup (verificationChecks).
func desiredRestoreJob(plan *platformv1.ProtectionPlan, spec *platformv1.ProtectionPlanSpec, lv *platformv1.VerificationRecord) *restorev1.RestoreJob {
	src := restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: plan.Name, Artifact: lv.Artifact.Path}}
	if lv.TargetTime != nil {
		src = restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: plan.Name},
			PointInTime: lv.TargetTime.UTC().Format(time.RFC3339)}
	}
	return &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: plan.Namespace, Name: lv.RestoreJob,
			Labels: map[string]string{platformv1.PlanLabel: plan.Name},
		},
		Spec: restorev1.RestoreJobSpec{
			Source:                src,
			Target:                planspec.ScratchTarget(spec),
			ActiveDeadlineSeconds: spec.Verification.TimeoutSeconds,
			Checks:                verificationChecks(spec, lv),
			DropTargetAfterChecks: true,
			RecordVerification:    true,
			Encryption:            spec.Verification.Encryption.DeepCopy(),
			Parallelism:           spec.Backup.Parallelism,
		},
	}
}

// DesiredBackupJob is the BackupJob the orchestrator creates for plan (its
// defaults applied), without its controller reference (the caller sets it).
// The benchmark's floor writes exactly this BackupJob
// (operators/orchestrator/internal/bench).
func DesiredBackupJob(plan *platformv1.ProtectionPlan) *backupv1.BackupJob {
	spec := plan.Spec.DeepCopy()
	planspec.SetDefaults(spec)
	return desiredBackupJob(plan, spec)
}

// retentionDays is the child's retentionDays: the template's, or the
// default written out when the template sets neither form, so that a
// child's retentionDays edited by hand is drift the plan reverts (Ensure
// compares the fields desired sets); none with calendar tiers.
func retentionDays(b *platformv1.BackupTemplate) int32 {
	s := backupv1.BackupJobSpec{RetentionDays: b.RetentionDays, Retention: b.Retention}
	return s.RetentionDaysOrDefault()
}
