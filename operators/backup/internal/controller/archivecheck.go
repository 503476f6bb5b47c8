package controller

import (
	"context"
	"fmt"
	"strconv"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agentjob"
)

// Bounds of one archive-status Job: it reads the archive's records and,
// for PostgreSQL, one row of pg_replication_slots. It is not retried: the
// next check comes one interval later.
const (
	checkBackoffLimit    int32 = 0
	checkDeadlineSeconds int64 = 300
)

// maxGaps bounds status.pointInTime.gaps (the CRD's maxItems).
const maxGaps = 16

// checkArchive is the step that runs an archive-status Job every
// spec.pointInTime.checkInterval while point-in-time is on: it reads the
// archive as the store holds it (segments, gaps, the newest archived
// second: continuity is checked between backups, not only at them) and,
// for PostgreSQL, the archiver's replication slot, which it drops when it
// retains more than spec.pointInTime.maxRetainedWAL — the watchdog that
// keeps the source's disk safe while the archiver is down (a running
// archiver applies the same limit itself). Check n runs as the Job
// "<name>-archive-check-<n>": the name follows from the stored count, so
// a repeated pass never starts a second one; a finished check is recorded
// (a checkpoint) before its Job is deleted.
func (r *BackupJobReconciler) checkArchive(ctx context.Context, p *pass) error {
	bj := p.Obj
	if bj.Spec.PointInTime == nil || bj.Status.PointInTime == nil {
		return nil
	}
	st := bj.Status.PointInTime
	if st.Check == nil {
		st.Check = &backupv1.ArchiveCheck{}
	}
	chk := st.Check
	interval := durationOr(bj.Spec.PointInTime.CheckInterval, backupv1.DefaultCheckInterval)
	if chk.Time != nil {
		if err := r.deleteOwnJob(ctx, bj, checkJobName(bj, chk.Checks), "archive check"); err != nil {
			return err
		}
		if wait := chk.Time.Add(interval).Sub(r.Now()); wait > 0 {
			p.RequeueAfter(wait)
			return nil
		}
	}
	job := checkJob(bj, r.AgentImage, chk.Checks+1)
	run := ownRun(r, bj, job, contract.ParseArchiveStatus)
	obs, err := run.Observe(ctx)
	if err != nil {
		return fmt.Errorf("archive check Job %s: %w", job.Name, err)
	}
	p.RequeueAfter(obs.RequeueAfter)
	if obs.State != agentjob.RunSucceeded && obs.State != agentjob.RunFailed {
		// Running, or deleted by someone before it finished (the next
		// pass starts it again: a check changes nothing but a slot past
		// its limit).
		return nil
	}
	now := metav1.NewTime(r.Now().UTC().Truncate(time.Second))
	chk.Checks++
	chk.Time = &now
	recordCheck(bj, obs, now)
	p.RequeueAfter(interval)
	// Recorded before its Job goes: a pass that read the BackupJob before
	// this write cannot record it again (its write conflicts).
	if err := p.Checkpoint(ctx); err != nil {
		return err
	}
	return r.deleteFinishedJob(ctx, bj, obs.Job, "archive check")
}

// recordCheck folds a finished archive-status Job into the status.
func recordCheck(bj *backupv1.BackupJob, obs agentjob.Observation[contract.ArchiveStatus], now metav1.Time) {
	st, chk := bj.Status.PointInTime, bj.Status.PointInTime.Check
	rep := obs.Result
	if !obs.Outcome.Succeeded || rep == nil {
		msg := fmt.Sprintf("archive check Job %s failed", obs.Job.Name)
		if obs.Outcome.Reason != "" {
			msg += ": " + obs.Outcome.Reason
		}
		if f := obs.FailureReason(); f != "" {
			msg += "; agent: " + f
		}
		chk.Message = msg
		return
	}
	chk.Message = ""
	chk.Slot, chk.SlotExists, chk.RetainedWALBytes, chk.MaxSlotWALKeepSize = rep.Slot, rep.SlotExists, rep.RetainedWALBytes, rep.MaxSlotWALKeepSize
	if rep.SlotDropped {
		chk.SlotDroppedTime = &now
	}
	st.Segments, st.LastSegment = int32(rep.Segments), rep.Newest
	st.Gaps = rep.Gaps
	if len(st.Gaps) > maxGaps {
		st.Gaps = append(st.Gaps[:maxGaps-1], fmt.Sprintf("... and %d more", len(rep.Gaps)-maxGaps+1))
	}
	if !rep.LatestCovered.IsZero() {
		st.Latest = optTime(rep.LatestCovered)
	}
	st.ReadTime = &now
}

// checkJobName is the name of bj's n-th archive-status Job.
func checkJobName(bj *backupv1.BackupJob, n int32) string {
	return bj.Name + backupv1.ArchiveCheckSuffix + strconv.Itoa(int(n))
}

// checkJob renders bj's n-th archive-status Job: the BackupJob's database
// and store by Secret reference, as every run, and for PostgreSQL the
// slot's limit.
func checkJob(bj *backupv1.BackupJob, image string, n int32) *batchv1.Job {
	spec := runSpec(bj, image, runCheck)
	spec.Command = contract.CommandArchiveStatus
	spec.RetentionDays, spec.Retention, spec.ObjectLock, spec.Encryption, spec.Parallelism = 0, nil, nil, nil, 0
	spec.PointInTime = &agentjob.PointInTime{MaxRetainedWALBytes: maxRetainedWALBytes(bj)}
	spec.BackoffLimit = new(checkBackoffLimit)
	spec.ActiveDeadlineSeconds = new(checkDeadlineSeconds)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: bj.Namespace, Name: checkJobName(bj, n), Labels: spec.Labels},
		Spec:       agentjob.JobSpec(spec),
	}
}

// maxRetainedWALBytes is the slot's limit for a PostgreSQL archive (0
// otherwise: a binary log reader retains nothing on the server).
func maxRetainedWALBytes(bj *backupv1.BackupJob) int64 {
	if bj.Spec.Database.Engine != cairnv1.PostgresEngine {
		return 0
	}
	return bj.Spec.PointInTime.MaxRetainedWALBytes()
}
