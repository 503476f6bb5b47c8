package controller_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	cairnmgr "cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/orchestrator/internal/controller"
	"cairn.dev/operators/orchestrator/internal/operator"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.OperatorMain(m, operator.New("test"), &env, "orchestrator", "backup", "restore", "migration")
}

const (
	timeout = 30 * time.Second
	tick    = 100 * time.Millisecond
)

// startOperator starts the orchestrator in-process as main wires it
// (operator.New), as user — the generated ClusterRole and the
// leader-election Role only — with leader election and the webhooks served
// where the installed webhook configurations point, on a clock the test
// controls. It stops when the test ends.
func startOperator(t *testing.T, now time.Time) *clocktesting.FakePassiveClock {
	t.Helper()
	g := NewWithT(t)
	cfg, err := env.AsGeneratedRole(context.Background(), testenv.RoleOptions{Operator: "orchestrator"})
	g.Expect(err).NotTo(HaveOccurred())
	clock := clocktesting.NewFakePassiveClock(now)
	op := operator.New("test")
	op.Setup = func(ctx context.Context, mgr ctrl.Manager, o *cairnmgr.Options) error {
		o.RateLimiterMaxDelay = 2 * time.Second
		r := &controller.ProtectionPlanReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), time.Minute)}
		r.Clock = clock
		return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
	}
	env.StartOperatorForTest(t, op, testenv.OperatorOptions{Config: cfg, LeaderElection: true})
	return clock
}

func namespace(t *testing.T) string {
	t.Helper()
	return env.NamespaceWith(t, "plan", testenv.References{})
}

func protectedDB() cairnv1.DatabaseRef {
	return cairnv1.DatabaseRef{
		Engine: cairnv1.PostgresEngine, Host: "orders-db.shop.svc", Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db-credentials"},
	}
}

// plan is a ProtectionPlan verifying every second backup into a scratch
// database on another server, with a 26 h RPO.
func plan(ns, name string) *platformv1.ProtectionPlan {
	return &platformv1.ProtectionPlan{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: platformv1.ProtectionPlanSpec{
			Database: protectedDB(),
			TimeZone: "Asia/Shanghai",
			Backup: platformv1.BackupTemplate{
				Schedule: "0 2 * * *",
				Storage:  cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "orders"}},
			},
			Verification: platformv1.VerificationSpec{
				EveryNBackups: ptr.To(int32(2)),
				RestoreInto: platformv1.ScratchDatabase{
					Host: "scratch-db.verify.svc", Database: "orders_verify",
					CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-credentials"},
				},
			},
			Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
		},
	}
}

func get[T client.Object](g Gomega, obj T) T {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return obj
}

// current reads the plan from the API server.
func current(g Gomega, p *platformv1.ProtectionPlan) *platformv1.ProtectionPlan {
	return testenv.Current(g, env.Client, p)
}

// updatePlan applies change to the newest p and updates it, again on a
// conflict (the operator writes the plan's status meanwhile, which moves its
// resourceVersion); it returns the plan as updated.
func updatePlan(g Gomega, p *platformv1.ProtectionPlan, change func(*platformv1.ProtectionPlan)) *platformv1.ProtectionPlan {
	var cur *platformv1.ProtectionPlan
	g.Eventually(func(g Gomega) error {
		cur = current(g, p)
		change(cur)
		return env.Client.Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
	return cur
}

// condition polls the plan's condition typ as "Status/Reason".
func condition(p *platformv1.ProtectionPlan, typ string) func(Gomega) string {
	return func(g Gomega) string {
		for _, c := range current(g, p).Status.Conditions {
			if c.Type == typ {
				return string(c.Status) + "/" + c.Reason
			}
		}
		return "missing"
	}
}

// backupJobOf waits for the plan's BackupJob and returns it.
func backupJobOf(t *testing.T, p *platformv1.ProtectionPlan) *backupv1.BackupJob {
	t.Helper()
	bj := &backupv1.BackupJob{}
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: p.Namespace, Name: p.Name}, bj)
	}).WithTimeout(timeout).WithPolling(tick).Should(Succeed())
	return bj
}

