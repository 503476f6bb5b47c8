package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/names"
)

const (
	historyLimit int32 = 3
	// startingDeadlineSeconds: a run that could not start within 5 minutes of
	// its time (operator or control plane down) is skipped, not started late;
	// it also keeps the CronJob controller from giving up after 100 misses.
	startingDeadlineSeconds int64 = 300
)

// runSpec is what every run of bj does: `agent backup` with its database,
// storage and retention, retried maxRetries times by the Job controller.
func runSpec(bj *backupv1.BackupJob, image, kind string) agentjob.Spec {
	maxRetries := ptr.Deref(bj.Spec.MaxRetries, backupv1.DefaultMaxRetries)
	deadline := ptr.Deref(bj.Spec.ActiveDeadlineSeconds, backupv1.DefaultActiveDeadlineSeconds)
	db := bj.Spec.Database
	return agentjob.Spec{
		Command:               "backup",
		Image:                 image,
		CatalogKey:            bj.Namespace + "/" + bj.Name,
		Database:              &db,
		Storage:               bj.Spec.Storage,
		RetentionDays:         bj.Spec.RetentionDaysOrDefault(), // 0 with calendar tiers
		Retention:             retentionSpec(bj),
		ObjectLock:            objectLock(bj),
		Encryption:            agentjob.BackupEncryption(bj.Spec.Encryption),
		Parallelism:           ptr.Deref(bj.Spec.Parallelism, 0),
		PointInTime:           pointInTime(bj),
		Labels:                childLabels(bj.Name, kind),
		BackoffLimit:          &maxRetries,
		ActiveDeadlineSeconds: &deadline,
	}
}

// desiredCronJob renders the one CronJob of bj. It is named like bj (a CEL
// rule keeps BackupJob names within the CronJob's 52 characters) and carries
// the schedule's time zone in its own timeZone field, never as CRON_TZ=.
// DesiredCronJob is the CronJob the operator renders for bj (without its
// controller reference), for the bench's floor: the same object written by a
// bare client.
func DesiredCronJob(bj *backupv1.BackupJob, image string) *batchv1.CronJob {
	return desiredCronJob(bj, image)
}

func desiredCronJob(bj *backupv1.BackupJob, image string) *batchv1.CronJob {
	tz := bj.Spec.TimeZone
	if tz == "" {
		tz = backupv1.DefaultTimeZone
	}
	spec := runSpec(bj, image, runScheduled)
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: bj.Namespace,
			Name:      bj.Name,
			Labels:    childLabels(bj.Name, runScheduled),
		},
		Spec: batchv1.CronJobSpec{
			Schedule:                   bj.Spec.Schedule,
			TimeZone:                   &tz,
			Suspend:                    ptr.To(bj.Spec.Suspend),
			ConcurrencyPolicy:          batchv1.ForbidConcurrent,
			StartingDeadlineSeconds:    ptr.To(startingDeadlineSeconds),
			SuccessfulJobsHistoryLimit: ptr.To(historyLimit),
			FailedJobsHistoryLimit:     ptr.To(historyLimit),
			JobTemplate: batchv1.JobTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: childLabels(bj.Name, runScheduled),
					Annotations: map[string]string{AgentImageAnnotation: image}},
				Spec: agentjob.JobSpec(spec),
			},
		},
	}
}

// runNowJob renders the Job for one run-now request id. Its name derives from
// the BackupJob and the id, so the same request never starts two Jobs.
func runNowJob(bj *backupv1.BackupJob, image, id string) *batchv1.Job {
	name, h := names.Request(bj.Namespace, bj.Name, "now", id)
	spec := runSpec(bj, image, runNow)
	labels := childLabels(bj.Name, runNow)
	labels[RunNowLabel] = h
	spec.Labels = labels
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   bj.Namespace,
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{backupv1.RunNowAnnotation: id, AgentImageAnnotation: image},
		},
		Spec: agentjob.JobSpec(spec),
	}
}

// deleteJob renders the Job that deletes every stored artifact of bj
// (deletionPolicy Delete).
func deleteJob(bj *backupv1.BackupJob, image string) *batchv1.Job {
	spec := runSpec(bj, image, runDelete)
	spec.Command = "delete"
	spec.Database = nil
	spec.RetentionDays = 0
	spec.Retention = nil
	spec.ObjectLock = nil
	spec.Encryption = nil
	// The name carries a hash of the BackupJob's UID: it never collides with
	// the delete Job of another BackupJob (or of an earlier one of the same
	// name), and the finalizer also checks the controller reference.
	sum := sha256.Sum256([]byte(bj.UID))
	h := hex.EncodeToString(sum[:])[:8]
	prefix := names.Prefix(bj.Name, 45)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: bj.Namespace, Name: prefix + "-delete-" + h, Labels: spec.Labels},
		Spec:       agentjob.JobSpec(spec),
	}
}

// runArchiver is RunKindLabel's value on the archiver Deployment and pods.
const runArchiver = "archiver"

// pointInTime is the run settings of bj's point-in-time recovery: its
// backups are bases, its archiver closes segments every maxSegmentAge and
// is ready within maxLag. Nil without spec.pointInTime.
func pointInTime(bj *backupv1.BackupJob) *agentjob.PointInTime {
	p := bj.Spec.PointInTime
	if p == nil {
		return nil
	}
	age, lag := durationOr(p.MaxSegmentAge, backupv1.DefaultMaxSegmentAge), durationOr(p.MaxLag, backupv1.DefaultMaxLag)
	return &agentjob.PointInTime{Base: true, MaxSegmentAge: age, MaxLag: max(lag, age)}
}

func durationOr(d *metav1.Duration, def string) time.Duration {
	if d != nil && d.Duration > 0 {
		return d.Duration
	}
	v, _ := time.ParseDuration(def)
	return v
}

// desiredArchiver is bj's archiver: `agent archive` streaming the
// database's change log into bj's store (PostgreSQL: with the slot's
// retained-WAL limit), one replica (agentjob.
// ArchiverDeployment), named "<name>-archiver".
func desiredArchiver(bj *backupv1.BackupJob, image string) *appsv1.Deployment {
	s := runSpec(bj, image, runArchiver)
	s.Command = contract.CommandArchive
	s.RetentionDays, s.Retention, s.ObjectLock, s.Parallelism = 0, nil, nil, 0
	s.BackoffLimit, s.ActiveDeadlineSeconds = nil, nil
	s.PointInTime.Base = false
	s.PointInTime.MaxRetainedWALBytes = maxRetainedWALBytes(bj)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: bj.Namespace, Name: bj.ArchiverName(), Labels: s.Labels},
		Spec:       agentjob.ArchiverDeployment(s),
	}
}
