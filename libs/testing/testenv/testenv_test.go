package testenv_test

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Scheme: testtype.Scheme(), CRDDirectoryPaths: []string{testtype.CRDDir()},
		WebhookManifestDirs: []string{testtype.WebhookDir()}}, &env)
}

// noter writes the operator's --note flag into each Widget's status.
type noter struct {
	client.Client
	note string
}

func (n *noter) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	w := &testtype.Widget{}
	if err := n.Get(ctx, req.NamespacedName, w); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if w.Status.Note == n.note {
		return reconcile.Result{}, nil
	}
	w.Status.Note = n.note
	return reconcile.Result{}, n.Status().Update(ctx, w)
}

// widgetOperator is an operator as its main.go declares it.
func widgetOperator() manager.Operator {
	var note string
	return manager.Operator{
		Name:        "widget",
		AddToScheme: []func(*runtime.Scheme) error{testtype.AddToScheme},
		Flags:       func(fs *flag.FlagSet) { fs.StringVar(&note, "note", "default", "What to write.") },
		Setup: func(_ context.Context, mgr ctrl.Manager, o *manager.Options) error {
			return ctrl.NewControllerManagedBy(mgr).For(&testtype.Widget{}).WithOptions(o.ControllerOptions()).
				Complete(&noter{Client: mgr.GetClient(), note: note})
		},
	}
}

func widget(t *testing.T, ns string) *testtype.Widget {
	t.Helper()
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	if err := env.Client.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func noteOf(w *testtype.Widget) func(Gomega) string {
	return func(g Gomega) string {
		got := &testtype.Widget{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(w), got)).To(Succeed())
		return got.Status.Note
	}
}

// can asks the API server whether cfg's user may do verb on resource.
func can(t *testing.T, cfg *rest.Config, verb, group, resource string) bool {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "some-ns", Verb: verb, Group: group, Resource: resource}}}
	if strings.Contains(resource, "/") {
		r.Spec.ResourceAttributes.Resource, r.Spec.ResourceAttributes.Subresource, _ = strings.Cut(resource, "/")
	}
	if err := c.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	return r.Status.Allowed
}

// The operator, started in-process as its main wires it, with its flags,
// as a user bound only to its role and its leader-election Role, with
// leader election on: it does its work.
func TestOperatorRunsAsItsRoleOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, err := env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: "widget",
		ClusterRoleFile:        filepath.Join(testtype.RBACDir(), "role.yaml"),
		LeaderElectionRoleFile: filepath.Join(testtype.RBACDir(), "leader_election_role.yaml")})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(can(t, cfg, "update", "test.cairn.dev", "widgets/status")).To(BeTrue())
	g.Expect(can(t, cfg, "delete", "test.cairn.dev", "widgets")).To(BeFalse(), "the role grants more than it says")
	g.Expect(can(t, cfg, "list", "", "secrets")).To(BeFalse(), "the user has more than its role")

	ns, err := env.Namespace(ctx, "op")
	g.Expect(err).NotTo(HaveOccurred())
	w := widget(t, ns)
	op := env.StartOperatorForTest(t, widgetOperator(), testenv.OperatorOptions{Config: cfg, LeaderElection: true, Args: []string{"--note=as its role"}})
	g.Expect(op.Options.LeaderElection).To(BeTrue())
	g.Eventually(noteOf(w)).WithTimeout(30 * time.Second).Should(Equal("as its role"))

	// Calling it again (another test) reuses the roles.
	_, err = env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: "widget",
		ClusterRoleFile:        filepath.Join(testtype.RBACDir(), "role.yaml"),
		LeaderElectionRoleFile: filepath.Join(testtype.RBACDir(), "leader_election_role.yaml")})
	g.Expect(err).NotTo(HaveOccurred())
}

// A role that lacks a permission the operator needs shows: its status
// writes are refused.
func TestARoleMissingAPermissionShows(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, err := env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: "widget-narrow",
		ClusterRoleFile: filepath.Join(testtype.RBACDir(), "role-without-status.yaml"), NoLeaderElection: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(can(t, cfg, "update", "test.cairn.dev", "widgets/status")).To(BeFalse())
	g.Expect(can(t, cfg, "watch", "test.cairn.dev", "widgets")).To(BeTrue())
	g.Expect(can(t, cfg, "create", "coordination.k8s.io", "leases")).To(BeFalse())

	_, err = env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: "widget-greedy",
		ClusterRoleFile: filepath.Join(testtype.RBACDir(), "role-wildcard.yaml"), NoLeaderElection: true})
	g.Expect(err).To(MatchError(ContainSubstring("wildcard")))

	_, err = env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: "widget-nole",
		ClusterRoleFile: filepath.Join(testtype.RBACDir(), "role.yaml"), LeaderElectionRoleFile: filepath.Join(testtype.RBACDir(), "role.yaml")})
	g.Expect(err).To(MatchError(ContainSubstring("no Role in")))

	// An operator that may not take its Lease never leads: StartOperator
	// says so instead of hanging.
	nobody, err := env.AddUser("nobody")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = env.StartOperator(ctx, widgetOperator(), testenv.OperatorOptions{Config: nobody, LeaderElection: true, ReadyTimeout: 3 * time.Second})
	g.Expect(err).To(MatchError(ContainSubstring("not elected leader")))
}

