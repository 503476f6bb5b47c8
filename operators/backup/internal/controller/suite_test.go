package controller_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	backupv1alpha1 "cairn.dev/apis/backup/v1alpha1"
	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/agentjob"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/backup/internal/controller"
	"cairn.dev/operators/backup/internal/operator"
)

var (
	env *testenv.Env
	// writes counts every API write the operator makes (not the tests').
	writes atomic.Int64
	// fullCronJobReads counts the operator's lists and watches of CronJobs
	// that ask for whole objects rather than metadata: the operator must
	// cache CronJobs as metadata only.
	fullCronJobReads atomic.Int64
	// reconcilerUnderTest lets tests set the clock (testClock reads it).
	clock atomic.Pointer[time.Time]
)

const agentImage = "example.test/cairn/agent:test"

// mysqlAgentImage is the test operator's --agent-images entry for Oracle
// MySQL servers (no PostgreSQL major is mapped: those run agentImage).
const mysqlAgentImage = "example.test/cairn/agent:test-mysql"

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(backupv1.AddToScheme(s))
	utilruntime.Must(backupv1alpha1.AddToScheme(s))
	return s
}

// TestMain starts kube-apiserver + etcd with the generated CRD and webhook
// configuration, and runs the operator in-process — as a user bound to
// nothing but the generated ClusterRole, so the whole suite proves the RBAC.
func TestMain(m *testing.M) {
	testenv.SetupLogging()
	root, err := testenv.RepoRoot()
	if err != nil {
		panic(err)
	}
	e, err := testenv.Start(testenv.Options{
		CRDDirectoryPaths:   []string{filepath.Join(root, "deploy/backup/crd/bases")},
		WebhookManifestDirs: []string{filepath.Join(root, "deploy/backup/webhook/generated")},
		Scheme:              scheme(),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	env = e
	ctx, cancel := context.WithCancel(context.Background())
	if err := installVolumePolicies(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: installing the volume admission policies:", err)
		cancel()
		_ = env.Stop()
		os.Exit(1)
	}
	if err := startOperator(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: starting the operator:", err)
		cancel()
		_ = env.Stop()
		os.Exit(1)
	}
	code := m.Run()
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

type countingTransport struct{ next http.RoundTripper }

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		writes.Add(1)
	} else if strings.HasSuffix(r.URL.Path, "/cronjobs") && !strings.Contains(r.Header.Get("Accept"), "PartialObjectMetadata") {
		fullCronJobReads.Add(1)
	}
	return c.next.RoundTrip(r)
}

// startOperator runs the backup operator in-process as main wires it
// (operator.New) with the test's clock and timings, as a user bound to
// nothing but the generated ClusterRole and the leader-election Role (which
// holds the approval key Secret, libs/access), counting its writes.
func startOperator(ctx context.Context) error {
	cfg, err := env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: "backup"})
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{rt} }
	op := operator.New("test")
	op.Setup = func(ctx context.Context, mgr ctrl.Manager, o *manager.Options) error {
		r := &controller.BackupJobReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), time.Hour),
			Agent: agentjob.Agent{AgentImage: agentImage, ResultGrace: 3 * time.Second,
				Images: agentjob.Images{MySQL: mysqlAgentImage}}, OperatorNamespace: o.LeaderElectionNamespace}
		r.Clock = testClock{}
		return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
	}
	_, err = env.StartOperator(ctx, op, testenv.OperatorOptions{Config: cfg})
	return err
}

// newNamespace makes a namespace for one test.
func newNamespace(t *testing.T) string {
	t.Helper()
	// The Secrets backupJob names: a BackupJob whose references are
	// missing runs nothing (TestMissingReference*).
	return env.NamespaceWith(t, "bj", testenv.References{Database: []string{"orders-db-credentials"}, S3: []string{"s3-credentials"}})
}

func backupJob(ns, name string) *backupv1.BackupJob {
	return &backupv1.BackupJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: backupv1.BackupJobSpec{
			Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "orders-db.db.svc", Database: "orders",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-db-credentials"}},
			Schedule: "0 2 * * *",
			TimeZone: "Asia/Shanghai",
			Storage: cairnv1.StorageSpec{S3: &cairnv1.S3Storage{Endpoint: "s3.example.test:9000", Bucket: "backups",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "s3-credentials"}}},
		},
	}
}

func create(t *testing.T, bj *backupv1.BackupJob) *backupv1.BackupJob {
	t.Helper()
	if err := env.Client.Create(context.Background(), bj); err != nil {
		t.Fatal(err)
	}
	return bj
}

// get reads a BackupJob fresh from the API server.
func get(g Gomega, key client.ObjectKey) *backupv1.BackupJob {
	bj := &backupv1.BackupJob{}
	g.Expect(env.Client.Get(context.Background(), key, bj)).To(Succeed())
	return bj
}

func cronJob(g Gomega, key client.ObjectKey) *batchv1.CronJob {
	cj := &batchv1.CronJob{}
	g.Expect(env.Client.Get(context.Background(), key, cj)).To(Succeed())
	return cj
}

