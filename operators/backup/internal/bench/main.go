// Command bench measures the backup operator against a real kube-apiserver +
// etcd with the shared harness (libs/testing/bench): for N BackupJobs, the time to
// converge (CronJob exists and status Ready for all), the like-for-like floor
// and their ratio; API writes, Events, reads, conversion webhook calls and
// reconciles per object at creation and during a forced resync; CPU and Go
// heap per managed object. It is a measurement, not a test: run it with
// `make bench` (N=100 and 1000).
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
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/testing/bench"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/backup/internal/controller"
	"cairn.dev/operators/backup/internal/operator"
	"cairn.dev/operators/backup/internal/webhook"
)

const agentImage = "agent:bench"

func backupJob(ns string, i int) client.Object {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%05d", i)},
		Spec: backupv1.BackupJobSpec{
			Database: bench.Database("db.svc", "app", "db"),
			Schedule: "0 2 * * *", TimeZone: "Asia/Shanghai",
			Storage: bench.S3Store("s3"),
		},
	}
}

// prepare creates the two Secrets every BackupJob names (the operator
// checks them before it schedules anything).
func prepare(ctx context.Context, c client.Client, ns string, _ int) error {
	return testenv.References{Database: []string{"db"}, S3: []string{"s3"}}.Create(ctx, c, ns)
}

// floor makes the operator's writes for one BackupJob (its finalizer was
// added by admission): the very CronJob the operator renders, controller
// reference included, one status patch, one Event.
func floor(ctx context.Context, c client.Client, obj client.Object) error {
	bj := obj.(*backupv1.BackupJob)
	cj := controller.DesiredCronJob(bj, agentImage)
	if err := controllerutil.SetControllerReference(bj, cj, c.Scheme()); err != nil {
		return err
	}
	if err := c.Create(ctx, cj); err != nil {
		return err
	}
	orig := bj.DeepCopy()
	bj.Status.ObservedGeneration = bj.Generation
	bj.Status.Phase = backupv1.PhaseScheduled
	conditions.MarkReady(bj, "Scheduled", "floor")
	if err := c.Status().Patch(ctx, bj, client.MergeFrom(orig)); err != nil {
		return err
	}
	return bench.Event(ctx, c, bj, backupv1.GroupVersion.String(), "BackupJob", corev1.EventTypeNormal,
		"Scheduled", "PhaseScheduled", "the CronJob is in place; waiting for the first run")
}

// done: a BackupJob Ready for its generation (bench.AllDone then wants
// every CronJob there).
func done(o client.Object) bool {
	b := o.(*backupv1.BackupJob)
	return b.Status.ObservedGeneration == b.Generation && conditions.IsTrue(b, cairnv1.ReadyCondition)
}

func main() {
	bench.Main(bench.Kind{Title: "backup operator", Object: "BackupJob", Controller: "backupjob", Bases: []string{"backup"},
		Operator: operator.New, Args: []string{"--agent-image=" + agentImage}, Prepare: prepare, New: backupJob, Floor: floor,
		Converged: bench.AllDone(&backupv1.BackupJobList{}, &batchv1.CronJobList{}, done),
		// Calls of the conversion webhook (the API server converts between
		// the stored v1 and the still-served v1alpha1).
		Conversions: func() float64 {
			return bench.CounterSum("controller_runtime_webhook_requests_total", "webhook", webhook.ConvertPath)
		},
	})
}