// restoreJob waits for RestoreJob name in ns and returns it.
func restoreJob(t *testing.T, ns, name string) *restorev1.RestoreJob {
	t.Helper()
	rj := &restorev1.RestoreJob{}
	NewWithT(t).Eventually(func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, rj)
	}).WithTimeout(timeout).WithPolling(tick).Should(Succeed())
	return rj
}

// restoreJobNames lists the RestoreJobs in ns.
func restoreJobNames(g Gomega, ns string) []string {
	list := &restorev1.RestoreJobList{}
	g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, rj := range list.Items {
		out = append(out, rj.Name)
	}
	return out
}

// backupSucceeded reports a successful backup run finished at at with
// artifact a on bj, as the backup operator would (none runs here).
func backupSucceeded(t *testing.T, bj *backupv1.BackupJob, at time.Time, a cairnv1.Artifact) {
	t.Helper()
	updateBackupStatus(t, bj, func(cur *backupv1.BackupJob) {
		ts := metav1.NewTime(at)
		cur.Status.LastBackupTime, cur.Status.LastSuccessfulTime = &ts, &ts
		cur.Status.LastResult = backupv1.RunSucceeded
		cur.Status.LastArtifact = &a
		cur.Status.Phase = backupv1.PhaseSucceeded
		setReady(cur, metav1.ConditionTrue, cairnv1.SucceededReason, "the last run succeeded")
	})
}

// setReady sets bj's Ready condition for its current generation.
func setReady(bj *backupv1.BackupJob, s metav1.ConditionStatus, reason, msg string) {
	c := metav1.Condition{Type: cairnv1.ReadyCondition, Status: s, Reason: reason, Message: msg,
		ObservedGeneration: bj.Generation, LastTransitionTime: metav1.Now()}
	for i := range bj.Status.Conditions {
		if bj.Status.Conditions[i].Type == c.Type {
			bj.Status.Conditions[i] = c
			return
		}
	}
	bj.Status.Conditions = append(bj.Status.Conditions, c)
}

func updateBackupStatus(t *testing.T, bj *backupv1.BackupJob, mutate func(*backupv1.BackupJob)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &backupv1.BackupJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(bj), cur); err != nil {
			return err
		}
		cur.Status.ObservedGeneration = cur.Generation
		mutate(cur)
		return env.Client.Status().Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
}

// finishRestore reports rj finished after d, as the restore operator would.
func finishRestore(t *testing.T, rj *restorev1.RestoreJob, phase restorev1.Phase, d time.Duration, msg string) {
	t.Helper()
	finishRestoreReason(t, rj, phase, d, cairnv1.FailedReason, msg)
}

// finishRestoreReason is finishRestore with the reason of a failure.
func finishRestoreReason(t *testing.T, rj *restorev1.RestoreJob, phase restorev1.Phase, d time.Duration, reason, msg string) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &restorev1.RestoreJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(rj), cur); err != nil {
			return err
		}
		start := metav1.NewTime(time.Now().Add(-d).Truncate(time.Second))
		end := metav1.NewTime(start.Add(d))
		cur.Status.ObservedGeneration = cur.Generation
		cur.Status.Phase = phase
		cur.Status.StartTime, cur.Status.CompletionTime = &start, &end
		ready := metav1.Condition{Type: cairnv1.ReadyCondition, Status: metav1.ConditionTrue, Reason: cairnv1.SucceededReason,
			Message: msg, ObservedGeneration: cur.Generation, LastTransitionTime: metav1.Now()}
		if phase == restorev1.PhaseFailed {
			ready.Status, ready.Reason = metav1.ConditionFalse, reason
			cur.Status.Conditions = append(cur.Status.Conditions, metav1.Condition{Type: cairnv1.StalledCondition,
				Status: metav1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: cur.Generation, LastTransitionTime: metav1.Now()})
		}
		cur.Status.Conditions = append(cur.Status.Conditions, ready)
		return env.Client.Status().Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
}

func artifact(stamp string) cairnv1.Artifact {
	return cairnv1.Artifact{Path: "ns/orders/orders_" + stamp + ".pgdump.zst", Size: 1234, Checksum: "sha256:" + strings.Repeat("0", 64)}
}

// eventReasons returns "Type/Reason" of each Event about the plan.
func eventReasons(p *platformv1.ProtectionPlan) func(Gomega) []string {
	return testenv.EventReasons(env.Client, p.Namespace, "ProtectionPlan", p.Name)
}
