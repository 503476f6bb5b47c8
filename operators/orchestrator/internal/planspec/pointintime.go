package planspec

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	backupv1 "cairn.dev/apis/backup/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/schedule"
)

// validatePointInTime checks spec.backup.pointInTime against the rest of
// the plan (the CRD's rules, for plans the API server admitted without
// them): an rpo of at least
// maxLag — the archiver is ready while it is that far behind, so a
// shorter rpo could be missed while PointInTimeReady is True.
func validatePointInTime(spec *platformv1.ProtectionPlanSpec, fldPath *field.Path) field.ErrorList {
	pt := spec.Backup.PointInTime
	if pt == nil {
		return nil
	}
	var errs field.ErrorList
	lag := MaxLag(pt)
	if spec.Objectives.RPO.Duration < lag {
		errs = append(errs, field.Invalid(fldPath.Child("objectives", "rpo"), spec.Objectives.RPO.Duration.String(), fmt.Sprintf(
			"at least backup.pointInTime.maxLag (%s): the archiver counts as keeping up while it is that far behind, so a shorter rpo could be missed while PointInTimeReady is True; lower maxLag or raise rpo", lag)))
	}
	return errs
}

// MaxLag is pt's maxLag, or its default.
func MaxLag(pt *backupv1.PointInTimeSpec) time.Duration {
	if pt != nil && pt.MaxLag != nil {
		return pt.MaxLag.Duration
	}
	d, _ := time.ParseDuration(backupv1.DefaultMaxLag)
	return d
}

// LongestInterval is the longest time between two consecutive runs of
// sched over the year after from, looking at 5000 runs at most (a
// schedule running that often repeats its pattern within them: 5000 runs
// of a schedule that skips weekends span at least a week once it runs
// less often than every two minutes on weekdays).
func LongestInterval(sched *schedule.Schedule, from time.Time) time.Duration {
	end := from.AddDate(1, 0, 0)
	var longest time.Duration
	prev := sched.Next(from)
	for i := 0; i < 5000 && prev.Before(end); i++ {
		next := sched.Next(prev)
		if next.IsZero() {
			break
		}
		if d := next.Sub(prev); d > longest {
			longest = d
		}
		prev = next
	}
	return longest
}

// RPOFeasible refuses an rpo without point-in-time recovery shorter than
// the longest time between two backups of the schedule, seen from now:
// such an rpo is missed between every two backups (with
// backup.pointInTime the rpo is judged on the archive and may be
// minutes). Only the admission webhook applies it, and on an update only
// when the rpo, the schedule, its time zone or pointInTime changed: a
// plan stored before this rule keeps working (it reports
// ObjectivesViolated, as it always did).
func RPOFeasible(spec, old *platformv1.ProtectionPlanSpec, now time.Time, fldPath *field.Path) *field.Error {
	if spec.Backup.PointInTime != nil {
		return nil
	}
	if old != nil && old.Objectives.RPO == spec.Objectives.RPO && old.Backup.Schedule == spec.Backup.Schedule &&
		old.TimeZone == spec.TimeZone && old.Backup.PointInTime == nil {
		return nil
	}
	sched, err := schedule.Parse(spec.Backup.Schedule, spec.TimeZone)
	if err != nil {
		return nil // ValidateSpec names it
	}
	longest := LongestInterval(sched, now)
	if longest == 0 || spec.Objectives.RPO.Duration >= longest {
		return nil
	}
	return field.Invalid(fldPath.Child("objectives", "rpo"), spec.Objectives.RPO.Duration.String(), fmt.Sprintf(
		"shorter than the %s between two backups of schedule %q: the newest backup would be older than the rpo before the next one; raise rpo to at least %s, back up more often, or turn on backup.pointInTime (the rpo is then judged on the archived change log and may be minutes)",
		longest, spec.Backup.Schedule, longest))
}

// PointInTimeWarnings are the admission warnings of a point-in-time plan:
// its rowCountsMatchBackup checks are not run by point-in-time
// verifications (the base's row counts describe the dump, not the database
// after the replay).
func PointInTimeWarnings(spec *platformv1.ProtectionPlanSpec) []string {
	if spec.Backup.PointInTime == nil {
		return nil
	}
	var w []string
	for i, c := range spec.Verification.Checks {
		if c.RowCountsMatchBackup {
			w = append(w, fmt.Sprintf("spec.verification.checks[%d] (%s): rowCountsMatchBackup is not run by point-in-time verifications, which restore to a recent second: the row counts a backup recorded describe the backup, not the database after its log is replayed; use a sql check", i, c.Name))
		}
	}
	return w
}
