package controller_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	cairnmgr "cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/migration/internal/controller"
	"cairn.dev/operators/migration/internal/operator"
)

var env *testenv.Env

const (
	agentImage = "registry.test/cairn/agent:test"
	timeout    = 30 * time.Second
	tick       = 100 * time.Millisecond
)

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(migrationv1.AddToScheme(s))
	return s
}

func crdPaths(root string) []string {
	return []string{filepath.Join(root, "deploy", "migration", "crd", "bases")}
}

func TestMain(m *testing.M) {
	root, err := testenv.RepoRoot()
	if err != nil {
		panic(err)
	}
	testenv.Main(m, testenv.Options{
		CRDDirectoryPaths:   crdPaths(root),
		WebhookManifestDirs: []string{filepath.Join(root, "deploy", "migration", "webhook", "generated")},
		Scheme:              scheme(),
	}, &env)
}

// startOperator starts the migration operator in-process as main wires it,
// as its generated ClusterRole (and leader-election Role), with the test's
// timings; it stops when the test ends.
func startOperator(t *testing.T) *testenv.Operator {
	t.Helper()
	cfg, err := env.AsGeneratedRole(context.Background(), testenv.RoleOptions{Operator: "migration"})
	if err != nil {
		t.Fatal(err)
	}
	op := operator.New("test")
	op.Setup = func(ctx context.Context, mgr ctrl.Manager, o *cairnmgr.Options) error {
		o.RateLimiterMaxDelay = 2 * time.Second
		r := &controller.MigrationJobReconciler{Base: reconcile.NewBase(mgr, o.EventSource(), time.Minute),
			AgentImage: agentImage, PollInterval: 300 * time.Millisecond, ReplicationInterval: 500 * time.Millisecond}
		return r.SetupWithManager(ctx, mgr, o.ControllerOptions())
	}
	return env.StartOperatorForTest(t, op, testenv.OperatorOptions{Config: cfg, LeaderElection: true})
}

// namespace creates a namespace with the Secrets the tests' MigrationJobs
// name. Its app-db Secret is opted in to switchSecret as docs/migration.md
// says: labelled migration.cairn.dev/switchable, the operator granted
// cairn-migration-secret-switcher in the namespace, under the platform's
// ValidatingAdmissionPolicy (so the cutover's patch is the one the policy
// allows).
func namespace(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "migration")
	if err != nil {
		t.Fatal(err)
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	testenv.ApplyYAML(t, env.Client, filepath.Join(root, "deploy", "migration", "admission", "secret_switch_policy.yaml"))
	if err := env.GrantInNamespace(ctx, "migration", filepath.Join(root, "deploy", "migration", "rbac", "secret_switcher.yaml"), ns); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"source-credentials", "target-credentials"} {
		if err := env.Secret(ctx, ns, name, "username", "password"); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Secret(ctx, ns, "s3-credentials", "accessKeyID", "secretAccessKey"); err != nil {
		t.Fatal(err)
	}
	app := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-db",
		Labels: map[string]string{migrationv1.SwitchableLabel: migrationv1.SwitchableValue}}, StringData: map[string]string{
		"host": "orders-db.shop.svc", "port": "5432", "database": "orders", "sslmode": "require",
	}}
	if err := env.Client.Create(ctx, app); err != nil {
		t.Fatal(err)
	}
	return ns
}

func sourceDB() cairnv1.DatabaseRef {
	return cairnv1.DatabaseRef{
		Engine: cairnv1.PostgresEngine, Host: "orders-db.shop.svc", Port: 5432, Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "source-credentials"},
	}
}

func targetDB() migrationv1.TargetDatabase {
	return migrationv1.TargetDatabase{DatabaseRef: cairnv1.DatabaseRef{
		Engine: cairnv1.PostgresEngine, Host: "orders-db-v16.shop.svc", Database: "orders",
		CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "target-credentials"},
	}}
}