// converged waits until the operator has acted on the current generation.
func converged(t *testing.T, key client.ObjectKey, phase backupv1.Phase) *backupv1.BackupJob {
	t.Helper()
	var bj *backupv1.BackupJob
	NewWithT(t).Eventually(func(g Gomega) {
		bj = get(g, key)
		g.Expect(bj.Status.ObservedGeneration).To(Equal(bj.Generation))
		g.Expect(bj.Status.Phase).To(Equal(phase))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	return bj
}

// finishRun plays the Job controller and kubelet: a Job like the CronJob's,
// its pod terminated with the agent's message, and the Job's final condition.
func finishRun(t *testing.T, bj *backupv1.BackupJob, name string, succeed bool, msg string) *batchv1.Job {
	t.Helper()
	return finishRunAt(t, bj, name, succeed, msg, metav1.Now())
}

// finishRunAt is finishRun with the Job finished at end.
func finishRunAt(t *testing.T, bj *backupv1.BackupJob, name string, succeed bool, msg string, end metav1.Time) *batchv1.Job {
	t.Helper()
	return finishRunWith(t, bj, name, succeed, msg, end, nil)
}

// finishRunWith is finishRunAt with mutate applied to the Job before it is
// created (nil: none).
func finishRunWith(t *testing.T, bj *backupv1.BackupJob, name string, succeed bool, msg string, end metav1.Time, mutate func(*batchv1.Job)) *batchv1.Job {
	t.Helper()
	ctx := context.Background()
	g := NewWithT(t)
	cj := cronJob(g, client.ObjectKeyFromObject(bj))
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: bj.Namespace, Name: name, Labels: cj.Spec.JobTemplate.Labels, Annotations: cj.Spec.JobTemplate.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cj, batchv1.SchemeGroupVersion.WithKind("CronJob"))}},
		Spec: cj.Spec.JobTemplate.Spec,
	}
	if mutate != nil {
		mutate(job)
	}
	g.Expect(env.Client.Create(ctx, job)).To(Succeed())
	code := int32(0)
	if !succeed {
		code = 1
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: bj.Namespace, Name: name + "-pod", Labels: map[string]string{}},
		Spec:       job.Spec.Template.Spec,
	}
	for k, v := range job.Spec.Template.Labels {
		pod.Labels[k] = v
	}
	pod.Labels["batch.kubernetes.io/job-name"] = name
	// As the Job controller makes it: controlled by its Job.
	pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(job, batchv1.SchemeGroupVersion.WithKind("Job"))}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())
	now := end
	pod.Status = corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "agent", Image: agentImage, ImageID: agentImage,
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg, StartedAt: now, FinishedAt: now, Reason: "Completed"}},
	}}}
	if !succeed {
		pod.Status.Phase = corev1.PodFailed
	}
	g.Expect(env.Client.Status().Update(ctx, pod)).To(Succeed())

	finishJobAt(g, job, metav1.NewTime(now.Add(-time.Minute)), end, succeed, "Job has reached the specified backoff limit")
	return job
}

// finishJob plays the Job controller: job started at start and is now
// complete, or failed (backoff limit exceeded) with message msg.
func finishJob(g Gomega, job *batchv1.Job, start metav1.Time, succeed bool, msg string) {
	finishJobAt(g, job, start, metav1.Now(), succeed, msg)
}

// finishJobAt is finishJob with the Job finished at now.
func finishJobAt(g Gomega, job *batchv1.Job, start, now metav1.Time, succeed bool, msg string) {
	job.Status.StartTime = &start
	if succeed {
		job.Status.Succeeded = 1
		job.Status.CompletionTime = &now
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now},
		}
	} else {
		job.Status.Failed = ptr.Deref(job.Spec.BackoffLimit, 0) + 1
		job.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", LastTransitionTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded", Message: msg, LastTransitionTime: now},
		}
	}
	g.Expect(env.Client.Status().Update(context.Background(), job)).To(Succeed())
}

func agentResult(artifact string) string {
	return fmt.Sprintf(`{"artifact":%q,"size":2048,"checksum":"sha256:%064x","start":"2026-12-01T18:00:00Z","end":"2026-12-01T18:01:00Z","durationSeconds":60,"engine":"postgres"}`, artifact, 7)
}

// update applies mutate to the latest BackupJob, retrying on conflicts with
// the operator's own status writes.
func update(t *testing.T, key client.ObjectKey, mutate func(*backupv1.BackupJob)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		bj := &backupv1.BackupJob{}
		if err := env.Client.Get(context.Background(), key, bj); err != nil {
			return err
		}
		mutate(bj)
		return env.Client.Update(context.Background(), bj)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testClock is the operator's clock in these tests: the time a test set
// (clock), else the real time.
type testClock struct{}

func (testClock) Now() time.Time {
	if t := clock.Load(); t != nil {
		return *t
	}
	return time.Now()
}

func (c testClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
