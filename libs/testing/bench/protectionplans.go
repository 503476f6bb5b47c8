package bench

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

func plan(ns string, i int) client.Object {
	return &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("db-%05d", i)},
		Spec: platformv1.ProtectionPlanSpec{
			Database: Database("db.svc", fmt.Sprintf("app_%05d", i), "db"),
			TimeZone: "Asia/Shanghai",
			Backup: platformv1.BackupTemplate{
				Schedule: "0 2 * * *",
				Storage:  S3Store("s3"),
			},
			Verification: platformv1.VerificationSpec{
				EveryNBackups: ptr.To(int32(2)),
				RestoreInto: platformv1.ScratchDatabase{Host: "scratch.svc", Database: fmt.Sprintf("verify_%05d", i),
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch"}},
			},
			Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
		},
	}
}

// planPrepare creates the Secrets the plans' children name (the orchestrator
// itself reads no Secret; the child operators check them).
func planPrepare(ctx context.Context, c client.Client, ns string, _ int) error {
	return testenv.References{Database: []string{"db", "scratch"}, S3: []string{"s3"}}.Create(ctx, c, ns)
}

// planStatus sets the plan's status as the orchestrator writes it before any
// backup ran, with BackupHealthy's reason and message as given.
func planStatus(p *platformv1.ProtectionPlan, reason, msg string) {
	p.Status.ObservedGeneration = p.Generation
	p.Status.Phase = platformv1.PhasePending
	p.Status.LastBackup = &platformv1.BackupRecord{BackupJob: p.Name}
	conditions.Set(p, platformv1.BackupHealthyCondition, metav1.ConditionUnknown, reason, msg)
	conditions.Set(p, platformv1.RecoverabilityVerifiedCondition, metav1.ConditionUnknown, platformv1.NoVerificationYetReason,
		"no verification yet: waiting for the first successful backup")
	conditions.Set(p, platformv1.ObjectivesMetCondition, metav1.ConditionUnknown, "NotMeasured", "rpo: no successful backup yet")
	conditions.MarkReconciling(p, reason, msg)
}

// planFloor makes the orchestrator's writes for one plan (its finalizer was
// added by admission): the very BackupJob it renders, with its controller
// reference, then the status mirroring that BackupJob, and its Event. The
// operator's pass goes on with the BackupJob it created, so it writes the
// planStatus once (measured: 2.0 writes and 1.0 Event per plan).
func planFloor(desired func(*platformv1.ProtectionPlan) *backupv1.BackupJob) func(context.Context, client.Client, client.Object) error {
	return func(ctx context.Context, c client.Client, obj client.Object) error {
		p := obj.(*platformv1.ProtectionPlan)
		if err := CreateOwned(ctx, c, p, desired(p)); err != nil {
			return err
		}
		reason, msg := conditions.NotYetReportedReason, fmt.Sprintf("BackupJob %s has not reported Ready yet", p.Name)
		if err := PatchStatus(ctx, c, p, func() { planStatus(p, reason, msg) }); err != nil {
			return err
		}
		return Transition(ctx, c, p, reason, "PhasePending", msg)
	}
}

// planDone: a ProtectionPlan that has recorded its BackupJob for its
// generation (AllDone then wants every BackupJob there).
func planDone(o client.Object) bool {
	p := o.(*platformv1.ProtectionPlan)
	bh := conditions.Get(p, platformv1.BackupHealthyCondition)
	return p.Status.ObservedGeneration == p.Generation && bh != nil && bh.Reason != platformv1.BackupJobMissingReason
}

// ProtectionPlans is the orchestrator's bench (run by
// operators/orchestrator/internal/bench with the operator and the BackupJob
// its controller renders), like BackupJobs: N ProtectionPlans (each its
// own database, backups to S3, verification every 2 backups, an RPO).
// Neither the backup operator nor pods run here: a plan has converged when
// its child BackupJob exists and the plan's status, for its generation,
// reflects that BackupJob (its BackupHealthy condition no longer says
// BackupJobMissing). `make bench BENCH_OPERATORS=orchestrator`.
func ProtectionPlans(op func(version string) manager.Operator, desired func(*platformv1.ProtectionPlan) *backupv1.BackupJob) Kind {
	return Kind{Title: "orchestrator", Bases: []string{"orchestrator", "backup", "restore", "migration"},
		Operator: op, Prepare: planPrepare, New: plan, Floor: planFloor(desired),
		Converged: AllDone(&platformv1.ProtectionPlanList{}, &backupv1.BackupJobList{}, planDone),
	}
}
