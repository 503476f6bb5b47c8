package ownership_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/ownership"
)

// deleteRecorder records the bodies of a client's DELETE requests.
type deleteRecorder struct {
	mu     sync.Mutex
	bodies []string
}

func (d *deleteRecorder) client(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodDelete && r.Body != nil {
				b, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(strings.NewReader(string(b)))
				d.mu.Lock()
				d.bodies = append(d.bodies, string(b))
				d.mu.Unlock()
			}
			return rt.RoundTrip(r)
		})
	}
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func (d *deleteRecorder) take() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.bodies
	d.bodies = nil
	return out
}

func configMap(t *testing.T, ns, name string, labels map[string]string, controller *testtype.Widget, finalizers ...string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Finalizers: finalizers}}
	if controller != nil {
		if err := ownership.SetController(controller, cm, env.Scheme); err != nil {
			t.Fatal(err)
		}
	}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func exists(t *testing.T, obj client.Object) bool {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestDeleteChildrenAndWaitUntilGone(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "del")
	if err != nil {
		t.Fatal(err)
	}
	w, other := owner(t, ns, "w"), owner(t, ns, "other")
	mine := map[string]string{ownerLabel: "w"}
	a := configMap(t, ns, "a", mine, w)
	b := configMap(t, ns, "b", mine, w, "test.cairn.dev/hold") // stays Terminating until released
	foreign := configMap(t, ns, "foreign", mine, other)        // labelled, but someone else's
	unlabelled := configMap(t, ns, "unlabelled", nil, w)       // ours, but not selected
	// A CronJob child, listed as metadata only.
	cj := desiredCronJob(ns, "0 2 * * *")
	if err := ownership.SetController(w, cj, env.Scheme); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, cj); err != nil {
		t.Fatal(err)
	}
	cronJobs := &metav1.PartialObjectMetadataList{}
	cronJobs.SetGroupVersionKind(batchv1.SchemeGroupVersion.WithKind("CronJobList"))

	rec := &deleteRecorder{}
	c := rec.client(t)
	ch := ownership.Children{Kinds: []client.ObjectList{&corev1.ConfigMapList{}, cronJobs}, Labels: mine, Controlled: true}

	gone, err := ownership.DeleteChildren(ctx, c, w, ch)
	if err != nil || gone {
		t.Fatalf("first pass: gone=%v err=%v, want false (children were there)", gone, err)
	}
	bodies := rec.take()
	if len(bodies) != 3 {
		t.Fatalf("%d deletes, want 3 (a, b, the CronJob): %v", len(bodies), bodies)
	}
	// Delete options (JSON or protobuf) carry the policy and the child's UID.
	uids := map[string]bool{string(a.UID): false, string(b.UID): false, string(cj.UID): false}
	for _, body := range bodies {
		if !strings.Contains(body, "Background") {
			t.Fatalf("delete without background propagation: %q", body)
		}
		for uid := range uids {
			if strings.Contains(body, uid) {
				uids[uid] = true
			}
		}
	}
	for uid, seen := range uids {
		if !seen {
			t.Fatalf("no delete carried UID precondition %s: %q", uid, bodies)
		}
	}
	if exists(t, a) || exists(t, cj) {
		t.Fatal("a child was not deleted")
	}
	if !exists(t, foreign) || !exists(t, unlabelled) {
		t.Fatal("an object that was not selected was deleted")
	}

	// b waits for its finalizer: not gone, and not deleted again.
	gone, err = ownership.DeleteChildren(ctx, c, w, ch)
	if err != nil || gone {
		t.Fatalf("while b is Terminating: gone=%v err=%v, want false", gone, err)
	}
	if n := len(rec.take()); n != 0 {
		t.Fatalf("%d deletes of a child already being deleted, want 0", n)
	}
	cur := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(b), cur); err != nil {
		t.Fatal(err)
	}
	cur.Finalizers = nil
	if err := env.Client.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	gone, err = ownership.DeleteChildren(ctx, c, w, ch)
	if err != nil || !gone {
		t.Fatalf("after b went: gone=%v err=%v, want true", gone, err)
	}

	// By label alone, someone else's labelled object goes too.
	gone, err = ownership.DeleteChildren(ctx, c, w, ownership.Children{Kinds: []client.ObjectList{&corev1.ConfigMapList{}}, Labels: mine})
	if err != nil || gone || exists(t, foreign) {
		t.Fatalf("by label: gone=%v err=%v, foreign exists=%v", gone, err, exists(t, foreign))
	}
	// By controller alone, the unlabelled child goes.
	gone, err = ownership.DeleteChildren(ctx, c, w, ownership.Children{Kinds: []client.ObjectList{&corev1.ConfigMapList{}}, Controlled: true})
	if err != nil || gone || exists(t, unlabelled) {
		t.Fatalf("by controller: gone=%v err=%v, unlabelled exists=%v", gone, err, exists(t, unlabelled))
	}

	// Labelled objects elsewhere (as in another cluster, where no owner
	// reference can point): by namespace, or cluster-wide.
	elsewhere, err := env.Namespace(ctx, "del")
	if err != nil {
		t.Fatal(err)
	}
	far := configMap(t, elsewhere, "far", mine, nil)
	if gone, err := ownership.DeleteChildren(ctx, c, w, ownership.Children{Kinds: []client.ObjectList{&corev1.ConfigMapList{}}, Labels: mine}); err != nil || !gone || !exists(t, far) {
		t.Fatalf("in the owner's namespace: gone=%v err=%v, far exists=%v (want true, true)", gone, err, exists(t, far))
	}
	if gone, err := ownership.DeleteChildren(ctx, c, w, ownership.Children{Kinds: []client.ObjectList{&corev1.ConfigMapList{}}, Labels: mine, Namespace: elsewhere}); err != nil || gone || exists(t, far) {
		t.Fatalf("in namespace %s: gone=%v err=%v, far exists=%v", elsewhere, gone, err, exists(t, far))
	}
	unique := map[string]string{"test.cairn.dev/made-for": elsewhere} // cluster-wide: touch no other test's objects
	far2 := configMap(t, elsewhere, "far2", unique, nil)
	if gone, err := ownership.DeleteChildren(ctx, c, w, ownership.Children{Kinds: []client.ObjectList{&corev1.ConfigMapList{}}, Labels: unique, ClusterWide: true}); err != nil || gone || exists(t, far2) {
		t.Fatalf("cluster-wide: gone=%v err=%v, far2 exists=%v", gone, err, exists(t, far2))
	}

	if _, err := ownership.DeleteChildren(ctx, c, w, ownership.Children{Kinds: []client.ObjectList{&corev1.ConfigMapList{}}}); err == nil {
		t.Fatal("neither Labels nor Controlled: accepted")
	}
}

