package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"cairn.dev/libs/manager"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{}, &env)
}

func TestParallelRunsEveryIndexOnceAndReturnsAnError(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	boom := errors.New("boom")
	err := Parallel(100, 7, func(i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		if i == 42 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Errorf("error = %v, want %v", err, boom)
	}
	if len(seen) != 100 {
		t.Errorf("%d indexes ran, want 100", len(seen))
	}
	for i, n := range seen {
		if n != 1 || i < 0 || i >= 100 {
			t.Errorf("index %d ran %d times", i, n)
		}
	}
	if err := Parallel(3, 0, func(int) error { return nil }); err != nil {
		t.Errorf("no error expected: %v", err)
	}
}

func TestCounterCountsWritesEventsReadsAndReviewsButNotWatches(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer srv.Close()
	c := &Counter{next: http.DefaultTransport}
	hc := &http.Client{Transport: c}
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/api/v1/namespaces/a/secrets/s"},                      // read
		{http.MethodGet, "/api/v1/namespaces/a/secrets"},                        // read (list)
		{http.MethodGet, "/api/v1/namespaces/a/secrets?watch=true"},             // watch: not counted
		{http.MethodPost, "/apis/batch/v1/namespaces/a/jobs"},                   // write
		{http.MethodPatch, "/apis/x.dev/v1/namespaces/a/things/t/status"},       // write
		{http.MethodDelete, "/apis/batch/v1/namespaces/a/jobs/j"},               // write
		{http.MethodPost, "/apis/events.k8s.io/v1/namespaces/a/events"},         // Event
		{http.MethodPatch, "/api/v1/namespaces/a/events/e"},                     // Event
		{http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews"}, // review: stores nothing
	} {
		req, err := http.NewRequest(r.method, srv.URL+r.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if got, want := c.Load(), (Counts{Writes: 3, Events: 2, Reads: 2, Reviews: 1}); got != want {
		t.Errorf("counts %+v, want %+v", got, want)
	}
	if got := c.Load().Sub(Counts{Writes: 1, Events: 1, Reads: 1, Reviews: 1}); got != (Counts{2, 1, 1, 0}) {
		t.Errorf("Sub: %+v", got)
	}
}

func TestReadCPUCountsTheChildrenItStarted(t *testing.T) {
	before := ReadCPU()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true,
		func(context.Context) (bool, error) { return ReadCPU().Sub(before).Server >= 0.2, nil })
	if err != nil {
		t.Fatalf("a busy child used no CPU in ReadCPU's count after a minute: %+v", ReadCPU().Sub(before))
	}
}

func TestRowStringHasEveryColumn(t *testing.T) {
	r := Row{N: 10, Converge: 2 * time.Second, Floor: time.Second, Create: Counts{Writes: 20, Events: 10},
		Reconciles: 10, HeapBytes: 10 * 2048}
	cols := func(s string) int { return strings.Count(strings.TrimSpace(s), "|") - 1 }
	header := strings.SplitN(Header, "\n", 2)[0]
	if got, want := cols(r.String()), cols(header); got != want {
		t.Fatalf("row has %d columns, header %d:\n%s%s", got, want, Header, r.String())
	}
	if !strings.HasPrefix(r.String(), "| 10 | 2.00 | 1.00 | 2.00 | 2.00 | 1.00 | 1.00 | 0.00 | — | 0.00 | 0.00 | 2.0 |") {
		t.Errorf("row: %s", r.String())
	}
	r.ConversionsCounted, r.Conversions = true, 30
	if !strings.Contains(r.String(), "| 3.00 |") {
		t.Errorf("conversions not shown: %s", r.String())
	}
}

// owner is a one-controller operator for the harness' own test: for every
// ConfigMap it creates one Secret of the same name (owned by it), and
// writes nothing when the Secret is there.
func owner(string) manager.Operator {
	return manager.Operator{
		Name: "benchtest",
		Setup: func(_ context.Context, mgr ctrl.Manager, o *manager.Options) error {
			c := mgr.GetClient()
			return ctrl.NewControllerManagedBy(mgr).Named("benchtest").For(&corev1.ConfigMap{}).Owns(&corev1.Secret{}).
				WithOptions(o.ControllerOptions()).
				Complete(reconcileFunc(func(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
					cm := &corev1.ConfigMap{}
					if err := c.Get(ctx, req.NamespacedName, cm); err != nil {
						return ctrl.Result{}, client.IgnoreNotFound(err)
					}
					s := &corev1.Secret{}
					err := c.Get(ctx, req.NamespacedName, s)
					if !apierrors.IsNotFound(err) {
						return ctrl.Result{}, err
					}
					s = secretFor(cm)
					if err := controllerutil.SetControllerReference(cm, s, c.Scheme()); err != nil {
						return ctrl.Result{}, err
					}
					return ctrl.Result{}, client.IgnoreAlreadyExists(c.Create(ctx, s))
				}))
		},
	}
}

type reconcileFunc func(context.Context, ctrl.Request) (ctrl.Result, error)

func (f reconcileFunc) Reconcile(ctx context.Context, r ctrl.Request) (ctrl.Result, error) {
	return f(ctx, r)
}

func secretFor(cm *corev1.ConfigMap) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name, Labels: map[string]string{"bench": "test"}}}
}

