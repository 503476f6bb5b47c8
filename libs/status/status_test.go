package status_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/status"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{testtype.CRDDir()}, Scheme: testtype.Scheme()}, &env)
}

// countingTransport counts every request that is not a read.
type countingTransport struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(r)
}

func countingClient(t *testing.T) (client.Client, *countingTransport) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	ct := &countingTransport{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct }
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, ct
}

// reconcile is a minimal reconcile: read, compute status from spec, write if changed.
func reconcile(ctx context.Context, c client.Client, key client.ObjectKey) (bool, error) {
	w := &testtype.Widget{}
	if err := c.Get(ctx, key, w); err != nil {
		return false, err
	}
	orig := w.DeepCopy()
	w.Status.ObservedGeneration = w.Generation
	w.Status.Note = fmt.Sprintf("size %d", w.Spec.Size)
	conditions.MarkReady(w, cairnv1.SucceededReason, w.Status.Note)
	return status.Write(ctx, c, orig, w)
}

func TestWriteOnlyWhenChanged(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "status")
	if err != nil {
		t.Fatal(err)
	}
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}, Spec: testtype.WidgetSpec{Size: 1}}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	c, ct := countingClient(t)
	key := client.ObjectKeyFromObject(w)

	wrote, err := reconcile(ctx, c, key)
	if err != nil || !wrote || ct.writes.Load() != 1 {
		t.Fatalf("first reconcile: wrote=%v err=%v writes=%d, want one write", wrote, err, ct.writes.Load())
	}
	for i := 0; i < 5; i++ {
		wrote, err = reconcile(ctx, c, key)
		if err != nil || wrote {
			t.Fatalf("reconcile %d at rest: wrote=%v err=%v", i, wrote, err)
		}
	}
	if n := ct.writes.Load(); n != 1 {
		t.Fatalf("after 5 reconciles observing nothing new: %d writes, want 1 in total", n)
	}

	// A spec change is something new: exactly one more write, and it is visible.
	if err := env.Client.Get(ctx, key, w); err != nil {
		t.Fatal(err)
	}
	w.Spec.Size = 2
	if err := env.Client.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if wrote, err = reconcile(ctx, c, key); err != nil || !wrote {
		t.Fatalf("after spec change: wrote=%v err=%v", wrote, err)
	}
	got := &testtype.Widget{}
	if err := env.Client.Get(ctx, key, got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Note != "size 2" || got.Status.ObservedGeneration != got.Generation {
		t.Fatalf("status after write: %+v (generation %d)", got.Status, got.Generation)
	}
	if n := ct.writes.Load(); n != 2 {
		t.Fatalf("writes = %d, want 2", n)
	}
}

func TestIgnoreStatusUpdates(t *testing.T) {
	p := status.IgnoreStatusUpdates()
	base := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Generation: 1, ResourceVersion: "1"}}

	statusOnly := base.DeepCopy()
	statusOnly.ResourceVersion = "2"
	statusOnly.Status.Note = "changed"
	if p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: statusOnly}) {
		t.Error("a status-only update passed the predicate")
	}
	cases := map[string]func(w *testtype.Widget){
		"generation":  func(w *testtype.Widget) { w.Generation = 2 },
		"annotation":  func(w *testtype.Widget) { w.Annotations = map[string]string{"run-now": "1"} },
		"label":       func(w *testtype.Widget) { w.Labels = map[string]string{"a": "b"} },
		"finalizer":   func(w *testtype.Widget) { w.Finalizers = []string{"x"} },
		"deletion ts": func(w *testtype.Widget) { now := metav1.Now(); w.DeletionTimestamp = &now },
	}
	for name, mut := range cases {
		n := base.DeepCopy()
		mut(n)
		if !p.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: n}) {
			t.Errorf("%s change was dropped", name)
		}
	}
	if !p.Create(event.CreateEvent{Object: base}) || !p.Delete(event.DeleteEvent{Object: base}) {
		t.Error("create/delete must pass")
	}
}