// replacingClient, between listing and deleting, replaces every listed
// ConfigMap by a new one of the same name (a new UID), as a race would.
type replacingClient struct {
	client.Client
	t     *testing.T
	owner *testtype.Widget
}

func (r replacingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Client.List(ctx, list, opts...); err != nil {
		return err
	}
	for _, cm := range list.(*corev1.ConfigMapList).Items {
		if err := env.Client.Delete(ctx, &cm); err != nil {
			return err
		}
		configMap(r.t, cm.Namespace, cm.Name, cm.Labels, r.owner)
	}
	return nil
}

func TestDeleteChildrenNeverDeletesAReplacement(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "del")
	if err != nil {
		t.Fatal(err)
	}
	w := owner(t, ns, "w")
	old := configMap(t, ns, "a", map[string]string{ownerLabel: "w"}, w)
	c := replacingClient{Client: env.Client, t: t, owner: w}
	gone, err := ownership.DeleteChildren(ctx, c, w, ownership.Children{Kinds: []client.ObjectList{&corev1.ConfigMapList{}}, Controlled: true})
	if err != nil || gone {
		t.Fatalf("gone=%v err=%v, want false and no error (look again)", gone, err)
	}
	cur := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), cur); err != nil {
		t.Fatalf("the replacement was deleted: %v", err)
	}
	if cur.UID == old.UID {
		t.Fatal("test setup: not replaced")
	}
}
