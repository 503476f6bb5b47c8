package controller_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/agent/contract"
	cairnv1 "cairn.dev/apis/meta/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	"cairn.dev/libs/agentjob"
	cairnmgr "cairn.dev/libs/manager"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/migration/internal/controller"
	"cairn.dev/operators/migration/internal/operator"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.OperatorMain(m, operator.New("test"), &env)
}

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
			Agent: agentjob.Agent{AgentImage: agentImage}, PollInterval: 300 * time.Millisecond, ReplicationInterval: 500 * time.Millisecond}
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
	ns := env.NamespaceWith(t, "migration", testenv.References{Database: []string{"source-credentials", "target-credentials"}, S3: []string{"s3-credentials"}})
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	testenv.ApplyYAML(t, env.Client, filepath.Join(root, "deploy", "migration", "admission", "secret_switch_policy.yaml"))
	if err := env.GrantInNamespace(ctx, "migration", filepath.Join(root, "deploy", "migration", "rbac", "secret_switcher.yaml"), ns); err != nil {
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
	return testenv.Current(g, env.Client, mj)
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

func jobNames(c client.Client, ns string) func(Gomega) []string {
	return func(g Gomega) []string {
		var out []string
		for _, j := range testenv.Jobs(g, c, ns) {
			out = append(out, j.Name)
		}
		return out
	}
}

// envOf is the agent's variable name: its value, or "secret:<name>/<key>"
// for one read from a Secret; false when the agent has no such variable.
func envOf(job *batchv1.Job, name string) (string, bool) {
	e, ok := testenv.AgentEnv(job)[name]
	if ok && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
		return "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key, true
	}
	return e.Value, ok
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
	testenv.CompleteJob(t, c, job, string(b))
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
	testenv.FailJob(t, c, job, attempts, string(contract.FailureLine(agentError, code)))
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
	return func(g Gomega) status.Status { return testenv.KStatus(g, env.Client, mj) }
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