func TestRunMeasuresAnOperatorAgainstItsFloor(t *testing.T) {
	const n = 20
	var out strings.Builder
	k := Kind{
		Title: "test operator", Object: "ConfigMap", Controller: "benchtest",
		Operator: owner,
		New: func(ns string, i int) client.Object {
			return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%03d", i)}}
		},
		Floor: func(ctx context.Context, c client.Client, obj client.Object) error {
			s := secretFor(obj.(*corev1.ConfigMap))
			if err := controllerutil.SetControllerReference(obj, s, c.Scheme()); err != nil {
				return err
			}
			return c.Create(ctx, s)
		},
		Converged: func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
			l := &corev1.SecretList{}
			if err := c.List(ctx, l, FromCache(ns), client.MatchingLabels{"bench": "test"}); err != nil {
				return false, err
			}
			return len(l.Items) == n, nil
		},
	}
	rows, err := Run(context.Background(), env, k, Options{Sizes: []int{n}, Workers: 2, Out: &out, Timeout: 2 * time.Minute})
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows", len(rows))
	}
	r := rows[0]
	t.Logf("\n%s", out.String())
	if r.Create.Writes != n || r.Create.Events != 0 {
		t.Errorf("operator writes at creation %+v, want %d writes, 0 Events", r.Create, n)
	}
	if r.FloorCounts.Writes != n {
		t.Errorf("floor writes (beyond the creates) %d, want %d", r.FloorCounts.Writes, n)
	}
	if r.Resync.Writes != 0 {
		t.Errorf("writes at resync %d, want 0", r.Resync.Writes)
	}
	if r.Reconciles < n || r.ResyncReconciles < n {
		t.Errorf("reconciles %v at creation, %v at resync; want at least %d each", r.Reconciles, r.ResyncReconciles, n)
	}
	if r.Converge <= 0 || r.FloorBefore <= 0 || r.FloorAfter <= 0 || r.Floor != (r.FloorBefore+r.FloorAfter)/2 {
		t.Errorf("times: converge %v, floor %v (before %v, after %v): want all > 0, floor their mean", r.Converge, r.Floor, r.FloorBefore, r.FloorAfter)
	}
	// The floor after the operator made its writes in a namespace of its own.
	after := &corev1.SecretList{}
	if err := env.Client.List(context.Background(), after, client.InNamespace(fmt.Sprintf("floor-after-%d", n)), client.MatchingLabels{"bench": "test"}); err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != n {
		t.Errorf("the floor after the operator made %d Secrets, want %d", len(after.Items), n)
	}
	if !strings.Contains(out.String(), "# test operator benchmark") || !strings.Contains(out.String(), fmt.Sprintf("\n| %d |", n)) {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestAllDoneWantsEveryObjectDoneAndEveryChild(t *testing.T) {
	ctx := context.Background()
	c := env.Client
	ns := "alldone"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	converged := AllDone(&corev1.ConfigMapList{}, &corev1.SecretList{}, func(o client.Object) bool {
		return o.(*corev1.ConfigMap).Data["done"] == "yes"
	})
	// want polls until converged says want (the lists come from the watch
	// cache, which may lag the writes a little).
	want := func(n int, want bool, what string) {
		t.Helper()
		var got bool
		err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			got, err = converged(ctx, c, ns, n)
			return got == want, err
		})
		if err != nil {
			t.Fatalf("%s: converged = %v, want %v (%v)", what, got, want, err)
		}
	}
	cms := []*corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "a"}, Data: map[string]string{"done": "yes"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}, Data: map[string]string{"done": "no"}},
	}
	for _, cm := range cms {
		if err := c.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: cm.Name}}); err != nil {
			t.Fatal(err)
		}
	}
	want(3, false, "3 wanted, 2 there")
	want(2, false, "one object not done")
	cms[1].Data["done"] = "yes"
	if err := c.Update(ctx, cms[1]); err != nil {
		t.Fatal(err)
	}
	want(2, true, "both done, both children there")
	if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}); err != nil {
		t.Fatal(err)
	}
	want(2, false, "a child missing")
}
