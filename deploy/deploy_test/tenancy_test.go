package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// The ServiceAccounts the platform runs its operators as.
func operatorUser(op string) string {
	return "system:serviceaccount:cairn-system:cairn-" + op + "-controller-manager"
}

var saGroups = []string{"system:serviceaccounts", "system:serviceaccounts:cairn-system", "system:authenticated"}

// can asks the API server (SubjectAccessReview, what `kubectl auth can-i
// --as` asks) whether user in groups may verb resource (group "" for
// core) in ns ("" for every namespace).
func can(ctx context.Context, t *testing.T, user string, groups []string, verb, group, resource, ns string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: user, Groups: groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: group, Resource: resource},
	}}
	if err := env.Client.Create(ctx, sar); err != nil {
		t.Fatal(err)
	}
	return sar.Status.Allowed
}

// clientAs connects as user in groups.
func clientAs(t *testing.T, user string, groups ...string) client.Client {
	t.Helper()
	cfg, err := env.AddUser(user, groups...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bind binds the ClusterRole role to subject in ns (a RoleBinding).
func bind(ctx context.Context, t *testing.T, ns, name, role string, subject rbacv1.Subject) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{subject},
	}
	if err := env.Client.Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
}

func userSubject(name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}
}

func saSubject(op string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "cairn-" + op + "-controller-manager", Namespace: "cairn-system"}
}

