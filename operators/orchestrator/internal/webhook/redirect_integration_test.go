package webhook_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	cairnv1 "cairn.dev/apis/meta/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	"cairn.dev/libs/access"
	"cairn.dev/libs/testing/testenv"
	"cairn.dev/operators/orchestrator/internal/operator"
	"cairn.dev/operators/orchestrator/internal/webhook"
)

func plan(ns, name string) *platformv1.ProtectionPlan {
	n := int32(3)
	return &platformv1.ProtectionPlan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: platformv1.ProtectionPlanSpec{
			Database: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine, Host: "orders-db.shop.svc", Database: "orders",
				CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "orders-creds"}},
			Backup: platformv1.BackupTemplate{Schedule: "0 2 * * *",
				Storage: cairnv1.StorageSpec{PVC: &cairnv1.PVCStorage{ClaimName: "backups"}}},
			Verification: platformv1.VerificationSpec{EveryNBackups: &n, RestoreInto: platformv1.ScratchDatabase{
				Host: "scratch-db.shop.svc", Database: "orders_verify", CredentialsSecretRef: cairnv1.LocalObjectReference{Name: "scratch-creds"}}},
			Objectives: platformv1.Objectives{RPO: metav1.Duration{Duration: 26 * time.Hour}},
		}}
}

// userClient binds user in ns to the ClusterRole role (created from
// platform/tenant_roles.yaml when missing) plus rules, and connects as them.
func userClient(t *testing.T, env *testenv.Env, ns, user string, rules ...rbacv1.PolicyRule) client.Client {
	t.Helper()
	ctx := t.Context()
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "cairn-edit"}, &rbacv1.ClusterRole{}); err != nil {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		testenv.ApplyYAML(t, env.Client, filepath.Join(root, "platform", "tenant_roles.yaml"))
	}
	if err := env.Client.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cairn-edit-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cairn-edit"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
	}); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.AddUser(user)
	if len(rules) > 0 {
		cfg, err = env.Tenant(ctx, ns, user, rules...)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func patchPlan(ctx context.Context, c client.Client, p *platformv1.ProtectionPlan, change func(*platformv1.ProtectionPlan)) error {
	cur := &platformv1.ProtectionPlan{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
		return err
	}
	base := cur.DeepCopy()
	change(cur)
	return c.Patch(ctx, cur, client.MergeFrom(base))
}

// TestAPlanUpdateThatRedirectsIsReviewedAgain is issue 47's demo attack: a
// user bound only to cairn-edit patches a plan someone else made so that
// its verification restores the whole backup, with the plan's credentials,
// into a server of their choice (spec.verification.restoreInto), or so
// that its backups read another server (spec.database.host). Both are
// refused naming the field; a user who may get the plan's Secrets and
// claim makes the same change; a label-only update asks nothing.
func TestAPlanUpdateThatRedirectsIsReviewedAgain(t *testing.T) {
	opts, err := testenv.ForOperator(operator.New("test"))
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.StartForTest(t, opts)
	mgr := env.ServeWebhooks(t, "cairn-orchestrator-approval-key", webhook.Setup)
	guard := access.For(mgr)
	ctx := t.Context()
	ns, err := env.Namespace(ctx, "plan-redirect")
	if err != nil {
		t.Fatal(err)
	}
	p := plan(ns, "p48")
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	eve := userClient(t, env, ns, "eve")

	testenv.Poll(t, 30*time.Second, "eve's label-only update admitted", func() error {
		return patchPlan(ctx, eve, p, func(p *platformv1.ProtectionPlan) { p.Labels = map[string]string{"team": "eve"} })
	})
	before := guard.Reviewer.Reviews()
	if err := patchPlan(ctx, eve, p, func(p *platformv1.ProtectionPlan) { p.Labels["tier"] = "gold" }); err != nil {
		t.Fatalf("label-only update: %v", err)
	}
	if n := guard.Reviewer.Reviews() - before; n != 0 {
		t.Fatalf("a label-only update sent %d SubjectAccessReviews, want 0", n)
	}

	redirects := map[string]func(*platformv1.ProtectionPlan){
		"spec.verification.restoreInto.host": func(p *platformv1.ProtectionPlan) {
			p.Spec.Verification.RestoreInto.Host, p.Spec.Verification.RestoreInto.Port = "127.0.0.1", 25417
			p.Spec.Verification.RestoreInto.Database = "stolen"
		},
		"spec.database.host": func(p *platformv1.ProtectionPlan) { p.Spec.Database.Host = "evil.example" },
	}
	for field, change := range redirects {
		err := patchPlan(ctx, eve, p, change)
		want := fmt.Sprintf(`user "eve" may not get secret "orders-creds" in namespace %q`, ns)
		if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "this update changes") ||
			!strings.Contains(err.Error(), field) {
			t.Errorf("eve's update of %s: %v; want refused with %q naming the field", field, err, want)
		}
	}

	alice := userClient(t, env, ns, "alice",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"orders-creds", "scratch-creds"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"persistentvolumeclaims"}, ResourceNames: []string{"backups"}, Verbs: []string{"get"}})
	testenv.Poll(t, 30*time.Second, "alice's restoreInto update admitted", func() error {
		return patchPlan(ctx, alice, p, redirects["spec.verification.restoreInto.host"])
	})
	got := &platformv1.ProtectionPlan{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Verification.RestoreInto.Host != "127.0.0.1" ||
		!guard.Approver.Approved(got, access.ProtectionPlanKind, access.ProtectionPlanChecks(got)) {
		t.Fatalf("alice's update not approved for its new uses: %+v %v", got.Spec.Verification.RestoreInto, got.Annotations)
	}
}
