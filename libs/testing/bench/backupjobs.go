package bench

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

func backupJob(ns string, i int) client.Object {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%05d", i)},
		Spec: backupv1.BackupJobSpec{
			Database: Database("db.svc", "app", "db"),
			Schedule: "0 2 * * *", TimeZone: "Asia/Shanghai",
			Storage: S3Store("s3"),
		},
	}
}

// backupPrepare creates the two Secrets every BackupJob names (the operator
// checks them before it schedules anything).
func backupPrepare(ctx context.Context, c client.Client, ns string, _ int) error {
	return testenv.References{Database: []string{"db"}, S3: []string{"s3"}}.Create(ctx, c, ns)
}

// backupFloor makes the operator's writes for one BackupJob (its finalizer was
// added by admission): the very CronJob the operator renders, controller
// reference included, one status patch, one Event.
func backupFloor(desired func(*backupv1.BackupJob, string) *batchv1.CronJob) func(context.Context, client.Client, client.Object) error {
	return func(ctx context.Context, c client.Client, obj client.Object) error {
		bj := obj.(*backupv1.BackupJob)
		if err := CreateOwned(ctx, c, bj, desired(bj, AgentImage)); err != nil {
			return err
		}
		if err := PatchStatus(ctx, c, bj, func() {
			bj.Status.ObservedGeneration = bj.Generation
			bj.Status.Phase = backupv1.PhaseScheduled
			conditions.MarkReady(bj, "Scheduled", "floor")
		}); err != nil {
			return err
		}
		return Transition(ctx, c, bj, "Scheduled", "PhaseScheduled", "the CronJob is in place; waiting for the first run")
	}
}

// backupDone: a BackupJob Ready for its generation (AllDone then wants
// every CronJob there).
func backupDone(o client.Object) bool {
	b := o.(*backupv1.BackupJob)
	return b.Status.ObservedGeneration == b.Generation && conditions.IsTrue(b, cairnv1.ReadyCondition)
}

// BackupJobs is the backup operator's bench (run by
// operators/backup/internal/bench with the operator, the CronJob its
// controller renders and its conversion webhook's path): for N BackupJobs,
// the time to converge (CronJob exists and status Ready for all), the
// like-for-like floor and their ratio; API writes, Events, reads,
// conversion webhook calls and reconciles per object at creation and
// during a forced resync; CPU and Go heap per managed object. It is a
// measurement, not a test: `make bench` (N=100 and 1000).
func BackupJobs(op func(version string) manager.Operator, desired func(*backupv1.BackupJob, string) *batchv1.CronJob, convertPath string) Kind {
	return Kind{Bases: []string{"backup"}, Operator: op, Prepare: backupPrepare, New: backupJob, Floor: backupFloor(desired),
		Converged: AllDone(&backupv1.BackupJobList{}, &batchv1.CronJobList{}, backupDone),
		// Calls of the conversion webhook (the API server converts between
		// the stored v1 and the still-served v1alpha1).
		Conversions: func() float64 {
			return CounterSum("controller_runtime_webhook_requests_total", "webhook", convertPath)
		},
	}
}
