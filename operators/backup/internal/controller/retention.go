package controller

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
)

// retentionSpec is bj's calendar-tier retention for its runs, counted in
// its time zone; nil without spec.retention.
func retentionSpec(bj *backupv1.BackupJob) *agentjob.Retention {
	r := bj.Spec.Retention
	if r == nil {
		return nil
	}
	tz := bj.Spec.TimeZone
	if tz == "" {
		tz = backupv1.DefaultTimeZone
	}
	return &agentjob.Retention{TimeZone: tz, DryRun: r.DryRun, Policy: contract.Retention{
		KeepLast: int(r.KeepLast), KeepHourly: int(r.KeepHourly), KeepDaily: int(r.KeepDaily), KeepWeekly: int(r.KeepWeekly),
		KeepMonthly: int(r.KeepMonthly), KeepYearly: int(r.KeepYearly), MinVerified: int(r.MinVerified),
	}}
}

// retentionStatus is status.retention from a successful run's report
// (nil when its prune did not run or an older agent reported none).
func retentionStatus(res *contract.Result, at *metav1.Time) *backupv1.RetentionStatus {
	rep := res.Retention
	if rep == nil {
		return nil
	}
	s := &backupv1.RetentionStatus{Time: at, DryRun: rep.DryRun, TimeZone: rep.TimeZone, Truncated: int32(rep.Truncated)}
	for _, k := range rep.Kept {
		if len(s.Kept) == 256 { // the API's maximum
			s.Truncated++
			continue
		}
		ka := backupv1.KeptArtifact{Artifact: k.Artifact, Reasons: k.Reasons}
		if k.LockedUntil != nil {
			ka.LockedUntil = &metav1.Time{Time: *k.LockedUntil}
		}
		s.Kept = append(s.Kept, ka)
	}
	for _, p := range rep.Pruned {
		if len(s.Pruned) == 256 {
			s.Truncated++
			continue
		}
		s.Pruned = append(s.Pruned, p)
	}
	return s
}

// objectLock is bj's S3 Object Lock for its backups (nil: none), in the
// agent's spelling of the mode.
func objectLock(bj *backupv1.BackupJob) *agentjob.ObjectLock {
	o := bj.Spec.ObjectLock
	if o == nil {
		return nil
	}
	return &agentjob.ObjectLock{Mode: strings.ToUpper(o.Mode), Days: o.Days}
}
