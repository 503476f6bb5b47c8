package ownership_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/ownership"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{testtype.CRDDir()}, Scheme: testtype.Scheme()}, &env)
}

const ownerLabel = "test.cairn.dev/widget"

func owner(t *testing.T, ns, name string) *testtype.Widget {
	t.Helper()
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := env.Client.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	return w
}

func desiredCronJob(ns, schedule string) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-backup", Labels: map[string]string{ownerLabel: "w"}},
		Spec: batchv1.CronJobSpec{
			Schedule: schedule,
			TimeZone: ptr.To("Asia/Shanghai"),
			Suspend:  ptr.To(false),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
				BackoffLimit: ptr.To[int32](3),
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever,
					Containers:    []corev1.Container{{Name: "agent", Image: "agent:1", Args: []string{"backup"}}},
				}},
			}},
		},
	}
}

func TestEnsureCreatesLeavesAloneRevertsNeverDuplicates(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	w := owner(t, ns, "w")
	a := &ownership.Applier{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme}

	op, err := a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *"))
	if err != nil || op != ownership.Created {
		t.Fatalf("first Ensure: %s %v", op, err)
	}
	// The API server defaulted many fields (concurrencyPolicy, history limits,
	// terminationMessagePath, ...): that is not drift.
	op, err = a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *"))
	if err != nil || op != ownership.Unchanged {
		t.Fatalf("second Ensure with the same desired state: %s %v", op, err)
	}

	// A spec change updates in place.
	op, err = a.Ensure(ctx, w, desiredCronJob(ns, "30 3 * * *"))
	if err != nil || op != ownership.Updated {
		t.Fatalf("Ensure after a schedule change: %s %v", op, err)
	}

	// An out-of-band edit is reverted, and the defaults stay.
	cj := &batchv1.CronJob{}
	key := client.ObjectKey{Namespace: ns, Name: "w-backup"}
	if err := env.Client.Get(ctx, key, cj); err != nil {
		t.Fatal(err)
	}
	cj.Spec.Schedule = "* * * * *"
	cj.Spec.JobTemplate.Spec.BackoffLimit = ptr.To[int32](99)
	cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "evil:1"
	if err := env.Client.Update(ctx, cj); err != nil {
		t.Fatal(err)
	}
	op, err = a.Ensure(ctx, w, desiredCronJob(ns, "30 3 * * *"))
	if err != nil || op != ownership.Updated {
		t.Fatalf("Ensure after drift: %s %v", op, err)
	}
	if err := env.Client.Get(ctx, key, cj); err != nil {
		t.Fatal(err)
	}
	if cj.Spec.Schedule != "30 3 * * *" || *cj.Spec.JobTemplate.Spec.BackoffLimit != 3 || cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image != "agent:1" {
		t.Fatalf("drift not reverted: %+v", cj.Spec)
	}
	if cj.Spec.ConcurrencyPolicy == "" || cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].TerminationMessagePath == "" {
		t.Fatal("API server defaults lost")
	}
	if !metav1.IsControlledBy(cj, w) {
		t.Fatal("controller reference missing")
	}

	// Deleted out of band: recreated; there is still exactly one.
	if err := env.Client.Delete(ctx, cj); err != nil {
		t.Fatal(err)
	}
	if op, err = a.Ensure(ctx, w, desiredCronJob(ns, "30 3 * * *")); err != nil || op != ownership.Created {
		t.Fatalf("Ensure after delete: %s %v", op, err)
	}
	list := &batchv1.CronJobList{}
	if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("%d CronJobs, want exactly 1", len(list.Items))
	}
}

func TestEnsureNeverAdopts(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	w := owner(t, ns, "w")
	theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}, Data: map[string]string{"k": "theirs"}}
	if err := env.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	a := &ownership.Applier{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme}
	_, err = a.Ensure(ctx, w, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}, Data: map[string]string{"k": "ours"}})
	var nc *ownership.NotControlledError
	if !errors.As(err, &nc) {
		t.Fatalf("Ensure over someone else's object: %v, want NotControlledError", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(theirs), theirs); err != nil || theirs.Data["k"] != "theirs" {
		t.Fatalf("someone else's object was changed: %v %v", theirs.Data, err)
	}
}

