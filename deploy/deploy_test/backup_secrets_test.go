package deploy_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const artifactDeleteFinalizer = "backup.cairn.dev/artifact-delete"

// TestBackupSecretWritesPolicy: the ValidatingAdmissionPolicy
// cairn-backup-secret-writes, on a real API server, lets the backup
// operator's ServiceAccount (whose manager role has patch on Secrets, issue
// 30) add and remove its finalizer backup.cairn.dev/artifact-delete on a
// tenant's Secret and set or remove <job>.accessKeyID/<job>.secretAccessKey
// (an artifact delete) and <job>.username/<job>.password (a slot release)
// keys of cairn-system/cairn-backup-delete-credentials — with the patches
// the operator sends — and refuses every other write: a tenant Secret's
// data, labels, another finalizer, other keys of its own Secret, a create,
// a delete, even with cluster-admin's rules in the namespace.
func TestBackupSecretWritesPolicy(t *testing.T) {
	ctx := t.Context()
	installPlatform(t)
	ns := newNamespace(ctx, t, "bsecret")
	tenant := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3", Labels: map[string]string{"app": "shop"}},
		StringData: map[string]string{"accessKeyID": "AK", "secretAccessKey": "SK"}}
	if err := env.Client.Create(ctx, tenant); err != nil {
		t.Fatal(err)
	}
	op := clientAs(t, operatorUser("backup"), saGroups...)

	// meta patches metadata as the operator does (a merge patch with the
	// optimistic lock); data patches data keys (nil removes) with a plain
	// merge patch.
	meta := func(key client.ObjectKey, mutate func(*corev1.Secret)) error {
		sec := &corev1.Secret{}
		if err := env.Client.Get(ctx, key, sec); err != nil {
			t.Fatal(err)
		}
		base := sec.DeepCopy()
		mutate(sec)
		return op.Patch(ctx, sec, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	}
	data := func(key client.ObjectKey, body string) error {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		return op.Patch(ctx, sec, client.RawPatch(types.MergePatchType, []byte(body)))
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
	tk := client.ObjectKeyFromObject(tenant)

	// The policy is compiled in the background: wait until it refuses a
	// data change of a throwaway Secret (before, RBAC alone lets it through).
	const notData = "may not change a Secret's data"
	probe := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}, StringData: map[string]string{"k": "v"}}
	if err := env.Client.Create(ctx, probe); err != nil {
		t.Fatal(err)
	}
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = data(client.ObjectKeyFromObject(probe), fmt.Sprintf(`{"data":{"k":%q}}`, base64.StdEncoding.EncodeToString([]byte(time.Now().String()))))
		return last != nil && strings.Contains(last.Error(), notData), nil
	})
	if err != nil {
		t.Fatalf("changing a Secret's data was not refused by the policy: %v", last)
	}
	refused("rewrite a tenant's Secret key", data(tk, `{"data":{"secretAccessKey":"a25vd24="}}`), notData)

	// What the operator does is allowed.
	if err := meta(tk, func(s *corev1.Secret) { s.Finalizers = append(s.Finalizers, artifactDeleteFinalizer) }); err != nil {
		t.Fatalf("adding the finalizer: %v", err)
	}
	dk := client.ObjectKey{Namespace: "cairn-system", Name: "cairn-backup-delete-credentials"}
	if err := data(dk, `{"data":{"orders-delete-0a1b2c3d.accessKeyID":"QUs=","orders-delete-0a1b2c3d.secretAccessKey":"U0s="}}`); err != nil {
		t.Fatalf("handing a delete Job its keys: %v", err)
	}
	if err := data(dk, `{"data":{"orders-delete-0a1b2c3d.accessKeyID":null,"orders-delete-0a1b2c3d.secretAccessKey":null}}`); err != nil {
		t.Fatalf("removing a delete Job's keys: %v", err)
	}
	// A slot release Job's database keys (issue 27).
	if err := data(dk, `{"data":{"orders-release-slot-0a1b2c3d.username":"dQ==","orders-release-slot-0a1b2c3d.password":"cA=="}}`); err != nil {
		t.Fatalf("handing a slot release Job its keys: %v", err)
	}
	if err := data(dk, `{"data":{"orders-release-slot-0a1b2c3d.username":null,"orders-release-slot-0a1b2c3d.password":null}}`); err != nil {
		t.Fatalf("removing a slot release Job's keys: %v", err)
	}

	const onlyOwn = "only its own finalizer"
	refused("change a tenant Secret's data", data(tk, `{"data":{"accessKeyID":"ZXZpbA=="}}`), notData)
	refused("add a key to a tenant Secret", data(tk, `{"data":{"x":"eA=="}}`), notData)
	refused("another finalizer", meta(tk, func(s *corev1.Secret) { s.Finalizers = append(s.Finalizers, "evil.example/hold") }), onlyOwn)
	refused("change a label", meta(tk, func(s *corev1.Secret) { s.Labels["app"] = "evil" }), "labels, annotations")
	refused("add an annotation", meta(tk, func(s *corev1.Secret) { s.Annotations = map[string]string{"a": "b"} }), "labels, annotations")
	refused("another key in its delete credentials", data(dk, `{"data":{"token":"eA=="}}`), notData)
	refused("another key of a Job in its delete credentials", data(dk, `{"data":{"orders-release-slot-0a1b2c3d.token":"eA=="}}`), notData)
	refused("label its delete credentials", meta(dk, func(s *corev1.Secret) { s.Labels["x"] = "y" }), "labels, annotations")

	// A compromised or over-granted operator: cluster-admin's rules in the
	// namespace. RBAC now allows everything; the policy still refuses.
	bind(ctx, t, ns, "operator-admin", "cluster-admin", saSubject("backup"))
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return can(ctx, t, operatorUser("backup"), saGroups, "delete", "", "secrets", ns), nil
	})
	if err != nil {
		t.Fatal("admin was not granted")
	}
	refused("delete a Secret as admin", op.Delete(ctx, tenant.DeepCopy()), "may not create or delete")
	refused("create a Secret as admin", op.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"}}), "may not create or delete")
	refused("change data as admin", data(tk, `{"data":{"accessKeyID":"ZXZpbA=="}}`), notData)

	// Removing its finalizer is allowed, and the tenant is not held by the
	// policy.
	if err := meta(tk, func(s *corev1.Secret) { s.Finalizers = nil }); err != nil {
		t.Fatalf("removing the finalizer: %v", err)
	}
	if err := env.Client.Patch(ctx, tenant.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"stringData":{"secretAccessKey":"rotated"}}`))); err != nil {
		t.Errorf("the policy refused someone other than the backup operator: %v", err)
	}
}

// TestBackupSecretWritesPolicyMatchesTheServiceAccount: the policy names
// the backup operator's ServiceAccount and the delete credentials Secret as
// the platform installs them.
func TestBackupSecretWritesPolicyMatchesTheServiceAccount(t *testing.T) {
	for _, dir := range []string{"platform", "deploy/backup"} {
		objs := build(t, dir)
		policyMatchConditions(t, dir, objs, "backup", "cairn-backup-secret-writes")
		vap := find(t, objs, "ValidatingAdmissionPolicy", "cairn-backup-secret-writes")
		sec := find(t, objs, "Secret", "cairn-backup-delete-credentials")
		vars, _, _ := unstructured.NestedSlice(vap.Object, "spec", "variables")
		wantVar := fmt.Sprintf("request.namespace == '%s' && request.name == '%s'", sec.GetNamespace(), sec.GetName())
		found := false
		for _, v := range vars {
			found = found || strings.TrimSpace(v.(map[string]any)["expression"].(string)) == wantVar
		}
		if !found {
			t.Errorf("%s: the policy's variables %v do not name the delete credentials Secret as %s", dir, vars, wantVar)
		}
	}
}
