package controller_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	backupv1 "cairn.dev/apis/backup/v1"
	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/libs/agentjob"
	cairnmgr "cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/restore/internal/controller"
	"cairn.dev/operators/restore/internal/operator"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.OperatorMain(m, operator.New("test"), &env, "restore", "backup")
}

const (
	agentImage = "registry.test/cairn/agent:test"
	timeout    = 30 * time.Second
	tick       = 100 * time.Millisecond
)

// operatorOptions tune startOperator.
type operatorOptions struct {
	config         *rest.Config
	leaderElection bool
	// args are command-line flags (testenv.OperatorOptions.Args).
	args []string
}

// startOperator starts the restore operator in-process as main wires it
// (operator.New), with the test's timings, serving the webhooks where the
// installed webhook configurations point; it stops when the test ends.
func startOperator(t *testing.T, oo operatorOptions) *testenv.Operator {
	t.Helper()
	op := operator.New("test")
	op.Setup = func(ctx context.Context, mgr ctrl.Manager, o *cairnmgr.Options) error {
		o.RateLimiterMaxDelay = 2 * time.Second
		r := &controller.RestoreJobReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), time.Minute),
			Agent: agentjob.Agent{AgentImage: agentImage}, WaitInterval: 2 * time.Second}
		return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
	}
	return env.StartOperatorForTest(t, op, testenv.OperatorOptions{Config: oo.config, LeaderElection: oo.leaderElection, Args: oo.args})
}

func namespace(t *testing.T) string {
	t.Helper()
	// The objects the tests' RestoreJobs name: a RestoreJob whose references
	// are missing runs nothing (TestMissingReference*).
	return env.NamespaceWith(t, "restore", testenv.References{Database: []string{"orders-db-credentials", "scratch-db-credentials"},
		S3: []string{"s3-credentials"}, PVCs: []string{"backups"}})
}

func sourceDB() cairnv1.DatabaseRef {
	return cairnv1.DatabaseRef{
		Engine: cairnv1.PostgresEngine, Host: "orders-db.shop.svc", Port: 5432, Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db-credentials"},
	}
}

func scratchDB() cairnv1.DatabaseRef {
	return cairnv1.DatabaseRef{
		Engine: cairnv1.PostgresEngine, Host: "scratch-db", Database: "orders_verify",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-db-credentials"},
	}
}

func s3Storage() cairnv1.StorageSpec {
	return cairnv1.StorageSpec{S3: &cairnv1.S3Storage{
		Endpoint: "s3.eu-central-1.amazonaws.com", Bucket: "cairn-backups", Prefix: "prod",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-credentials"},
	}}
}

// createBackupJob creates a BackupJob and, when last is set, gives it that
// last successful artifact — as the backup operator would (none runs here).
func createBackupJob(t *testing.T, ns, name string, db cairnv1.DatabaseRef, last *cairnv1.Artifact) *backupv1.BackupJob {
	t.Helper()
	bj := &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: backupv1.BackupJobSpec{
			Database: db, Schedule: "0 2 * * *",
			Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups", SubPath: "orders"}},
		},
	}
	if err := env.Client.Create(context.Background(), bj); err != nil {
		t.Fatal(err)
	}
	if last != nil {
		setLastArtifact(t, bj, *last)
	}
	return bj
}

func setLastArtifact(t *testing.T, bj *backupv1.BackupJob, a cairnv1.Artifact) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(func() error {
		cur := &backupv1.BackupJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(bj), cur); err != nil {
			return err
		}
		cur.Status.LastArtifact = &a
		cur.Status.LastResult = backupv1.RunSucceeded
		return env.Client.Status().Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
}

func artifactOf(bj, stamp string) cairnv1.Artifact {
	name := fmt.Sprintf("shop_%s_%s.pgdump.zst", bj, stamp)
	return cairnv1.Artifact{Path: "shop/" + bj + "/" + name, Size: 1234, Checksum: "sha256:" + fmt.Sprintf("%064d", len(stamp))}
}

func restoreJob(ns, name string, src restorev1.RestoreSource) *restorev1.RestoreJob {
	return &restorev1.RestoreJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       restorev1.RestoreJobSpec{Source: src, Target: scratchDB()},
	}
}

func fromBackupJob(name, artifact string) restorev1.RestoreSource {
	return restorev1.RestoreSource{BackupJob: &restorev1.BackupJobSource{Name: name, Artifact: artifact}}
}

func get(g Gomega, obj client.Object) client.Object {
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	return obj
}

// current reads rj from the API server.
func current(g Gomega, rj *restorev1.RestoreJob) *restorev1.RestoreJob {
	return testenv.Current(g, env.Client, rj)
}

// phaseOf polls rj's phase.
func phaseOf(rj *restorev1.RestoreJob) func(Gomega) restorev1.Phase {
	return func(g Gomega) restorev1.Phase { return current(g, rj).Status.Phase }
}

// waitForJob waits until rj's Job exists and returns it.
func waitForJob(t *testing.T, rj *restorev1.RestoreJob) *batchv1.Job {
	t.Helper()
	return testenv.WaitForJob(t, env.Client, rj.Namespace, rj.Name+"-restore")
}

// jobs lists the Jobs in ns.
func jobs(g Gomega, ns string) []batchv1.Job {
	return testenv.Jobs(g, env.Client, ns)
}

// envOf is the value of the agent's variable name ("" when it has none).
func envOf(job *batchv1.Job, name string) string {
	return testenv.AgentEnv(job)[name].Value
}

// agentSuccess is the agent's termination message after restoring a.
func agentSuccess(t *testing.T, a cairnv1.Artifact) string {
	t.Helper()
	now := time.Now().UTC()
	b, err := contract.Marshal(contract.Result{Artifact: a.Path, Size: a.Size, Checksum: a.Checksum,
		Start: now.Add(-3 * time.Second), End: now, DurationSeconds: 3, Engine: "postgres"})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// completeJob marks job Complete after one successful pod, as the job controller would.
func completeJob(t *testing.T, job *batchv1.Job, restored cairnv1.Artifact) {
	t.Helper()
	testenv.CompleteJob(t, env.Client, job, agentSuccess(t, restored))
}

// failJob marks job Failed after attempts failed pods (BackoffLimitExceeded).
func failJob(t *testing.T, job *batchv1.Job, attempts int32, agentError string) {
	t.Helper()
	testenv.FailJob(t, env.Client, job, attempts, string(contract.FailureLine(agentError, "")))
}

// startJob marks job as running one pod.
func startJob(t *testing.T, job *batchv1.Job) {
	t.Helper()
	testenv.UpdateJobStatus(t, env.Client, job, func(s *batchv1.JobStatus) { s.Active = 1 })
}

// kstatusOf computes rj's kstatus, as kubectl wait, Flux and Argo CD do.
func kstatusOf(rj *restorev1.RestoreJob) func(Gomega) status.Status {
	return func(g Gomega) status.Status { return testenv.KStatus(g, env.Client, rj) }
}