// The operators' own generated roles load from their default places.
func TestTheOperatorsGeneratedRoles(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		operator string
		allowed  [][3]string // verb, group, resource
		denied   [][3]string
	}{
		{"backup", [][3]string{{"create", "batch", "cronjobs"}, {"patch", "backup.cairn.dev", "backupjobs/status"}}, [][3]string{{"delete", "", "namespaces"}, {"create", "restore.cairn.dev", "restorejobs"}}},
		{"restore", [][3]string{{"create", "batch", "jobs"}, {"patch", "restore.cairn.dev", "restorejobs/status"}}, [][3]string{{"delete", "", "namespaces"}, {"update", "backup.cairn.dev", "backupjobs"}}},
	} {
		t.Run(c.operator, func(t *testing.T) {
			cfg, err := env.AsGeneratedRole(ctx, testenv.RoleOptions{Operator: c.operator})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range c.allowed {
				if !can(t, cfg, a[0], a[1], a[2]) {
					t.Errorf("%s may not %v", c.operator, a)
				}
			}
			for _, d := range c.denied {
				if can(t, cfg, d[0], d[1], d[2]) {
					t.Errorf("%s may %v", c.operator, d)
				}
			}
		})
	}
}

// A second manager of the same operator in the same process (another test,
// a takeover test) starts: controller names need not be unique.
func TestTwoOperatorsInOneProcess(t *testing.T) {
	g := NewWithT(t)
	ns, err := env.Namespace(context.Background(), "op")
	g.Expect(err).NotTo(HaveOccurred())
	w := widget(t, ns)
	first := env.StartOperatorForTest(t, widgetOperator(), testenv.OperatorOptions{Args: []string{"--note=first"}})
	g.Eventually(noteOf(w)).WithTimeout(30 * time.Second).Should(Equal("first"))
	g.Expect(first.Stop()).To(Succeed())
	env.StartOperatorForTest(t, widgetOperator(), testenv.OperatorOptions{Args: []string{"--note=second"},
		Options: func(o *manager.Options) { o.MaxConcurrentReconciles = 1 }})
	g.Eventually(noteOf(w)).WithTimeout(30 * time.Second).Should(Equal("second"))

	_, err = env.StartOperator(context.Background(), widgetOperator(), testenv.OperatorOptions{Args: []string{"--no-such-flag"}})
	g.Expect(err).To(MatchError(ContainSubstring("no-such-flag")))
}

// sizeLimit refuses Widgets larger than 10.
type sizeLimit struct{}

func (sizeLimit) ValidateCreate(_ context.Context, w *testtype.Widget) (admission.Warnings, error) {
	if w.Spec.Size > 10 {
		return nil, fmt.Errorf("size %d is larger than 10", w.Spec.Size)
	}
	return nil, nil
}

func (s sizeLimit) ValidateUpdate(ctx context.Context, _, w *testtype.Widget) (admission.Warnings, error) {
	return s.ValidateCreate(ctx, w)
}

func (sizeLimit) ValidateDelete(context.Context, *testtype.Widget) (admission.Warnings, error) {
	return nil, nil
}

// The operator's webhooks are served where the installed configuration
// points, as soon as StartOperator returns: the very next create is judged
// by them (the policy is Ignore, so a webhook not served lets it through).
// With --enable-webhooks=false they are not served.
func TestWebhooksServeWhenStartOperatorReturns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "hook")
	g.Expect(err).NotTo(HaveOccurred())
	op := widgetOperator()
	op.Webhooks = func(mgr ctrl.Manager) error {
		return ctrl.NewWebhookManagedBy(mgr, &testtype.Widget{}).WithValidator(sizeLimit{}).Complete()
	}
	running := env.StartOperatorForTest(t, op, testenv.OperatorOptions{})
	g.Expect(running.Options.EnableWebhooks).To(BeTrue())
	big := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "big"}, Spec: testtype.WidgetSpec{Size: 11}}
	g.Expect(env.Client.Create(ctx, big)).To(MatchError(ContainSubstring("size 11 is larger than 10")))
	small := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "small"}, Spec: testtype.WidgetSpec{Size: 3}}
	g.Expect(env.Client.Create(ctx, small)).To(Succeed())
	g.Expect(running.Stop()).To(Succeed())

	// --enable-webhooks=false: not served (the Ignore policy lets it in).
	env.StartOperatorForTest(t, op, testenv.OperatorOptions{Args: []string{"--enable-webhooks=false"}})
	g.Expect(env.Client.Create(ctx, big)).To(Succeed())
}
