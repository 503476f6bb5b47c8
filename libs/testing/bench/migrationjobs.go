package bench

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

func migrationJob(ns string, i int) client.Object {
	return &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%05d", i)},
		Spec: migrationv1.MigrationJobSpec{
			Source:  Database("pg15.svc", fmt.Sprintf("app_%05d", i), "source"),
			Target:  migrationv1.TargetDatabase{DatabaseRef: Database("pg17.svc", fmt.Sprintf("app_%05d", i), "target")},
			Objects: &migrationv1.ObjectSelector{Include: []string{"public.*"}, Exclude: []string{"public.audit_*"}},
		},
	}
}

// migrationPrepare creates the two credentials Secrets every MigrationJob names.
func migrationPrepare(ctx context.Context, c client.Client, ns string, _ int) error {
	return testenv.References{Database: []string{"source", "target"}}.Create(ctx, c, ns)
}

// migrationFloor makes the operator's writes for one MigrationJob (its finalizer was
// added by admission): the status checkpoint naming the precheck Job (and
// its Event), the very Job the operator renders with its controller
// reference, the status with the step Running.
func migrationFloor(desired func(*migrationv1.MigrationJob, string, *runtime.Scheme) (*batchv1.Job, error)) func(context.Context, client.Client, client.Object) error {
	return func(ctx context.Context, c client.Client, obj client.Object) error {
		mj := obj.(*migrationv1.MigrationJob)
		job, err := desired(mj, AgentImage, c.Scheme())
		if err != nil {
			return err
		}
		msg := fmt.Sprintf("starting step %s: Job %s/%s", contract.StepPrecheck, mj.Namespace, job.Name)
		if err := PatchStatus(ctx, c, mj, func() {
			now := metav1.Now()
			mj.Status.ObservedGeneration = mj.Generation
			mj.Status.Phase, mj.Status.StartTime = migrationv1.PhasePrechecking, &now
			mj.Status.Precheck = &migrationv1.PrecheckResult{}
			mj.Status.Steps = []migrationv1.StepStatus{{Step: contract.StepPrecheck, AgentRun: cairnv1.AgentRun{JobName: job.Name}, Cluster: migrationv1.ClusterLocal,
				Namespace: mj.Namespace, Phase: migrationv1.StepPending}}
			conditions.MarkReconciling(mj, migrationv1.StepRunningReason, msg)
		}); err != nil {
			return err
		}
		if err := Transition(ctx, c, mj, migrationv1.StepRunningReason, "PhasePrechecking", msg); err != nil {
			return err
		}
		if err := c.Create(ctx, job); err != nil {
			return err
		}
		return PatchStatus(ctx, c, mj, func() {
			st := &mj.Status.Steps[0]
			st.Phase, st.StartTime = migrationv1.StepRunning, &job.CreationTimestamp
			conditions.MarkReconciling(mj, migrationv1.StepRunningReason,
				fmt.Sprintf("checking source and target: Job %s/%s running", mj.Namespace, job.Name))
		})
	}
}

// migrationDone: a MigrationJob prechecking for its generation with its precheck
// step running (AllDone then wants every precheck Job there).
func migrationDone(o client.Object) bool {
	mj := o.(*migrationv1.MigrationJob)
	st := mj.Status.Step(contract.StepPrecheck)
	return mj.Status.ObservedGeneration == mj.Generation && mj.Status.Phase == migrationv1.PhasePrechecking &&
		st != nil && st.Phase == migrationv1.StepRunning
}

// MigrationJobs is the migration operator's bench (run by
// operators/migration/internal/bench with the operator and the first Job
// its controller renders), like BackupJobs: N MigrationJobs (Full, Direct
// transfer, each its own source and target database). Nothing runs pods on
// a bare API server: a MigrationJob has converged when it has reached its
// first step — the precheck Job exists and status says Prechecking with
// that step Running, for its generation.
// `make bench BENCH_OPERATORS=migration`.
func MigrationJobs(op func(version string) manager.Operator, desired func(*migrationv1.MigrationJob, string, *runtime.Scheme) (*batchv1.Job, error)) Kind {
	return Kind{Bases: []string{"migration"}, Operator: op, Prepare: migrationPrepare, New: migrationJob, Floor: migrationFloor(desired),
		Converged: AllDone(&migrationv1.MigrationJobList{}, &batchv1.JobList{}, migrationDone),
	}
}