func migrationJob(ns, name string) *migrationv1.MigrationJob {
	return &migrationv1.MigrationJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: migrationv1.MigrationJobSpec{
			Source: sourceDB(), Target: targetDB(),
			Objects: &migrationv1.ObjectSelector{Include: []string{"public.*"}, Exclude: []string{"public.audit_*"}},
		},
	}
}

func current(g Gomega, mj *migrationv1.MigrationJob) *migrationv1.MigrationJob {
	cur := &migrationv1.MigrationJob{}
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(mj), cur)).To(Succeed())
	return cur
}

func phaseOf(mj *migrationv1.MigrationJob) func(Gomega) migrationv1.Phase {
	return func(g Gomega) migrationv1.Phase { return current(g, mj).Status.Phase }
}

func condition(g Gomega, mj *migrationv1.MigrationJob, typ string) *metav1.Condition {
	for _, c := range current(g, mj).Status.Conditions {
		if c.Type == typ {
			return &c
		}
	}
	return nil
}

// message is the message of mj's condition typ ("" while it has none).
func message(mj *migrationv1.MigrationJob, typ string) func(Gomega) string {
	return func(g Gomega) string {
		if c := condition(g, mj, typ); c != nil {
			return c.Message
		}
		return ""
	}
}

// waitForJob waits until the Job name exists in ns of cluster c and returns it.
func waitForJob(t *testing.T, c client.Client, ns, name string) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{}
	NewWithT(t).Eventually(func() error {
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, job)
	}).WithTimeout(timeout).WithPolling(tick).Should(Succeed(), "Job %s/%s", ns, name)
	return job
}

func jobs(g Gomega, c client.Client, ns string) []batchv1.Job {
	list := &batchv1.JobList{}
	g.Expect(c.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

func jobNames(c client.Client, ns string) func(Gomega) []string {
	return func(g Gomega) []string {
		var out []string
		for _, j := range jobs(g, c, ns) {
			out = append(out, j.Name)
		}
		return out
	}
}

func envOf(job *batchv1.Job, name string) (string, bool) {
	for _, e := range job.Spec.Template.Spec.Containers[0].Env {
		if e.Name == name {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				return "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key, true
			}
			return e.Value, true
		}
	}
	return "", false
}

// agentPod creates a pod of job (in cluster c) whose agent container
// terminated with exitCode and message — as the job controller and the
// kubelet would (there is neither in these tests).
func agentPod(t *testing.T, c client.Client, job *batchv1.Job, n int, exitCode int32, message string) {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{}
	for k, v := range job.Spec.Template.Labels {
		labels[k] = v
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: job.Namespace, Name: fmt.Sprintf("%s-%d", job.Name, n), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "batch/v1", Kind: "Job", Name: job.Name, UID: job.UID,
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
			}},
		},
		Spec: *job.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.NodeName = "node-1"
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	phase := corev1.PodSucceeded
	if exitCode != 0 {
		phase = corev1.PodFailed
	}
	pod.Status = corev1.PodStatus{
		Phase: phase,
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "agent", Image: pod.Spec.Containers[0].Image, ImageID: "sha256:abc", ContainerID: "containerd://abc",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: exitCode, Reason: map[bool]string{true: "Completed", false: "Error"}[exitCode == 0],
				Message: message, StartedAt: now, FinishedAt: metav1.NewTime(now.Add(time.Duration(n) * time.Millisecond)),
			}},
		}},
	}
	if err := c.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
}

// completeStep marks job Complete after one pod that reported res.
func completeStep(t *testing.T, c client.Client, job *batchv1.Job, res contract.MigrationResult) {
	t.Helper()
	if res.Step == "" {
		res.Step = job.Labels[migrationv1.StepLabel]
	}
	if res.Engine == "" {
		res.Engine = "postgres"
	}
	b, err := contract.MarshalMigration(res)
	if err != nil {
		t.Fatal(err)
	}
	agentPod(t, c, job, 1, 0, string(b))
	updateJobStatus(t, c, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		s.Succeeded, s.Active = 1, 0
		s.CompletionTime = &now
		s.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, Reason: "CompletionsReached", LastTransitionTime: now, LastProbeTime: now},
		}
	})
}

