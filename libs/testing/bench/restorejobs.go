package bench

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

func restoreName(i int) string { return fmt.Sprintf("db-%05d", i) }

func restoreSourceBackupJob(ns string, i int) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: restoreName(i)},
		Spec: backupv1.BackupJobSpec{
			Database: Database("db.svc", "app", "db"),
			Schedule: "0 2 * * *", TimeZone: "Asia/Shanghai",
			Storage: S3Store("s3"),
		},
	}
}

func restoreJob(ns string, i int) client.Object {
	return &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: restoreName(i)},
		Spec: restorev1.RestoreJobSpec{
			Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: restoreName(i)}},
			Target: Database("scratch.svc", fmt.Sprintf("verify_%05d", i), "scratch"),
		},
	}
}

// restorePrepare creates the Secrets the restores need and the n source
// BackupJobs, each with a successful artifact in status.
func restorePrepare(ctx context.Context, c client.Client, ns string, n int) error {
	refs := testenv.References{Database: []string{"db", "scratch"}, S3: []string{"s3"}}
	if err := refs.Create(ctx, c, ns); err != nil {
		return err
	}
	return Parallel(n, 8, func(i int) error {
		bj := restoreSourceBackupJob(ns, i)
		if err := c.Create(ctx, bj); err != nil {
			return err
		}
		t := metav1.Now()
		bj.Status.LastArtifact = &cairnv1.Artifact{Path: fmt.Sprintf("%s/%s/app_20261203T020000Z.pgdump.zst", ns, bj.Name),
			Size: 1 << 20, Checksum: "sha256:" + fmt.Sprintf("%064d", i)}
		bj.Status.LastResult, bj.Status.LastSuccessfulTime, bj.Status.LastBackupTime = backupv1.RunSucceeded, &t, &t
		return c.Status().Update(ctx, bj)
	})
}

// restoreFloor makes the operator's writes for one RestoreJob (its finalizer was
// added by admission): the status checkpoint recording the artifact (and
// its Event), the very Job the operator renders with its controller
// reference, the Running status (and its Event).
func restoreFloor(desired func(*restorev1.RestoreJob, *backupv1.BackupJob, string) *batchv1.Job) func(context.Context, client.Client, client.Object) error {
	return func(ctx context.Context, c client.Client, obj client.Object) error {
		rj := obj.(*restorev1.RestoreJob)
		bj := &backupv1.BackupJob{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: rj.Namespace, Name: rj.Spec.Source.BackupJob.Name}, bj); err != nil {
			return err
		}
		job := desired(rj, bj, AgentImage)
		msg := fmt.Sprintf("restoring artifact %s; creating Job %s", bj.Status.LastArtifact.Path, rj.JobName())
		if err := PatchStatus(ctx, c, rj, func() {
			rj.Status.ObservedGeneration = rj.Generation
			rj.Status.Phase = restorev1.PhasePending
			rj.Status.Source, rj.Status.JobName, rj.Status.Artifact = "backupjob/"+bj.Name, rj.JobName(), bj.Status.LastArtifact
			conditions.MarkReconciling(rj, restorev1.RestoreJobArtifactResolvedReason, msg)
		}); err != nil {
			return err
		}
		if err := Transition(ctx, c, rj, restorev1.RestoreJobArtifactResolvedReason, "PhasePending", msg); err != nil {
			return err
		}
		if err := CreateOwned(ctx, c, rj, job); err != nil {
			return err
		}
		msg = fmt.Sprintf("restoring artifact %s into postgres scratch.svc:5432/%s with Job %s (attempt 1 of at most 1)",
			bj.Status.LastArtifact.Path, rj.Spec.Target.Database, job.Name)
		if err := PatchStatus(ctx, c, rj, func() {
			rj.Status.Phase = restorev1.PhaseRunning
			rj.Status.StartTime = &job.CreationTimestamp
			conditions.MarkReconciling(rj, restorev1.RestoreJobRunningReason, msg)
		}); err != nil {
			return err
		}
		return Transition(ctx, c, rj, restorev1.RestoreJobRunningReason, "PhaseRunning", msg)
	}
}

// restoreDone: a RestoreJob Running for its generation (AllDone then wants
// every restore Job there).
func restoreDone(o client.Object) bool {
	rj := o.(*restorev1.RestoreJob)
	return rj.Status.ObservedGeneration == rj.Generation && rj.Status.Phase == restorev1.PhaseRunning
}

// RestoreJobs is the restore operator's bench (run by
// operators/restore/internal/bench with the operator and the Job its
// controller renders), like BackupJobs: N RestoreJobs, each restoring the
// last artifact of its own source BackupJob (created beforehand with a
// successful artifact in status, as the backup operator would leave it)
// into a scratch database. Nothing runs pods on a bare API server: a
// RestoreJob has converged when its restore Job exists and its status says
// Running for its generation. `make bench BENCH_OPERATORS=restore`.
func RestoreJobs(op func(version string) manager.Operator, desired func(*restorev1.RestoreJob, *backupv1.BackupJob, string) *batchv1.Job) Kind {
	return Kind{Bases: []string{"restore", "backup"}, Operator: op, Prepare: restorePrepare, New: restoreJob, Floor: restoreFloor(desired),
		Converged: AllDone(&restorev1.RestoreJobList{}, &batchv1.JobList{}, restoreDone),
	}
}
