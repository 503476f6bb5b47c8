package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/testing/testenv"
)

func mysqlDB(name string) cairnv1.DatabaseRef {
	return cairnv1.DatabaseRef{Engine: cairnv1.MySQLEngine, Host: "shop-db.shop.svc", Port: 3306, Database: name,
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db-credentials"}}
}

func pitRestore(ns, name, bj, at string) *restorev1.RestoreJob {
	rj := restoreJob(ns, name, restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: bj}, PointInTime: at})
	rj.Spec.Target = mysqlDB("shop_at")
	return rj
}

// TestPointInTimeRestore: spec.source.pointInTime hands the agent the time
// (no artifact: the agent chooses the newest base before it) and records
// the second reached and the base used; a BackupJob without point-in-time
// stalls it before any Job; the agent's refusal of a time outside the
// window fails it with that reason.
func TestPointInTimeRestore(t *testing.T) {
	g := NewWithT(t)
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	ctx := context.Background()
	last := artifactOf("shop", "20260105T020000.000Z")
	bj := createBackupJob(t, ns, "shop", mysqlDB("shop"), nil)
	g.Eventually(func() error {
		cur := &backupv1.BackupJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bj), cur); err != nil {
			return err
		}
		cur.Spec.PointInTime = &backupv1.PointInTimeSpec{}
		return env.Client.Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())
	setLastArtifact(t, bj, last)
	plain := createBackupJob(t, ns, "plain", mysqlDB("plain"), &last)
	_ = plain

	// Restored to a time: the target time goes to the agent.
	at := "2026-12-05T14:03:07+08:00"
	rj := pitRestore(ns, "to-a-time", "shop", at)
	g.Expect(env.Client.Create(ctx, rj)).To(Succeed())
	job := waitForJob(t, rj)
	e := testenv.AgentEnv(job)
	g.Expect(e[contract.EnvRecoveryTarget].Value).To(Equal(at))
	g.Expect(e).NotTo(HaveKey(contract.EnvArtifact), "the agent chooses the base")
	reached := time.Date(2026, 12, 5, 6, 3, 7, 0, time.UTC)
	res, err := contract.Marshal(contract.Result{Artifact: last.Path, Size: last.Size, Checksum: last.Checksum,
		Start: reached, End: reached.Add(time.Minute), Engine: "mysql", RecoveryPoint: reached})
	g.Expect(err).NotTo(HaveOccurred())
	testenv.CompleteJob(t, env.Client, job, string(res))
	g.Eventually(phaseOf(rj)).WithTimeout(timeout).Should(Equal(restorev1.PhaseSucceeded))
	got := current(g, rj)
	g.Expect(got.Status.RecoveryPoint).NotTo(BeNil())
	g.Expect(got.Status.RecoveryPoint.UTC()).To(Equal(reached))
	g.Expect(got.Status.Artifact.Path).To(Equal(last.Path), "the base the agent used")
	ready := conditions.Get(got, cairnv1.ReadyCondition)
	g.Expect(ready.Message).To(ContainSubstring("to " + at + " (reached 2026-12-05T06:03:07Z from base " + last.Path + ")"))

	// A BackupJob without point-in-time: stalled, no Job.
	off := pitRestore(ns, "no-archive", "plain", "latest")
	g.Expect(env.Client.Create(ctx, off)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := conditions.Get(current(g, off), cairnv1.StalledCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(restorev1.RestoreJobPointInTimeNotEnabledReason))
		g.Expect(c.Message).To(ContainSubstring("BackupJob plain has no spec.pointInTime"))
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(jobs(g, ns)).NotTo(ContainElement(HaveField("ObjectMeta.Name", off.JobName())))

	// Refused by the agent: outside the window, named by its code.
	early := pitRestore(ns, "too-early", "shop", "2020-01-01T00:00:00Z")
	g.Expect(env.Client.Create(ctx, early)).To(Succeed())
	job = waitForJob(t, early)
	reason := "restore failed: 2020-01-01T00:00:00Z is before the oldest base (2026-12-05T02:00:00Z): outside the recoverable window"
	testenv.AgentPod(t, env.Client, job, 1, contract.ExitFailure, string(contract.FailureLine(reason, contract.CodeOutsideWindow)))
	testenv.UpdateJobStatus(t, env.Client, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		s.Failed, s.Active = 1, 0
		s.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now, LastProbeTime: now},
		}
	})
	g.Eventually(phaseOf(early)).WithTimeout(timeout).Should(Equal(restorev1.PhaseFailed))
	stalled := conditions.Get(current(g, early), cairnv1.StalledCondition)
	g.Expect(stalled.Reason).To(Equal(restorev1.RestoreJobOutsideWindowReason))
	g.Expect(stalled.Message).To(ContainSubstring("outside the recoverable window"))
}

