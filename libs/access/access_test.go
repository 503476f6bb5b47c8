package access_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/libs/access"
	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{Scheme: testtype.Scheme()}, &env)
}

var gr = schema.GroupResource{Group: "backup.cairn.dev", Resource: "backupjobs"}

// TestReviewAsksTheAPIServerForTheRequester: a user allowed to get one
// Secret by RBAC is allowed that one and refused another, with a message
// naming the field, the user, the verb and the Secret; patch is asked
// separately from get; groups count.
func TestReviewAsksTheAPIServerForTheRequester(t *testing.T) {
	ctx := t.Context()
	ns, err := env.Namespace(ctx, "access")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Tenant(ctx, ns, "bob", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{"mine"}, Verbs: []string{"get"}}); err != nil {
		t.Fatal(err)
	}
	r := &access.Reviewer{Client: env.Client}
	bob := authenticationv1.UserInfo{Username: "bob"}
	mine := access.GetSecret(ns, "mine", "spec.database.credentialsSecretRef")
	// Poll until RBAC's informer has the new RoleBinding (deadline 30 s).
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err = r.Review(ctx, bob, gr, "x", []access.Check{mine})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("bob may get Secret mine: %v", err)
	}

	theirs := access.GetSecret(ns, "db-admin", "spec.storage.s3.credentialsSecretRef")
	patch := access.PatchSecret(ns, "mine", "spec.cutover.switchSecret")
	err = r.Review(ctx, bob, gr, "x", []access.Check{mine, theirs, patch})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want Forbidden", err)
	}
	for _, want := range []string{
		`spec.storage.s3.credentialsSecretRef: user "bob" may not get secret "db-admin" in namespace "` + ns + `"`,
		`spec.cutover.switchSecret: user "bob" may not patch secret "mine" in namespace "` + ns + `"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err.Error(), want)
		}
	}
	if strings.Contains(err.Error(), "credentialsSecretRef: user \"bob\" may not get secret \"mine\"") {
		t.Errorf("the allowed reference is reported: %v", err)
	}

	// A duplicate reference is asked once.
	before := r.Reviews()
	_ = r.Review(ctx, bob, gr, "x", []access.Check{mine, mine, mine})
	if n := r.Reviews() - before; n != 1 {
		t.Errorf("3 identical checks sent %d reviews, want 1", n)
	}
	// A trusted requester is not reviewed.
	r.Trusted = []string{"system:serviceaccount:cairn-system:cairn-orchestrator-controller-manager"}
	before = r.Reviews()
	if err := r.Review(ctx, authenticationv1.UserInfo{Username: r.Trusted[0]}, gr, "x", []access.Check{theirs}); err != nil {
		t.Errorf("trusted requester: %v", err)
	}
	if r.Reviews() != before {
		t.Errorf("a trusted requester was reviewed")
	}
	// Groups are the requester's too: system:masters may.
	if err := (&access.Reviewer{Client: env.Client}).Review(ctx, authenticationv1.UserInfo{Username: "carol", Groups: []string{"system:masters"}},
		gr, "x", []access.Check{theirs}); err != nil {
		t.Errorf("system:masters: %v", err)
	}
}

// TestApprovalIsBoundToTheReferencesTheKindAndTheNamespace.
func TestApprovalIsBoundToTheReferencesTheKindAndTheNamespace(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	a, err := access.NewApprover(key)
	if err != nil {
		t.Fatal(err)
	}
	checks := []access.Check{access.GetSecret("team-a", "db", "spec.database.credentialsSecretRef"), access.PatchSecret("team-a", "app", "spec.cutover.switchSecret")}
	obj := &metav1.ObjectMeta{Namespace: "team-a", Name: "x"}
	if a.Approved(obj, access.BackupJobKind, checks) {
		t.Fatal("approved without an annotation")
	}
	a.Approve(obj, access.BackupJobKind, checks)
	if !a.Approved(obj, access.BackupJobKind, checks) {
		t.Fatal("not approved after Approve")
	}
	// Order and fields do not matter; the set does.
	reordered := []access.Check{checks[1], checks[0], checks[0]}
	reordered[0].Field = "elsewhere"
	if !a.Approved(obj, access.BackupJobKind, reordered) {
		t.Error("the same set, reordered, not approved")
	}
	for name, other := range map[string][]access.Check{
		"another Secret":     {access.GetSecret("team-a", "db-admin", "f"), checks[1]},
		"another verb":       {access.PatchSecret("team-a", "db", "f"), checks[1]},
		"one reference more": append(append([]access.Check{}, checks...), access.GetSecret("team-a", "s3", "f")),
		"one reference less": checks[:1],
	} {
		if a.Approved(obj, access.BackupJobKind, other) {
			t.Errorf("%s: approved", name)
		}
	}
	if a.Approved(obj, access.RestoreJobKind, checks) {
		t.Error("another kind: approved")
	}
	moved := obj.DeepCopy()
	moved.Namespace = "team-b"
	if a.Approved(moved, access.BackupJobKind, checks) {
		t.Error("another namespace: approved")
	}
	other, _ := access.NewApprover([]byte(strings.Repeat("o", 32)))
	if other.Approved(obj, access.BackupJobKind, checks) {
		t.Error("another key: approved")
	}
	if _, err := access.NewApprover([]byte("short")); err == nil {
		t.Error("a short key accepted")
	}
	if got := access.Changed(checks, reordered); len(got) != 0 {
		t.Errorf("Changed of the same set: %v", got)
	}
	if got := access.Changed(checks[:1], checks); len(got) != 1 || got[0].Name != "app" {
		t.Errorf("Changed: %v", got)
	}

	// Where a credential is used is signed: the same reference sent to
	// another host is not approved, and Changed returns it, saying why.
	used := func(host string) []access.Check {
		c := access.GetSecret("team-a", "db", "spec.database.credentialsSecretRef")
		c.Uses = []string{"spec.database.host=" + host, "spec.database.port=5432"}
		return []access.Check{c}
	}
	a.Approve(obj, access.BackupJobKind, used("pg.shop.svc"))
	if !a.Approved(obj, access.BackupJobKind, used("pg.shop.svc")) || a.Approved(obj, access.BackupJobKind, used("evil.example")) {
		t.Error("the uses are not bound into the approval")
	}
	got := access.Changed(used("pg.shop.svc"), used("evil.example"))
	if len(got) != 1 || got[0].Because != "this update changes spec.database.host, where it is used" {
		t.Errorf("Changed of a moved reference: %+v", got)
	}
	if got := access.Changed(used("pg.shop.svc"), used("pg.shop.svc")); len(got) != 0 {
		t.Errorf("Changed of the same uses: %+v", got)
	}
}

// TestLoadKeyCreatesOnceAndReuses: the first start creates the key Secret,
// later starts (other replicas, restarts) read the same key.
func TestLoadKeyCreatesOnceAndReuses(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "key")
	if err != nil {
		t.Fatal(err)
	}
	k1, err := access.LoadKey(ctx, env.Client, env.Client, ns, "approval")
	if err != nil {
		t.Fatal(err)
	}
	k2, err := access.LoadKey(ctx, env.Client, env.Client, ns, "approval")
	if err != nil {
		t.Fatal(err)
	}
	if len(k1) != access.KeyLength || string(k1) != string(k2) {
		t.Fatalf("keys %x and %x", k1, k2)
	}
	short := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "short"}, Data: map[string][]byte{access.KeySecretKey: []byte("x")}}
	if err := env.Client.Create(ctx, short); err != nil {
		t.Fatal(err)
	}
	if _, err := access.LoadKey(ctx, env.Client, env.Client, ns, "short"); err == nil {
		t.Fatal("a 1-byte key accepted")
	}
}

func TestImageAllowList(t *testing.T) {
	digest := "sha256:" + strings.Repeat("a", 64)
	other := "sha256:" + strings.Repeat("b", 64)
	l, err := access.ParseImages([]string{"ghcr.io/cairn-dev/agent:v1.2.0", "registry.local:5000/agent@" + digest, "ghcr.io/cairn-dev/agent-latest"})
	if err != nil {
		t.Fatal(err)
	}
	for img, want := range map[string]bool{
		"ghcr.io/cairn-dev/agent:v1.2.0":            true,
		"ghcr.io/cairn-dev/agent:v1.2.1":            false,
		"ghcr.io/cairn-dev/agent":                   false, // :latest
		"ghcr.io/cairn-dev/agent-latest":            true,
		"ghcr.io/cairn-dev/agent-latest:latest":     true,
		"registry.local:5000/agent@" + digest:       true,
		"registry.local:5000/agent:any@" + digest:   true,
		"registry.local:5000/agent@" + other:        false,
		"registry.local:5000/agent":                 false, // a tag never matches a digest pin
		"evil.example/agent:v1.2.0":                 false,
		"ghcr.io/cairn-dev/agent:v1.2.0@" + other:   false,
		"ghcr.io/cairn-dev/agent:v1.2.0 ; rm -rf /": false,
		"": false,
	} {
		if got := l.Allowed(img); got != want {
			t.Errorf("Allowed(%q) = %v, want %v", img, got, want)
		}
	}
	if _, err := access.ParseImages([]string{"agent@sha256:short"}); err == nil {
		t.Error("a malformed digest accepted")
	}
	msg := l.NotAllowed("spec.image", "evil.example/x:1")
	if !strings.Contains(msg, `spec.image: image "evil.example/x:1" is not in the operator's allow-list`) || !strings.Contains(msg, "ghcr.io/cairn-dev/agent:v1.2.0") {
		t.Errorf("message %q", msg)
	}
}

