// Command bench measures the migration operator against a real
// kube-apiserver + etcd with the shared harness (libs/testing/bench), like the
// backup operator's bench: N MigrationJobs (Full, Direct transfer, each its
// own source and target database). Nothing runs pods on a bare API server:
// a MigrationJob has converged when it has reached its first step — the
// precheck Job exists and status says Prechecking with that step Running,
// for its generation. It is a measurement, not a test:
// `make bench BENCH_OPERATORS=migration`.
package main

import (
	"context"
	"fmt"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/testing/bench"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/migration/internal/controller"
	"cairn.dev/operators/migration/internal/operator"
)

const agentImage = "agent:bench"

func migrationJob(ns string, i int) client.Object {
	return &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%05d", i)},
		Spec: migrationv1.MigrationJobSpec{
			Source:  bench.Database("pg15.svc", fmt.Sprintf("app_%05d", i), "source"),
			Target:  migrationv1.TargetDatabase{DatabaseRef: bench.Database("pg17.svc", fmt.Sprintf("app_%05d", i), "target")},
			Objects: &migrationv1.ObjectSelector{Include: []string{"public.*"}, Exclude: []string{"public.audit_*"}},
		},
	}
}

// prepare creates the two credentials Secrets every MigrationJob names.
func prepare(ctx context.Context, c client.Client, ns string, _ int) error {
	return testenv.References{Database: []string{"source", "target"}}.Create(ctx, c, ns)
}

// floor makes the operator's writes for one MigrationJob (its finalizer was
// added by admission): the status checkpoint naming the precheck Job (and
// its Event), the very Job the operator renders with its controller
// reference, the status with the step Running.
func floor(ctx context.Context, c client.Client, obj client.Object) error {
	mj := obj.(*migrationv1.MigrationJob)
	job, err := controller.DesiredFirstJob(mj, agentImage, c.Scheme())
	if err != nil {
		return err
	}
	orig := mj.DeepCopy()
	now := metav1.Now()
	mj.Status.ObservedGeneration = mj.Generation
	mj.Status.Phase, mj.Status.StartTime = migrationv1.PhasePrechecking, &now
	mj.Status.Precheck = &migrationv1.PrecheckResult{}
	mj.Status.Steps = []migrationv1.StepStatus{{Step: contract.StepPrecheck, AgentRun: cairnv1.AgentRun{JobName: job.Name}, Cluster: migrationv1.ClusterLocal,
		Namespace: mj.Namespace, Phase: migrationv1.StepPending}}
	msg := fmt.Sprintf("starting step %s: Job %s/%s", contract.StepPrecheck, mj.Namespace, job.Name)
	conditions.MarkReconciling(mj, migrationv1.StepRunningReason, msg)
	if err := c.Status().Patch(ctx, mj, client.MergeFrom(orig)); err != nil {
		return err
	}
	if err := bench.Event(ctx, c, mj, migrationv1.GroupVersion.String(), "MigrationJob", corev1.EventTypeNormal,
		migrationv1.StepRunningReason, "PhasePrechecking", msg); err != nil {
		return err
	}
	if err := c.Create(ctx, job); err != nil {
		return err
	}
	orig = mj.DeepCopy()
	st := &mj.Status.Steps[0]
	st.Phase, st.StartTime = migrationv1.StepRunning, &job.CreationTimestamp
	conditions.MarkReconciling(mj, migrationv1.StepRunningReason,
		fmt.Sprintf("checking source and target: Job %s/%s running", mj.Namespace, job.Name))
	return c.Status().Patch(ctx, mj, client.MergeFrom(orig))
}

// done: a MigrationJob prechecking for its generation with its precheck
// step running (bench.AllDone then wants every precheck Job there).
func done(o client.Object) bool {
	mj := o.(*migrationv1.MigrationJob)
	st := mj.Status.Step(contract.StepPrecheck)
	return mj.Status.ObservedGeneration == mj.Generation && mj.Status.Phase == migrationv1.PhasePrechecking &&
		st != nil && st.Phase == migrationv1.StepRunning
}

func main() {
	bench.Main(bench.Kind{Title: "migration operator", Object: "MigrationJob", Controller: "migrationjob", Bases: []string{"migration"},
		Operator: operator.New, Args: []string{"--agent-image=" + agentImage}, Prepare: prepare, New: migrationJob, Floor: floor,
		Converged: bench.AllDone(&migrationv1.MigrationJobList{}, &batchv1.JobList{}, done),
	})
}