func newNamespace(ctx context.Context, t *testing.T, prefix string) string {
	t.Helper()
	ns, err := env.Namespace(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// installPlatform applies `kustomize build platform` (without its webhook
// configurations, whose server does not run here: objects can be created)
// and removes any webhook configuration an earlier test installed,
// putting them back when the test ends.
func installPlatform(t *testing.T) {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, o := range build(t, "platform") {
		if o.GetKind() != "MutatingWebhookConfiguration" && o.GetKind() != "ValidatingWebhookConfiguration" {
			objs = append(objs, o)
		}
	}
	apply(t, objs, nil)
	var hooks []client.Object
	for _, o := range build(t, "platform") {
		if o.GetKind() == "MutatingWebhookConfiguration" || o.GetKind() == "ValidatingWebhookConfiguration" {
			live := o.DeepCopy()
			if err := env.Client.Get(t.Context(), client.ObjectKeyFromObject(live), live); err == nil {
				hooks = append(hooks, o.DeepCopy())
				if err := env.Client.Delete(t.Context(), live); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	t.Cleanup(func() {
		for _, h := range hooks {
			ssa(context.Background(), t, h.(*unstructured.Unstructured))
		}
	})
}

// TestNoOperatorMayWriteSecrets: after `kustomize build platform` is
// applied, no operator's ServiceAccount may create, update or delete a
// Secret anywhere, and none but backup and migration may patch one (their
// patch is held by their admission policies to their finalizers and, for
// backup, its delete credentials Secret: TestBackupSecretWritesPolicy,
// TestSecretSwitchPolicy) — `kubectl auth can-i update secrets -n kube-system
// --as=system:serviceaccount:cairn-system:cairn-migration-controller-manager`
// is no. The migration operator's opt-in to switchSecret is the verb
// "switch" on Secrets, which it holds nowhere until a tenant binds
// cairn-migration-secret-switcher in a namespace, and then there and
// nowhere else. What the operators may read of Secrets is stated too
// (docs/security.md): backup, restore and migration read every Secret
// (RBAC has no metadata-only grant), the orchestrator none.
func TestNoOperatorMayWriteSecrets(t *testing.T) {
	ctx := t.Context()
	installPlatform(t)
	for _, op := range operators {
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection", "switch"} {
			for _, ns := range []string{"kube-system", "default", "cairn-system", ""} {
				// The backup and migration operators' patch is held by
				// their policies to their finalizers (and backup's delete
				// credentials Secret).
				if (op == "backup" || op == "migration") && verb == "patch" {
					if !can(ctx, t, operatorUser(op), saGroups, verb, "", "secrets", ns) {
						t.Errorf("%s may not patch secrets in namespace %q: the Secrets its cleanup needs cannot be kept while a namespace is deleted", operatorUser(op), ns)
					}
					continue
				}
				if can(ctx, t, operatorUser(op), saGroups, verb, "", "secrets", ns) {
					t.Errorf("%s may %s secrets in namespace %q", operatorUser(op), verb, ns)
				}
			}
		}
		reads := op != "orchestrator"
		if got := can(ctx, t, operatorUser(op), saGroups, "get", "", "secrets", "kube-system"); got != reads {
			t.Errorf("%s: get secrets in kube-system = %v, docs/security.md says %v", op, got, reads)
		}
	}

	ns := newNamespace(ctx, t, "switch-opt-in")
	bind(ctx, t, ns, "cairn-migration-secret-switcher", "cairn-migration-secret-switcher", saSubject("migration"))
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return can(ctx, t, operatorUser("migration"), saGroups, "switch", "", "secrets", ns), nil
	})
	if err != nil {
		t.Fatalf("the migration operator may not switch secrets in %s after the tenant bound cairn-migration-secret-switcher", ns)
	}
	for _, other := range []string{"kube-system", "default", ""} {
		if can(ctx, t, operatorUser("migration"), saGroups, "switch", "", "secrets", other) {
			t.Errorf("a RoleBinding in %s lets the migration operator switch secrets in %q", ns, other)
		}
	}
	for _, verb := range []string{"create", "update", "delete"} {
		if can(ctx, t, operatorUser("migration"), saGroups, verb, "", "secrets", ns) {
			t.Errorf("cairn-migration-secret-switcher lets the migration operator %s secrets", verb)
		}
	}
}

// TestSecretSwitchPolicy: the ValidatingAdmissionPolicy
// cairn-migration-secret-switch, on a real API server, lets the migration
// operator's ServiceAccount change only host/port/database of a Secret
// labelled migration.cairn.dev/switchable: "true" in a namespace that
// opted in (bound cairn-migration-secret-switcher: the verb "switch"), and
// add or remove its finalizer migration.cairn.dev/remote-cleanup on any
// Secret — with the patches the operator sends (a merge patch with the
// resourceVersion) — and refuses every other write, even when the
// ServiceAccount is given cluster-admin's rules in the namespace (a
// compromised or over-granted operator).
func TestSecretSwitchPolicy(t *testing.T) {
	ctx := t.Context()
	installPlatform(t)
	ns := newNamespace(ctx, t, "switch")
	bind(ctx, t, ns, "cairn-migration-secret-switcher", "cairn-migration-secret-switcher", saSubject("migration"))
	data := map[string]string{"host": "old.db", "port": "5432", "database": "orders", "password": "s3cret", "sslmode": "require"}
	labelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-db",
		Labels: map[string]string{"migration.cairn.dev/switchable": "true", "app": "shop"}}, StringData: data}
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other-app"}, StringData: data}
	for _, s := range []*corev1.Secret{labelled, unlabelled} {
		if err := env.Client.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	op := clientAs(t, operatorUser("migration"), saGroups...)

	// patch changes the Secret's data (keys to values; "" removes a key)
	// and metadata the way the operator does: a merge patch with the
	// optimistic lock, as the operator's ServiceAccount.
	patch := func(name string, keys map[string]string, mutate func(*corev1.Secret)) error {
		sec := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sec); err != nil {
			t.Fatal(err)
		}
		base := sec.DeepCopy()
		for k, v := range keys {
			if v == "" {
				delete(sec.Data, k)
			} else {
				sec.Data[k] = []byte(v)
			}
		}
		if mutate != nil {
			mutate(sec)
		}
		return op.Patch(ctx, sec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}
	refused := func(what string, err error, want string) {
		t.Helper()
		switch {
		case err == nil:
			t.Errorf("%s: allowed", what)
		case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
			t.Errorf("%s: %v, want refused by the policy", what, err)
		case !strings.Contains(err.Error(), want):
			t.Errorf("%s: refused with %q, want a message with %q", what, err, want)
		}
	}

	// The policy is compiled in the background: wait until it refuses.
	const notLabelled = `not labelled migration.cairn.dev/switchable: "true"`
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = patch("other-app", map[string]string{"host": "attacker.example"}, nil)
		if last == nil {
			t.Fatal("the migration operator switched an unlabelled Secret")
		}
		return strings.Contains(last.Error(), notLabelled), nil
	})
	if err != nil {
		t.Fatalf("switching an unlabelled Secret was not refused by the policy: %v", last)
	}

	// What switchSecret does is allowed.
	if err := patch("app-db", map[string]string{"host": "new.db", "port": "5433", "database": "orders_v2"}, nil); err != nil {
		t.Fatalf("switching host/port/database of a labelled Secret: %v", err)
	}
	got := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(labelled), got); err != nil {
		t.Fatal(err)
	}
	if string(got.Data["host"]) != "new.db" || string(got.Data["port"]) != "5433" || string(got.Data["database"]) != "orders_v2" || string(got.Data["password"]) != "s3cret" {
		t.Errorf("after the switch: %v", got.Data)
	}

	const onlyKeys = "only the keys host, port and database"
	refused("change the password", patch("app-db", map[string]string{"password": "known"}, nil), onlyKeys)
	refused("remove the password", patch("app-db", map[string]string{"password": ""}, nil), onlyKeys)
	refused("add a key", patch("app-db", map[string]string{"url": "postgres://attacker"}, nil), onlyKeys)
	refused("switch with another key", patch("app-db", map[string]string{"host": "x.db", "sslmode": "disable"}, nil), onlyKeys)
	refused("remove the opt-in label", patch("app-db", nil, func(s *corev1.Secret) { delete(s.Labels, "migration.cairn.dev/switchable") }), "labels, annotations")
	refused("change another label", patch("app-db", nil, func(s *corev1.Secret) { s.Labels["app"] = "evil" }), "labels, annotations")
	refused("add an annotation", patch("app-db", nil, func(s *corev1.Secret) { s.Annotations = map[string]string{"a": "b"} }), "labels, annotations")
	refused("label a Secret switchable", patch("other-app", nil, func(s *corev1.Secret) {
		s.Labels = map[string]string{"migration.cairn.dev/switchable": "true"}
	}), "labels, annotations")

	// Its finalizer, on any Secret (a kubeconfig Secret it keeps for a
	// MigrationJob's cleanup while the namespace is deleted, issue 30):
	// added and removed; no other finalizer, and no data with it.
	const remoteCleanup = "migration.cairn.dev/remote-cleanup"
	if err := patch("other-app", nil, func(s *corev1.Secret) { s.Finalizers = append(s.Finalizers, remoteCleanup) }); err != nil {
		t.Fatalf("adding its finalizer to an unlabelled Secret: %v", err)
	}
	refused("another finalizer", patch("other-app", nil, func(s *corev1.Secret) { s.Finalizers = append(s.Finalizers, "evil.example/hold") }), "labels, annotations")
	refused("switch an unlabelled Secret with the finalizer", patch("other-app", map[string]string{"host": "attacker.example"}, nil), notLabelled)
	if err := patch("other-app", nil, func(s *corev1.Secret) { s.Finalizers = nil }); err != nil {
		t.Fatalf("removing its finalizer: %v", err)
	}

	// A labelled Secret in a namespace that did not opt in (no RoleBinding
	// of cairn-migration-secret-switcher): its patch right reaches it, the
	// policy does not let it switch.
	other := newNamespace(ctx, t, "switch-no-opt-in")
	elsewhere := labelled.DeepCopy()
	elsewhere.Namespace, elsewhere.ResourceVersion = other, ""
	if err := env.Client.Create(ctx, elsewhere); err != nil {
		t.Fatal(err)
	}
	refused("switch where the namespace did not opt in", func() error {
		sec := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(elsewhere), sec); err != nil {
			t.Fatal(err)
		}
		base := sec.DeepCopy()
		sec.Data["host"] = []byte("attacker.example")
		return op.Patch(ctx, sec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}(), "did not opt in")

	// A compromised or over-granted operator: cluster-admin's rules in the
	// namespace. RBAC now allows everything; the policy still refuses.
	bind(ctx, t, ns, "operator-admin", "cluster-admin", saSubject("migration"))
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return can(ctx, t, operatorUser("migration"), saGroups, "delete", "", "secrets", ns), nil
	})
	if err != nil {
		t.Fatal("admin was not granted")
	}
	refused("switch an unlabelled Secret as admin", patch("other-app", map[string]string{"host": "attacker.example"}, nil), notLabelled)
	refused("change the password as admin", patch("app-db", map[string]string{"password": "known"}, nil), onlyKeys)
	refused("delete a Secret as admin", op.Delete(ctx, labelled.DeepCopy()), "may not create or delete")
	refused("create a Secret as admin", op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted",
		Labels: map[string]string{"migration.cairn.dev/switchable": "true"}}}), "may not create or delete")
	refused("update a Secret as admin", func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(unlabelled), s); err != nil {
			t.Fatal(err)
		}
		s.Data["host"] = []byte("attacker.example")
		return op.Update(ctx, s)
	}(), notLabelled)

	// Nobody else is held by it: the tenant (here the test's admin) may
	// still do anything to its Secrets.
	if err := env.Client.Patch(ctx, unlabelled.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"stringData":{"password":"rotated"}}`))); err != nil {
		t.Errorf("the policy refused someone other than the migration operator: %v", err)
	}
}

// TestSecretSwitchPolicyMatchesTheServiceAccount: the policy names the
// migration operator's ServiceAccount as the platform installs it (a
// renamed or moved ServiceAccount would leave the operator unguarded).
func TestSecretSwitchPolicyMatchesTheServiceAccount(t *testing.T) {
	for _, dir := range []string{"platform", "deploy/migration"} {
		objs := build(t, dir)
		if conds := policyMatchConditions(t, dir, objs, "migration", "cairn-migration-secret-switch"); conds != nil {
			// The one exception: the first fill of the operator's own
			// approval key, the Secret the platform ships for it.
			key := find(t, objs, "Secret", "cairn-migration-approval-key")
			except := conds[1].(map[string]any)["expression"].(string)
			for _, w := range []string{"request.namespace == '" + key.GetNamespace() + "'", "request.name == '" + key.GetName() + "'", "!('key' in oldObject.data)"} {
				if !strings.Contains(except, w) {
					t.Errorf("%s: the policy's exception %q does not say %s", dir, except, w)
				}
			}
		}
	}
}

// policyMatchConditions finds, in the objects built from dir, the
// ValidatingAdmissionPolicy policy (and its binding) and returns its
// matchConditions when the first names operator op's ServiceAccount as the
// platform installs it and a second (the approval key's first fill)
// follows; otherwise it reports an error and returns nil.
func policyMatchConditions(t *testing.T, dir string, objs []*unstructured.Unstructured, op, policy string) []any {
	t.Helper()
	var sa *unstructured.Unstructured
	for _, o := range ofKind(objs, "ServiceAccount") {
		if strings.HasPrefix(o.GetName(), "cairn-"+op+"-") {
			sa = o
		}
	}
	if sa == nil {
		t.Fatalf("%s: no %s ServiceAccount", dir, op)
	}
	vap := find(t, objs, "ValidatingAdmissionPolicy", policy)
	find(t, objs, "ValidatingAdmissionPolicyBinding", policy)
	conds, _, _ := unstructured.NestedSlice(vap.Object, "spec", "matchConditions")
	want := fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:%s'", sa.GetNamespace(), sa.GetName())
	if len(conds) != 2 || strings.TrimSpace(conds[0].(map[string]any)["expression"].(string)) != want {
		t.Errorf("%s: the policy's matchConditions are %v, want exactly %s and the approval key's first fill", dir, conds, want)
		return nil
	}
	return conds
}

// backupJob is the sample BackupJob in ns.
func backupJob(t *testing.T, ns string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range samples(t) {
		if o.GetKind() == "BackupJob" {
			o = o.DeepCopy()
			o.SetNamespace(ns)
			return o
		}
	}
	t.Fatal("platform/samples has no BackupJob")
	return nil
}

// TestTenantRoles: cairn-view and cairn-edit, aggregated into the built-in
// view, edit and admin roles by kube-controller-manager's
// clusterrole-aggregation controller (run here): a user with only `edit`
// in namespace A may create BackupJobs there and not in B; a user with only
// `view` in A may read them and not create them; neither may write status
// (the operators') nor read Secrets through Cairn's roles.
func TestTenantRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	installPlatform(t)
	exited := startControllers(t, "clusterrole-aggregation")
	a, b := newNamespace(ctx, t, "tenant-a"), newNamespace(ctx, t, "tenant-b")
	editor, viewer := "tenant-a-editor", "tenant-a-viewer"
	bind(ctx, t, a, "editor", "edit", userSubject(editor))
	bind(ctx, t, a, "viewer", "view", userSubject(viewer))
	bind(ctx, t, b, "viewer", "view", userSubject(viewer))

	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := exited(); err != nil {
			return false, err
		}
		return can(ctx, t, editor, nil, "create", "backup.cairn.dev", "backupjobs", a) &&
			can(ctx, t, viewer, nil, "list", "platform.cairn.dev", "protectionplans", a), nil
	})
	if err != nil {
		t.Fatalf("cairn-edit and cairn-view were not aggregated into edit and view: %v", err)
	}

	ed := clientAs(t, editor)
	if err := ed.Create(ctx, backupJob(t, a)); err != nil {
		t.Errorf("edit in %s: creating a BackupJob there: %v", a, err)
	}
	if err := ed.Create(ctx, backupJob(t, b)); !apierrors.IsForbidden(err) {
		t.Errorf("edit in %s: creating a BackupJob in %s: %v, want Forbidden", a, b, err)
	}
	if err := ed.Get(ctx, client.ObjectKeyFromObject(backupJob(t, b)), backupJob(t, b)); !apierrors.IsForbidden(err) {
		t.Errorf("edit in %s: reading a BackupJob in %s: %v, want Forbidden", a, b, err)
	}
	st := backupJob(t, a)
	if err := ed.Get(ctx, client.ObjectKeyFromObject(st), st); err != nil {
		t.Fatal(err)
	}
	if err := ed.Status().Patch(ctx, st, client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Failed"}}`))); !apierrors.IsForbidden(err) {
		t.Errorf("edit may write a BackupJob's status: %v", err)
	}

	vw := clientAs(t, viewer)
	if err := vw.Get(ctx, client.ObjectKeyFromObject(st), backupJob(t, a)); err != nil {
		t.Errorf("view in %s: reading the BackupJob: %v", a, err)
	}
	if err := vw.Create(ctx, backupJob(t, b)); !apierrors.IsForbidden(err) {
		t.Errorf("view: creating a BackupJob: %v, want Forbidden", err)
	}

	for _, tc := range []struct{ user, verb, group, resource string }{
		{editor, "create", "restore.cairn.dev", "restorejobs"},
		{editor, "create", "migration.cairn.dev", "migrationjobs"},
		{editor, "delete", "platform.cairn.dev", "protectionplans"},
		{viewer, "get", "restore.cairn.dev", "restorejobs"},
		{viewer, "watch", "migration.cairn.dev", "migrationjobs"},
	} {
		if !can(ctx, t, tc.user, nil, tc.verb, tc.group, tc.resource, a) {
			t.Errorf("%s may not %s %s in %s", tc.user, tc.verb, tc.resource, a)
		}
		if can(ctx, t, tc.user, nil, tc.verb, tc.group, tc.resource, "kube-system") {
			t.Errorf("%s may %s %s in kube-system", tc.user, tc.verb, tc.resource)
		}
	}
	if can(ctx, t, viewer, nil, "get", "", "secrets", a) {
		t.Errorf("view may read Secrets")
	}
	for _, r := range []string{"cairn-view", "cairn-edit"} {
		var role rbacv1.ClusterRole
		if err := env.Client.Get(ctx, client.ObjectKey{Name: r}, &role); err != nil {
			t.Fatal(err)
		}
		for _, rule := range role.Rules {
			if slices.ContainsFunc(rule.Resources, func(s string) bool { return !strings.Contains(s, "jobs") && !strings.Contains(s, "protectionplans") }) {
				t.Errorf("%s grants %v, beyond Cairn's kinds", r, rule)
			}
			if slices.ContainsFunc(rule.Resources, func(s string) bool { return strings.HasSuffix(s, "/status") }) &&
				slices.ContainsFunc(rule.Verbs, func(v string) bool { return slices.Contains(writeVerbs, v) }) {
				t.Errorf("%s writes status: %v", r, rule)
			}
		}
	}
}