// TestPointInTimeAdmission: a point-in-time source must name a BackupJob
// and no artifact, and a time with its zone or "latest"; the CRD refuses
// the rest before anything runs.
func TestPointInTimeAdmission(t *testing.T) {
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	for name, tc := range map[string]struct {
		src  restorev1.RestoreSource
		want string
	}{
		"no zone":       {restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "shop"}, PointInTime: "2026-12-05T14:03:07"}, "RFC 3339 time with its zone"},
		"yesterday":     {restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "shop"}, PointInTime: "yesterday"}, "RFC 3339 time with its zone"},
		"with artifact": {restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "shop", Artifact: "a.sql.zst"}, PointInTime: "latest"}, "without artifact"},
		"from a store": {restorev1.RestoreSource{Store: &restorev1.StoreSource{BackupJob: "shop/orders", Artifact: "a.sql.zst",
			Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}}, PointInTime: "latest"}, "restores a BackupJob's archive"},
	} {
		rj := restoreJob(ns, strings.ReplaceAll(name, " ", "-"), tc.src)
		err := env.Client.Create(context.Background(), rj)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Invalid naming %q", name, err, tc.want)
		}
	}
}

// TestPointInTimePostgresRestoreMemory: a PostgreSQL restore that recovers
// a physical base in a temporary server inside its pod (to a time, or a
// base restored as it is) gets the memory that server needs; a MySQL
// point-in-time restore and a plain PostgreSQL dump restore keep the
// agent's default.
func TestPointInTimePostgresRestoreMemory(t *testing.T) {
	g := NewWithT(t)
	startOperator(t, operatorOptions{})
	ns := namespace(t)
	ctx := context.Background()
	memory := func(job *batchv1.Job) string {
		return job.Spec.Template.Spec.Containers[0].Resources.Limits.Memory().String()
	}
	pg := scratchDB()
	pg.Host, pg.Database = "orders-db", "orders"
	base := cairnv1.Artifact{Path: "cairn/" + ns + "/orders/20260105T020000.000Z.pgbase.tar.zst", Size: 1, Checksum: "sha256:" + strings.Repeat("a", 64)}
	bj := createBackupJob(t, ns, "orders", pg, nil)
	g.Eventually(func() error {
		cur := &backupv1.BackupJob{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(bj), cur); err != nil {
			return err
		}
		cur.Spec.PointInTime = &backupv1.PointInTimeSpec{}
		return env.Client.Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())
	setLastArtifact(t, bj, base)

	toTime := restoreJob(ns, "pg-to-a-time", restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders"}, PointInTime: "latest"})
	toTime.Spec.Target.Engine, toTime.Spec.Target.Port = cairnv1.PostgresEngine, 5432
	g.Expect(env.Client.Create(ctx, toTime)).To(Succeed())
	g.Expect(memory(waitForJob(t, toTime))).To(Equal("1Gi"))

	asIs := restoreJob(ns, "pg-base", restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "orders"}})
	asIs.Spec.Target.Engine, asIs.Spec.Target.Port = cairnv1.PostgresEngine, 5432
	g.Expect(env.Client.Create(ctx, asIs)).To(Succeed())
	g.Expect(memory(waitForJob(t, asIs))).To(Equal("1Gi"))

	dump := artifactOf("plain", "20260105T020000.000Z")
	createBackupJob(t, ns, "plain", pg, &dump)
	plain := restoreJob(ns, "pg-dump", restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: "plain"}})
	plain.Spec.Target.Engine, plain.Spec.Target.Port = cairnv1.PostgresEngine, 5432
	g.Expect(env.Client.Create(ctx, plain)).To(Succeed())
	g.Expect(memory(waitForJob(t, plain))).To(Equal("256Mi"))

	my := pitRestore(ns, "my-to-a-time", "shop", "latest")
	createBackupJob(t, ns, "shop", mysqlDB("shop"), &dump)
	g.Eventually(func() error {
		cur := &backupv1.BackupJob{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop"}, cur); err != nil {
			return err
		}
		cur.Spec.PointInTime = &backupv1.PointInTimeSpec{}
		return env.Client.Update(ctx, cur)
	}).WithTimeout(timeout).Should(Succeed())
	g.Expect(env.Client.Create(ctx, my)).To(Succeed())
	g.Expect(memory(waitForJob(t, my))).To(Equal("256Mi"))
}