// TestLoadKeyFillsTheShippedSecret: as installed, the operator may only get
// and patch its one key Secret, shipped empty (approval_key.yaml): replicas
// starting together fill it once and agree on the key; the identity can
// create no Secret and touch no other.
func TestLoadKeyFillsTheShippedSecret(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "shipped")
	if err != nil {
		t.Fatal(err)
	}
	const name = "cairn-test-approval-key"
	if err := env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeOpaque}); err != nil {
		t.Fatal(err)
	}
	cfg, err := env.Tenant(ctx, ns, "key-filler", rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
		ResourceNames: []string{name}, Verbs: []string{"get", "patch"}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	keys := make([][]byte, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { keys[i], errs[i] = access.LoadKey(ctx, c, c, ns, name) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		if len(keys[i]) != access.KeyLength || string(keys[i]) != string(keys[0]) {
			t.Fatalf("replicas disagree: %x vs %x", keys[i], keys[0])
		}
	}
	stored := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, stored); err != nil {
		t.Fatal(err)
	}
	if string(stored.Data[access.KeySecretKey]) != string(keys[0]) {
		t.Fatalf("stored key %x, loaded %x", stored.Data[access.KeySecretKey], keys[0])
	}
	// The same identity cannot make a key Secret of another name.
	if _, err := access.LoadKey(ctx, c, c, ns, "other-key"); err == nil {
		t.Fatal("an identity with get/patch on one Secret created another")
	}
}
