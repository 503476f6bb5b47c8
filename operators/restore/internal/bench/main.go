// Command bench measures the restore operator against a real kube-apiserver
// + etcd with the shared harness (libs/testing/bench), like the backup operator's
// bench: N RestoreJobs, each restoring the last artifact of its own source
// BackupJob (created beforehand with a successful artifact in status, as
// the backup operator would leave it) into a scratch database. Nothing runs
// pods on a bare API server: a RestoreJob has converged when its restore
// Job exists and its status says Running for its generation. It is a
// measurement, not a test: `make bench BENCH_OPERATORS=restore`.
package main

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/testing/bench"
	"cairn.dev/operators/restore/internal/controller"
	"cairn.dev/operators/restore/internal/operator"
	"cairn.dev/libs/testing/testenv"
)

const agentImage = "agent:bench"

func name(i int) string { return fmt.Sprintf("db-%05d", i) }

func backupJob(ns string, i int) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)},
		Spec: backupv1.BackupJobSpec{
			Database: bench.Database("db.svc", "app", "db"),
			Schedule: "0 2 * * *", TimeZone: "Asia/Shanghai",
			Storage: bench.S3Store("s3"),
		},
	}
}

func restoreJob(ns string, i int) client.Object {
	return &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name(i)},
		Spec: restorev1.RestoreJobSpec{
			Source: restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: name(i)}},
			Target: bench.Database("scratch.svc", fmt.Sprintf("verify_%05d", i), "scratch"),
		},
	}
}

// prepare creates the Secrets the restores need and the n source
// BackupJobs, each with a successful artifact in status.
func prepare(ctx context.Context, c client.Client, ns string, n int) error {
	refs := testenv.References{Database: []string{"db", "scratch"}, S3: []string{"s3"}}
	if err := refs.Create(ctx, c, ns); err != nil {
		return err
	}
	return bench.Parallel(n, 8, func(i int) error {
		bj := backupJob(ns, i)
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

// floor makes the operator's writes for one RestoreJob (its finalizer was
// added by admission): the status checkpoint recording the artifact (and
// its Event), the very Job the operator renders with its controller
// reference, the Running status (and its Event).
func floor(ctx context.Context, c client.Client, obj client.Object) error {
	rj := obj.(*restorev1.RestoreJob)
	bj := &backupv1.BackupJob{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: rj.Namespace, Name: rj.Spec.Source.BackupJob.Name}, bj); err != nil {
		return err
	}
	job := controller.DesiredJob(rj, bj, agentImage)
	orig := rj.DeepCopy()
	rj.Status.ObservedGeneration = rj.Generation
	rj.Status.Phase = restorev1.PhasePending
	rj.Status.Source, rj.Status.JobName, rj.Status.Artifact = "backupjob/"+bj.Name, rj.JobName(), bj.Status.LastArtifact
	msg := fmt.Sprintf("restoring artifact %s; creating Job %s", bj.Status.LastArtifact.Path, rj.JobName())
	conditions.MarkReconciling(rj, restorev1.RestoreJobArtifactResolvedReason, msg)
	if err := c.Status().Patch(ctx, rj, client.MergeFrom(orig)); err != nil {
		return err
	}
	gv := restorev1.GroupVersion.String()
	if err := bench.Event(ctx, c, rj, gv, "RestoreJob", corev1.EventTypeNormal, restorev1.RestoreJobArtifactResolvedReason, "PhasePending", msg); err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(rj, job, c.Scheme()); err != nil {
		return err
	}
	if err := c.Create(ctx, job); err != nil {
		return err
	}
	orig = rj.DeepCopy()
	rj.Status.Phase = restorev1.PhaseRunning
	rj.Status.StartTime = &job.CreationTimestamp
	msg = fmt.Sprintf("restoring artifact %s into postgres scratch.svc:5432/%s with Job %s (attempt 1 of at most 1)",
		bj.Status.LastArtifact.Path, rj.Spec.Target.Database, job.Name)
	conditions.MarkReconciling(rj, restorev1.RestoreJobRunningReason, msg)
	if err := c.Status().Patch(ctx, rj, client.MergeFrom(orig)); err != nil {
		return err
	}
	return bench.Event(ctx, c, rj, gv, "RestoreJob", corev1.EventTypeNormal, restorev1.RestoreJobRunningReason, "PhaseRunning", msg)
}

// done: a RestoreJob Running for its generation (bench.AllDone then wants
// every restore Job there).
func done(o client.Object) bool {
	rj := o.(*restorev1.RestoreJob)
	return rj.Status.ObservedGeneration == rj.Generation && rj.Status.Phase == restorev1.PhaseRunning
}

func main() {
	bench.Main(bench.Kind{Title: "restore operator", Object: "RestoreJob", Controller: "restorejob", Bases: []string{"restore", "backup"},
		Operator: operator.New, Args: []string{"--agent-image=" + agentImage}, Prepare: prepare, New: restoreJob, Floor: floor,
		Converged: bench.AllDone(&restorev1.RestoreJobList{}, &batchv1.JobList{}, done),
	})
}
