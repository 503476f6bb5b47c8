package conditions_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{testtype.CRDDir()}, Scheme: testtype.Scheme()}, &env)
}

// kstatusOf reads w back from the API server and computes its kstatus.
func kstatusOf(t *testing.T, w *testtype.Widget) kstatus.Status {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(testtype.GroupVersion.WithKind("Widget"))
	if err := env.Client.Get(context.Background(), clientKey(w), u); err != nil {
		t.Fatal(err)
	}
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

func TestKstatusFollowsConditions(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "cond")
	if err != nil {
		t.Fatal(err)
	}
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w"}}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	// Never reconciled: the CRD defaults observedGeneration to -1.
	if got := kstatusOf(t, w); got != kstatus.InProgressStatus {
		t.Fatalf("fresh object: kstatus %s, want InProgress", got)
	}
	if w.Status.ObservedGeneration != -1 {
		t.Fatalf("fresh object: observedGeneration %d, want -1 (CRD default)", w.Status.ObservedGeneration)
	}

	steps := []struct {
		name string
		mark func(*testtype.Widget)
		want kstatus.Status
	}{
		{"reconciling", func(w *testtype.Widget) { conditions.MarkReconciling(w, cairnv1.ProgressingReason, "creating") }, kstatus.InProgressStatus},
		{"ready", func(w *testtype.Widget) { conditions.MarkReady(w, cairnv1.SucceededReason, "done") }, kstatus.CurrentStatus},
		{"stalled", func(w *testtype.Widget) { conditions.MarkStalled(w, cairnv1.InvalidSpecReason, "bad") }, kstatus.FailedStatus},
		{"ready again", func(w *testtype.Widget) { conditions.MarkReady(w, cairnv1.SucceededReason, "done") }, kstatus.CurrentStatus},
		{"not ready", func(w *testtype.Widget) { conditions.MarkNotReady(w, cairnv1.FailedReason, "last run failed") }, kstatus.InProgressStatus},
	}
	for _, s := range steps {
		s.mark(w)
		w.Status.ObservedGeneration = w.Generation
		if err := env.Client.Status().Update(ctx, w); err != nil {
			t.Fatal(err)
		}
		if got := kstatusOf(t, w); got != s.want {
			t.Fatalf("%s: kstatus %s, want %s (conditions %+v)", s.name, got, s.want, w.Status.Conditions)
		}
	}

	// Ready, but the spec changed since: the stale observedGeneration makes it InProgress.
	conditions.MarkReady(w, cairnv1.SucceededReason, "done")
	if err := env.Client.Status().Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	w.Spec.Size = 3
	if err := env.Client.Update(ctx, w); err != nil {
		t.Fatal(err)
	}
	if got := kstatusOf(t, w); got != kstatus.InProgressStatus {
		t.Fatalf("stale observedGeneration: kstatus %s, want InProgress", got)
	}
}

func TestSetStampsGenerationAndKeepsTransitionTime(t *testing.T) {
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Generation: 4}}
	conditions.MarkReady(w, "A", "x")
	c := conditions.Get(w, cairnv1.ReadyCondition)
	if c == nil || c.ObservedGeneration != 4 || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready = %+v", c)
	}
	first := c.LastTransitionTime
	w.Generation = 5
	conditions.MarkReady(w, "B", "y")
	c = conditions.Get(w, cairnv1.ReadyCondition)
	if c.ObservedGeneration != 5 || c.Reason != "B" || !c.LastTransitionTime.Equal(&first) {
		t.Fatalf("after re-marking Ready: %+v (first transition %s)", c, first)
	}
	conditions.MarkStalled(w, "Bad", "z")
	if conditions.IsTrue(w, cairnv1.ReadyCondition) || !conditions.IsTrue(w, cairnv1.StalledCondition) || conditions.Get(w, cairnv1.ReconcilingCondition) != nil {
		t.Fatalf("after MarkStalled: %+v", w.Status.Conditions)
	}
	conditions.MarkReconciling(w, "Go", "z")
	if conditions.Get(w, cairnv1.StalledCondition) != nil || !conditions.IsTrue(w, cairnv1.ReconcilingCondition) {
		t.Fatalf("after MarkReconciling: %+v", w.Status.Conditions)
	}
}

var _ runtime.Object = &testtype.Widget{}
