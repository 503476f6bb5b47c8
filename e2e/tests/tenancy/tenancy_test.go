package tenancy_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	backupv1 "cairn.dev/apis/backup/v1"
	migrationv1 "cairn.dev/apis/migration/v1"
	platformv1 "cairn.dev/apis/platform/v1"
	restorev1 "cairn.dev/apis/restore/v1"
	"cairn.dev/e2e/fixtures"
	"cairn.dev/e2e/install"
)

const timeout = time.Minute

// as connects to the cluster as user (impersonated by the admin).
func as(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Cluster.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: install.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// grant binds the ClusterRole role to subject in ns.
func grant(t *testing.T, ns, role string, subject rbacv1.Subject) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: role + "-"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
	NewWithT(t).Expect(env.Client.Create(context.Background(), rb)).To(Succeed())
}

func user(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

// TestTenantsAreIsolated: tenants A and B, each with the built-in `edit`
// role in their own namespace only (Cairn's kinds come from cairn-edit,
// aggregated into edit by kube-controller-manager). A creates a BackupJob in
// its namespace (through the backup operator's webhooks); A cannot read,
// list, create, change or delete Cairn objects in B's namespace, nor read
// B's Secrets, nor write status; the same for B. An observer with `view` in
// A reads A's BackupJob and cannot create one.
func TestTenantsAreIsolated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nsA, nsB := fixtures.Namespace(t, env.Client, "tenant-a-"), fixtures.Namespace(t, env.Client, "tenant-b-")
	grant(t, nsA, "edit", user("alice"))
	grant(t, nsB, "edit", user("bob"))
	grant(t, nsA, "view", user("olga"))
	alice, bob, olga := as(t, "alice"), as(t, "bob"), as(t, "olga")

	// The aggregation controller fills edit with cairn-edit: wait for it.
	g.Eventually(func() error {
		return alice.Create(ctx, fixtures.BackupJob(nsA, "orders", fixtures.Yearly, "db.a.svc", 1))
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Eventually(func() error {
		return bob.Create(ctx, fixtures.BackupJob(nsB, "orders", fixtures.Yearly, "db.b.svc", 1))
	}).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())

	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	for _, tc := range []struct {
		who        string
		c          client.Client
		own, other string
	}{{"alice", alice, nsA, nsB}, {"bob", bob, nsB, nsA}} {
		bj := &backupv1.BackupJob{}
		g.Expect(tc.c.Get(ctx, client.ObjectKey{Namespace: tc.own, Name: "orders"}, bj)).To(Succeed(), tc.who+" reads her own")
		forbidden(tc.who+" gets the other's BackupJob", tc.c.Get(ctx, client.ObjectKey{Namespace: tc.other, Name: "orders"}, bj))
		forbidden(tc.who+" lists the other's BackupJobs", tc.c.List(ctx, &backupv1.BackupJobList{}, client.InNamespace(tc.other)))
		forbidden(tc.who+" lists BackupJobs cluster-wide", tc.c.List(ctx, &backupv1.BackupJobList{}))
		forbidden(tc.who+" creates a BackupJob in the other's namespace", tc.c.Create(ctx, fixtures.BackupJob(tc.other, "intruder", fixtures.Yearly, "db.svc", 1)))
		other := &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Namespace: tc.other, Name: "orders"}}
		forbidden(tc.who+" patches the other's BackupJob", tc.c.Patch(ctx, other, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"suspend":true}}`))))
		forbidden(tc.who+" deletes the other's BackupJob", tc.c.Delete(ctx, other))
		forbidden(tc.who+" lists the other's RestoreJobs", tc.c.List(ctx, &restorev1.RestoreJobList{}, client.InNamespace(tc.other)))
		forbidden(tc.who+" lists the other's MigrationJobs", tc.c.List(ctx, &migrationv1.MigrationJobList{}, client.InNamespace(tc.other)))
		forbidden(tc.who+" lists the other's ProtectionPlans", tc.c.List(ctx, &platformv1.ProtectionPlanList{}, client.InNamespace(tc.other)))
		forbidden(tc.who+" reads the other's Secret", tc.c.Get(ctx, client.ObjectKey{Namespace: tc.other, Name: "db"}, &corev1.Secret{}))
		forbidden(tc.who+" writes her BackupJob's status", tc.c.Status().Patch(ctx, bj, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`))))
	}

	g.Expect(olga.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "orders"}, &backupv1.BackupJob{})).To(Succeed(), "view reads")
	forbidden("view creates", olga.Create(ctx, fixtures.BackupJob(nsA, "viewer", fixtures.Yearly, "db.svc", 1)))
	forbidden("view reads a Secret", olga.Get(ctx, client.ObjectKey{Namespace: nsA, Name: "db"}, &corev1.Secret{}))
}

// TestSwitchSecretNeedsOptIn: in the installed platform the migration
// operator's ServiceAccount (impersonated: "even if the operator tried")
// may not switch a Secret until the namespace binds
// cairn-migration-secret-switcher (its RBAC patch on Secrets is narrowed by
// the ValidatingAdmissionPolicy cairn-migration-secret-switch to its
// finalizer and, where the namespace opted in, the switch: docs/security.md);
// then the policy still refuses a switch of an unlabelled Secret and any
// key but host/port/database of a labelled one, and allows the switch itself.
func TestSwitchSecretNeedsOptIn(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := fixtures.Namespace(t, env.Client, "switch-")
	data := map[string]string{"host": "old.db", "port": "5432", "database": "orders", "password": "s3cret"}
	for name, labels := range map[string]map[string]string{
		"unlabelled": nil,
		"labelled":   {"migration.cairn.dev/switchable": "true"},
	} {
		g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}, StringData: data})).To(Succeed())
	}
	op := as(t, "system:serviceaccount:cairn-system:cairn-migration-controller-manager")
	sw := func(name, key, value string) error {
		return op.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
			client.RawPatch(types.MergePatchType, []byte(`{"stringData":{"`+key+`":"`+value+`"}}`)))
	}

	// No switch before the namespace opts in, even of a labelled Secret.
	err := sw("labelled", "host", "new.db")
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "before the namespace opts in: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("did not opt in to spec.cutover.switchSecret"))

	grant(t, ns, "cairn-migration-secret-switcher", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind,
		Name: "cairn-migration-controller-manager", Namespace: "cairn-system"})
	g.Eventually(func() error { return sw("labelled", "host", "new.db") }).WithTimeout(timeout).WithPolling(200 * time.Millisecond).Should(Succeed())

	err = sw("unlabelled", "host", "attacker.example")
	g.Expect(apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cairn-migration-secret-switch") &&
		strings.Contains(err.Error(), "not labelled migration.cairn.dev/switchable")).To(BeTrue(), "unlabelled: %v", err)
	err = sw("labelled", "password", "known")
	g.Expect(apierrors.IsForbidden(err) && strings.Contains(err.Error(), "only the keys host, port and database")).To(BeTrue(), "password: %v", err)

	for name, host := range map[string]string{"unlabelled": "old.db", "labelled": "new.db"} {
		sec := &corev1.Secret{}
		g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec)).To(Succeed())
		g.Expect(string(sec.Data["host"])).To(Equal(host), name)
		g.Expect(string(sec.Data["password"])).To(Equal("s3cret"), name)
	}
}
