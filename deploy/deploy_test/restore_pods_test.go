package deploy_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

const scratchReportFinalizer = "restore.cairn.dev/scratch-report"

// TestRestorePodWritesPolicy: the ValidatingAdmissionPolicy
// cairn-restore-pod-writes, on a real API server, lets the restore
// operator's ServiceAccount (whose manager role has patch on pods, issue
// 30) remove its finalizer restore.cairn.dev/scratch-report from a pod —
// with the patch the operator sends — and refuses every other write: a
// pod's image (mutable: code execution in any pod), labels, another
// finalizer, adding its own, a create, a delete, an eviction, even with
// cluster-admin's rules in the namespace.
func TestRestorePodWritesPolicy(t *testing.T) {
	ctx := t.Context()
	installPlatform(t)
	ns := newNamespace(ctx, t, "rpods")
	op := clientAs(t, operatorUser("restore"), saGroups...)
	newPod := func(name string, finalizers ...string) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": "shop"}, Finalizers: finalizers},
			Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false),
				Containers: []corev1.Container{{Name: "agent", Image: "example.test/agent:1"}}},
		}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cur := &corev1.Pod{}
			if env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), cur) == nil {
				base := cur.DeepCopy()
				cur.Finalizers = nil
				_ = env.Client.Patch(context.Background(), cur, client.MergeFrom(base))
				_ = env.Client.Delete(context.Background(), cur)
			}
		})
		return p
	}
	held := newPod("held", scratchReportFinalizer, "example.test/keep")
	plain := newPod("plain")
	meta := func(p *corev1.Pod, mutate func(*corev1.Pod)) error {
		cur := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), cur); err != nil {
			t.Fatal(err)
		}
		base := cur.DeepCopy()
		mutate(cur)
		return op.Patch(ctx, cur, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
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

	// The policy is compiled in the background: wait until it refuses an
	// image change (before, RBAC alone lets it through).
	const notSpec = "may not change a pod's spec, labels"
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		last = meta(plain, func(p *corev1.Pod) {
			p.Spec.Containers[0].Image = fmt.Sprintf("attacker.example/x:%d", time.Now().UnixNano())
		})
		return last != nil && strings.Contains(last.Error(), notSpec), nil
	})
	if err != nil {
		t.Fatalf("changing a pod's image was not refused by the policy: %v", last)
	}
	const onlyRemove = "may only remove its own finalizer"
	refused("change a label", meta(held, func(p *corev1.Pod) { p.Labels["app"] = "evil" }), notSpec)
	refused("drop another finalizer", meta(held, func(p *corev1.Pod) { controllerutil.RemoveFinalizer(p, "example.test/keep") }), onlyRemove)
	refused("add its finalizer", meta(plain, func(p *corev1.Pod) { p.Finalizers = append(p.Finalizers, scratchReportFinalizer) }), onlyRemove)

	// What the operator does is allowed.
	if err := meta(held, func(p *corev1.Pod) { controllerutil.RemoveFinalizer(p, scratchReportFinalizer) }); err != nil {
		t.Fatalf("removing its finalizer: %v", err)
	}

	// A compromised or over-granted operator: cluster-admin's rules in the
	// namespace. RBAC now allows everything; the policy still refuses.
	bind(ctx, t, ns, "operator-admin", "cluster-admin", saSubject("restore"))
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return can(ctx, t, operatorUser("restore"), saGroups, "delete", "", "pods", ns), nil
	})
	if err != nil {
		t.Fatal("admin was not granted")
	}
	refused("delete a pod as admin", op.Delete(ctx, plain.DeepCopy()), "may not create, delete or evict")
	refused("create a pod as admin", op.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "attacker.example/x"}}}}), "may not create, delete or evict")
	refused("evict a pod as admin", op.SubResource("eviction").Create(ctx, plain.DeepCopy(),
		&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: plain.Name}}), "may not create, delete or evict")
	refused("change an image as admin", meta(plain, func(p *corev1.Pod) { p.Spec.Containers[0].Image = "attacker.example/x" }), notSpec)
}

// TestRestorePodWritesPolicyMatchesTheServiceAccount: the policy names the
// restore operator's ServiceAccount as the platform installs it.
func TestRestorePodWritesPolicyMatchesTheServiceAccount(t *testing.T) {
	for _, dir := range []string{"platform", "deploy/restore"} {
		objs := build(t, dir)
		var sa *unstructured.Unstructured
		for _, o := range ofKind(objs, "ServiceAccount") {
			if strings.HasPrefix(o.GetName(), "cairn-restore-") {
				sa = o
			}
		}
		if sa == nil {
			t.Fatalf("%s: no restore ServiceAccount", dir)
		}
		vap := find(t, objs, "ValidatingAdmissionPolicy", "cairn-restore-pod-writes")
		find(t, objs, "ValidatingAdmissionPolicyBinding", "cairn-restore-pod-writes")
		conds, _, _ := unstructured.NestedSlice(vap.Object, "spec", "matchConditions")
		want := fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:%s'", sa.GetNamespace(), sa.GetName())
		if len(conds) != 1 || strings.TrimSpace(conds[0].(map[string]any)["expression"].(string)) != want {
			t.Errorf("%s: the policy's matchConditions are %v, want exactly %s", dir, conds, want)
		}
	}
}