func TestSetControllerFailsLoudly(t *testing.T) {
	noUID := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "w"}}
	if err := ownership.SetController(noUID, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c"}}, env.Scheme); err == nil {
		t.Fatal("owner without UID accepted")
	}
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "w", UID: "u1"}}
	if err := ownership.SetController(w, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "c"}}, env.Scheme); err == nil {
		t.Fatal("cross-namespace child accepted")
	}
	other := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "o", UID: "u2"}}
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "c"}}
	if err := ownership.SetController(other, child, env.Scheme); err != nil {
		t.Fatal(err)
	}
	if err := ownership.SetController(w, child, env.Scheme); err == nil {
		t.Fatal("child controlled by another owner accepted")
	}
}

func TestSubset(t *testing.T) {
	have := map[string]any{"a": int64(1), "b": map[string]any{"c": "x", "d": "y"}, "l": []any{map[string]any{"n": "1", "def": true}}}
	cases := []struct {
		want map[string]any
		ok   bool
	}{
		{map[string]any{"a": int64(1)}, true},
		{map[string]any{"b": map[string]any{"c": "x"}}, true},
		{map[string]any{"l": []any{map[string]any{"n": "1"}}}, true},
		{map[string]any{"a": int64(2)}, false},
		{map[string]any{"z": "new"}, false},
		{map[string]any{"l": []any{map[string]any{"n": "1"}, map[string]any{"n": "2"}}}, false},
		{map[string]any{"b": map[string]any{"c": "other"}}, false},
		{map[string]any{"empty": map[string]any{}}, true},
	}
	for i, c := range cases {
		if got := ownership.Subset(c.want, have); got != c.ok {
			t.Errorf("case %d: Subset(%v) = %v, want %v", i, c.want, got, c.ok)
		}
	}
}

// keyRecorder records which keys a controller reconciled.
type keyRecorder struct {
	ns   string
	mu   sync.Mutex
	keys map[string]int
}

func (k *keyRecorder) Reconcile(_ context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Namespace != k.ns {
		return reconcile.Result{}, nil // another test's objects
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys[req.Name]++
	return reconcile.Result{}, nil
}

func (k *keyRecorder) snapshot() map[string]int {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]int{}
	for n, c := range k.keys {
		out[n] = c
	}
	return out
}

func (k *keyRecorder) reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = map[string]int{}
}

func TestOnePodEventEnqueuesExactlyItsOwner(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := env.Namespace(ctx, "map")
	g.Expect(err).NotTo(HaveOccurred())

	const owners = 40
	for i := 0; i < owners; i++ {
		owner(t, ns, fmt.Sprintf("w-%02d", i))
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Labels: map[string]string{ownerLabel: "w-17"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
	g.Expect(env.Client.Create(ctx, pod)).To(Succeed())

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred())
	rec := &keyRecorder{ns: ns, keys: map[string]int{}}
	err = ctrl.NewControllerManagedBy(mgr).For(&testtype.Widget{}).
		Watches(&corev1.Pod{}, ownership.EnqueueOwnerByLabel(ownerLabel)).
		Named("maptest").Complete(rec)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = mgr.Start(ctx) }()

	// Initial sync: every owner once (the pod's create event folds into w-17's).
	g.Eventually(func() int { return len(rec.snapshot()) }).WithTimeout(60 * time.Second).Should(Equal(owners))
	g.Consistently(func() int { return len(rec.snapshot()) }).WithTimeout(time.Second).Should(Equal(owners))
	rec.reset()

	// One Pod event.
	pod.Annotations = map[string]string{"touched": "1"}
	g.Expect(env.Client.Update(ctx, pod)).To(Succeed())
	g.Eventually(rec.snapshot).WithTimeout(30 * time.Second).Should(HaveKey("w-17"))
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(Equal(map[string]int{"w-17": 1}))

	// An unlabelled pod enqueues nothing.
	rec.reset()
	stray := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "stray"}, Spec: pod.Spec}
	g.Expect(env.Client.Create(ctx, stray)).To(Succeed())
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(BeEmpty())
}