// failStep marks job Failed after attempts failed pods reporting agentError.
func failStep(t *testing.T, c client.Client, job *batchv1.Job, attempts int32, agentError string) {
	t.Helper()
	failStepWithCode(t, c, job, attempts, agentError, "")
}

// failStepWithCode fails job as failStep does, the agent reporting the
// failure code code (contract.Code…).
func failStepWithCode(t *testing.T, c client.Client, job *batchv1.Job, attempts int32, agentError, code string) {
	t.Helper()
	for i := range attempts {
		agentPod(t, c, job, int(i)+1, 1, string(contract.FailureLine(agentError, code)))
	}
	updateJobStatus(t, c, job, func(s *batchv1.JobStatus) {
		now := metav1.Now()
		s.Failed, s.Active = attempts, 0
		msg := "Job has reached the specified backoff limit"
		s.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobFailureTarget, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: msg, LastTransitionTime: now, LastProbeTime: now},
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: batchv1.JobReasonBackoffLimitExceeded, Message: msg, LastTransitionTime: now, LastProbeTime: now},
		}
	})
}

func updateJobStatus(t *testing.T, c client.Client, job *batchv1.Job, mutate func(*batchv1.JobStatus)) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &batchv1.Job{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(job), cur); err != nil {
			return err
		}
		if cur.Status.StartTime == nil {
			st := metav1.NewTime(time.Now().Add(-time.Second))
			cur.Status.StartTime = &st
		}
		mutate(&cur.Status)
		return c.Status().Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
}

// verification is a verify result over tables; bad ones differ.
func verification(method string, tables []string, bad map[string]string) *contract.Verification {
	v := &contract.Verification{Method: method, Tables: len(tables)}
	var mism, match []contract.TableCheck
	for _, tb := range tables {
		if reason, ok := bad[tb]; ok {
			mism = append(mism, contract.TableCheck{Table: tb, SourceRows: 100, TargetRows: 99, Reason: reason})
			v.Mismatched++
			continue
		}
		match = append(match, contract.TableCheck{Table: tb, SourceRows: 100, TargetRows: 100, Match: true})
		v.Matched++
	}
	v.Items = append(mism, match...)
	return v
}

// events lists the Events about the MigrationJob name in ns.
func eventReasons(ns, name string) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Regarding.Kind == "MigrationJob" {
				out = append(out, e.Type+"/"+e.Reason)
			}
		}
		return out
	}
}

func eventNotes(ns, name, reason string) func(Gomega) []string {
	return func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			if e.Regarding.Name == name && e.Reason == reason {
				out = append(out, e.Note)
			}
		}
		return out
	}
}

// kstatusOf computes mj's kstatus, as kubectl wait, Flux and Argo CD do.
func kstatusOf(mj *migrationv1.MigrationJob) func(Gomega) status.Status {
	return func(g Gomega) status.Status {
		cur := current(g, mj)
		cur.SetGroupVersionKind(migrationv1.GroupVersion.WithKind("MigrationJob"))
		raw, err := json.Marshal(cur)
		g.Expect(err).NotTo(HaveOccurred())
		u := &unstructured.Unstructured{}
		g.Expect(u.UnmarshalJSON(raw)).To(Succeed())
		res, err := status.Compute(u)
		g.Expect(err).NotTo(HaveOccurred())
		return res.Status
	}
}

func gone(c client.Client, obj client.Object) func() bool {
	return func() bool {
		err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		return apierrors.IsNotFound(err)
	}
}

func approve(t *testing.T, mj *migrationv1.MigrationJob) {
	t.Helper()
	NewWithT(t).Eventually(func() error {
		cur := &migrationv1.MigrationJob{}
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(mj), cur); err != nil {
			return err
		}
		cur.Spec.Cutover.Approved = true
		return env.Client.Update(context.Background(), cur)
	}).WithTimeout(timeout).Should(Succeed())
}

func contains(sub string) func(string) bool {
	return func(s string) bool { return strings.Contains(s, sub) }
}