// namespacedOverlay writes an overlay of the platform in namespace-scoped
// mode (platform/components/namespaced) for namespaces, the way
// docs/install.md says, and returns its folder.
func namespacedOverlay(t *testing.T, namespaces ...string) string {
	t.Helper()
	dir := overlay(t, []string{"platform"}, []string{"platform/components/namespaced"})
	grant, err := filepath.Rel(filepath.Join(dir, "x"), filepath.Join(root(t), "platform", "components", "namespaced", "grant"))
	if err != nil {
		t.Fatal(err)
	}
	var k map[string]any
	data, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		t.Fatal(err)
	}
	for _, ns := range namespaces {
		if err := os.MkdirAll(filepath.Join(dir, ns), 0o755); err != nil {
			t.Fatal(err)
		}
		sub := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: %s\nresources:\n- %s\n", ns, filepath.ToSlash(grant))
		if err := os.WriteFile(filepath.Join(dir, ns, "kustomization.yaml"), []byte(sub), 0o644); err != nil {
			t.Fatal(err)
		}
		k["resources"] = append(k["resources"].([]any), ns)
	}
	k["configMapGenerator"] = []any{map[string]any{"name": "cairn-watch-namespaces", "namespace": "cairn-system",
		"literals": []any{"namespaces=" + strings.Join(namespaces, ",")}}}
	if data, err = yaml.Marshal(k); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestNamespacedMode: platform/components/namespaced removes the operators'
// cluster-wide bindings, grants their manager roles in the listed
// namespaces only, and starts each operator with --watch-namespaces from
// the overlay's ConfigMap. Applied to a real API server, the backup
// operator may read Secrets in a listed namespace and not in kube-system.
func TestNamespacedMode(t *testing.T) {
	ctx := t.Context()
	teamA, teamB := newNamespace(ctx, t, "team-a"), newNamespace(ctx, t, "team-b")
	objs := build(t, namespacedOverlay(t, teamA, teamB))

	cms := ofKind(objs, "ConfigMap")
	if len(cms) != 1 || !strings.HasPrefix(cms[0].GetName(), "cairn-watch-namespaces") || cms[0].GetNamespace() != "cairn-system" {
		t.Fatalf("ConfigMaps %v, want cairn-system/cairn-watch-namespaces-<hash>", cms)
	}
	if got, _, _ := unstructured.NestedString(cms[0].Object, "data", "namespaces"); got != teamA+","+teamB {
		t.Errorf("namespaces = %q", got)
	}
	for _, d := range ofKind(objs, "Deployment") {
		var c corev1.Container
		cs, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		into(t, &unstructured.Unstructured{Object: cs[0].(map[string]any)}, &c)
		if !slices.Contains(c.Args, "--watch-namespaces=$(WATCH_NAMESPACES)") {
			t.Errorf("%s: args %v", d.GetName(), c.Args)
		}
		i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "WATCH_NAMESPACES" })
		if i < 0 || c.Env[i].ValueFrom == nil || c.Env[i].ValueFrom.ConfigMapKeyRef == nil ||
			c.Env[i].ValueFrom.ConfigMapKeyRef.Name != cms[0].GetName() || c.Env[i].ValueFrom.ConfigMapKeyRef.Key != "namespaces" {
			t.Errorf("%s: env %v, want WATCH_NAMESPACES from ConfigMap %s", d.GetName(), c.Env, cms[0].GetName())
		}
	}
	for _, o := range ofKind(objs, "ClusterRoleBinding") {
		if strings.HasSuffix(o.GetName(), "-manager") {
			t.Errorf("ClusterRoleBinding %s is still there", o.GetName())
		}
	}
	for _, op := range operators {
		find(t, objs, "ClusterRole", "cairn-"+op+"-manager")
		for _, ns := range []string{teamA, teamB} {
			found := false
			for _, o := range ofKind(objs, "RoleBinding") {
				if o.GetNamespace() != ns || o.GetName() != "cairn-"+op+"-manager" {
					continue
				}
				found = true
				var rb rbacv1.RoleBinding
				into(t, o, &rb)
				if rb.RoleRef.Kind != "ClusterRole" || rb.RoleRef.Name != "cairn-"+op+"-manager" || len(rb.Subjects) != 1 || rb.Subjects[0] != saSubject(op) {
					t.Errorf("RoleBinding %s/%s: %+v %+v", ns, rb.Name, rb.RoleRef, rb.Subjects)
				}
			}
			if !found {
				t.Errorf("no RoleBinding cairn-%s-manager in %s", op, ns)
			}
		}
	}

	// On the API server, after the cluster-wide bindings an earlier apply
	// left are gone (put back at the end).
	var rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() != "MutatingWebhookConfiguration" && o.GetKind() != "ValidatingWebhookConfiguration" {
			rest = append(rest, o)
		}
	}
	apply(t, rest, nil)
	for _, op := range operators {
		crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cairn-" + op + "-manager"}}
		if err := env.Client.Delete(ctx, crb); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, o := range ofKind(build(t, "platform"), "ClusterRoleBinding") {
			ssa(context.Background(), t, o)
		}
	})
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return !can(ctx, t, operatorUser("backup"), saGroups, "list", "", "secrets", ""), nil
	})
	if err != nil {
		t.Fatal("the backup operator may still list Secrets cluster-wide")
	}
	for _, op := range []string{"backup", "restore", "migration"} {
		for _, ns := range []string{teamA, teamB} {
			if !can(ctx, t, operatorUser(op), saGroups, "list", "", "secrets", ns) {
				t.Errorf("%s may not list secrets in %s", op, ns)
			}
			if !can(ctx, t, operatorUser(op), saGroups, "create", "batch", "jobs", ns) {
				t.Errorf("%s may not create jobs in %s", op, ns)
			}
		}
		for _, ns := range []string{"kube-system", "default"} {
			if can(ctx, t, operatorUser(op), saGroups, "get", "", "secrets", ns) {
				t.Errorf("%s may read secrets in %s", op, ns)
			}
		}
	}
	if !can(ctx, t, operatorUser("orchestrator"), saGroups, "create", "backup.cairn.dev", "backupjobs", teamA) ||
		can(ctx, t, operatorUser("orchestrator"), saGroups, "create", "backup.cairn.dev", "backupjobs", "default") {
		t.Error("the orchestrator's BackupJobs are not confined to the listed namespaces")
	}
	// Leader election and metrics authentication are unchanged.
	if !can(ctx, t, operatorUser("backup"), saGroups, "update", "coordination.k8s.io", "leases", "cairn-system") ||
		!can(ctx, t, operatorUser("backup"), saGroups, "create", "authorization.k8s.io", "subjectaccessreviews", "") {
		t.Error("namespace-scoped mode lost leader election or metrics authentication")
	}
}
