package reconcile_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crreconcile "sigs.k8s.io/controller-runtime/pkg/reconcile"

	cairnv1 "cairn.dev/apis/meta/v1"
	"cairn.dev/libs/conditions"
	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/reconcile"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{testtype.CRDDir()}, Scheme: testtype.Scheme()}, &env)
}

const fin = "test.cairn.dev/cleanup"

type counter struct {
	next   http.RoundTripper
	writes atomic.Int64
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		c.writes.Add(1)
	}
	return c.next.RoundTrip(r)
}

// harness is a skeleton over Widgets with a direct (uncached) client that
// counts its writes, an event recorder, and counters of what the hooks saw.
type harness struct {
	r           *reconcile.Reconciler[*testtype.Widget, []string]
	c           client.Client
	writes      *counter
	transitions atomic.Int64
	forgotten   atomic.Int64
	ns          string
	stop        func()
}

func newHarness(t *testing.T, steps ...reconcile.Step[*testtype.Widget, []string]) *harness {
	t.Helper()
	g := NewWithT(t)
	cfg := rest.CopyConfig(env.Config)
	ct := &counter{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct }
	c, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	g.Expect(err).NotTo(HaveOccurred())
	cs := kubernetes.NewForConfigOrDie(env.Config)
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	ctx, cancel := context.WithCancel(context.Background())
	b.StartRecordingToSink(ctx.Done())
	rec := b.NewRecorder(env.Scheme, "reconcile-test")
	ns, err := env.Namespace(ctx, "skeleton")
	g.Expect(err).NotTo(HaveOccurred())
	h := &harness{c: c, writes: ct, ns: ns, stop: func() { cancel(); b.Shutdown() }}
	h.r = &reconcile.Reconciler[*testtype.Widget, []string]{
		Kind: "Widget", Client: c, Recorder: rec,
		New:       func() *testtype.Widget { return &testtype.Widget{} },
		Finalizer: &finalizer.Finalizer{Name: fin, Deadline: time.Minute, PollInterval: time.Second, Client: c, Recorder: rec},
		Steps:     steps,
		Transition: func(_ context.Context, _ events.EventRecorder, old, new *testtype.Widget) {
			h.transitions.Add(1)
		},
		Forget: func(types.NamespacedName) { h.forgotten.Add(1) },
	}
	t.Cleanup(h.stop)
	return h
}

func (h *harness) create(t *testing.T, name string) client.ObjectKey {
	t.Helper()
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: h.ns, Name: name}}
	NewWithT(t).Expect(env.Client.Create(context.Background(), w)).To(Succeed())
	return client.ObjectKeyFromObject(w)
}

func (h *harness) pass(key client.ObjectKey) (ctrl.Result, error) {
	return h.r.Reconcile(context.Background(), ctrl.Request{NamespacedName: key})
}

func (h *harness) get(t *testing.T, key client.ObjectKey) *testtype.Widget {
	t.Helper()
	w := &testtype.Widget{}
	NewWithT(t).Expect(env.Client.Get(context.Background(), key, w)).To(Succeed())
	return w
}

func setNote(note string) reconcile.Step[*testtype.Widget, []string] {
	return reconcile.Step[*testtype.Widget, []string]{Name: "note", Run: func(_ context.Context, p *reconcile.Pass[*testtype.Widget, []string]) error {
		p.State = append(p.State, note)
		p.Obj.Status.Note = note
		conditions.MarkReady(p.Obj, cairnv1.SucceededReason, "note is "+note)
		return nil
	}}
}

func TestFinalizerFirstThenStepsThenOneWriteThenNone(t *testing.T) {
	g := NewWithT(t)
	ran := atomic.Int64{}
	count := reconcile.Step[*testtype.Widget, []string]{Name: "count", Run: func(context.Context, *reconcile.Pass[*testtype.Widget, []string]) error {
		ran.Add(1)
		return nil
	}}
	h := newHarness(t, count, setNote("done"))
	key := h.create(t, "w")

	_, err := h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.get(t, key).Finalizers).To(ContainElement(fin))
	g.Expect(ran.Load()).To(BeZero(), "a pass that adds the finalizer returns before the steps")
	g.Expect(h.writes.writes.Load()).To(Equal(int64(1)))

	_, err = h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	w := h.get(t, key)
	g.Expect(ran.Load()).To(Equal(int64(1)))
	g.Expect(w.Status.Note).To(Equal("done"))
	g.Expect(w.Status.ObservedGeneration).To(Equal(w.Generation))
	g.Expect(h.writes.writes.Load()).To(Equal(int64(2)), "one status write")
	g.Expect(h.transitions.Load()).To(Equal(int64(1)))

	_, err = h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.writes.writes.Load()).To(Equal(int64(2)), "nothing changed: no write")
	g.Expect(h.transitions.Load()).To(Equal(int64(1)), "nothing stored: no transition")
}

func TestTypedErrorsSetConditionsAndResult(t *testing.T) {
	var next error
	step := reconcile.Step[*testtype.Widget, []string]{Name: "typed", Run: func(context.Context, *reconcile.Pass[*testtype.Widget, []string]) error { return next }}
	after := atomic.Int64{}
	later := reconcile.Step[*testtype.Widget, []string]{Name: "later", Run: func(context.Context, *reconcile.Pass[*testtype.Widget, []string]) error {
		after.Add(1)
		return nil
	}}
	h := newHarness(t, step, later)
	key := h.create(t, "typed")
	_, _ = h.pass(key) // finalizer

	for _, tc := range []struct {
		name      string
		err       error
		cond      string
		reason    string
		terminal  bool
		wantErr   bool
		requeueAt time.Duration
	}{
		{"stalled", reconcile.Stalled("Broken", "spec.x is %s", "wrong"), cairnv1.StalledCondition, "Broken", true, true, 0},
		{"waiting", reconcile.Waiting(7*time.Second, "WaitingForIt", "waiting for %s", "it"), cairnv1.ReconcilingCondition, "WaitingForIt", false, false, 7 * time.Second},
		{"transient", errors.New("connection refused"), cairnv1.ReconcilingCondition, cairnv1.ReconcileErrorReason, false, true, 0},
		{"transient with reason", reconcile.Transient("StoreDown", errors.New("no route")), cairnv1.ReconcilingCondition, "StoreDown", false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			next = tc.err
			before := after.Load()
			res, err := h.pass(key)
			g.Expect(err != nil).To(Equal(tc.wantErr))
			g.Expect(errors.Is(err, crreconcile.TerminalError(nil))).To(Equal(tc.terminal))
			g.Expect(res.RequeueAfter).To(Equal(tc.requeueAt))
			g.Expect(after.Load()).To(Equal(before), "a typed error ends the pass")
			w := h.get(t, key)
			c := conditions.Get(w, tc.cond)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(conditions.Get(w, cairnv1.ReadyCondition).Status).To(Equal(metav1.ConditionFalse))
		})
	}
	t.Run("done", func(t *testing.T) {
		g := NewWithT(t)
		next = reconcile.Done()
		before := after.Load()
		res, err := h.pass(key)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(ctrl.Result{}))
		g.Expect(after.Load()).To(Equal(before))
	})
}

// A status computed from a stale read is never stored, and its transition
// is not emitted; the next pass stores it and emits it once.
func TestConflictingWriteEmitsNothing(t *testing.T) {
	g := NewWithT(t)
	interfere := atomic.Bool{}
	meddle := reconcile.Step[*testtype.Widget, []string]{Name: "meddle", Run: func(ctx context.Context, p *reconcile.Pass[*testtype.Widget, []string]) error {
		if interfere.Load() {
			w := &testtype.Widget{}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p.Obj), w); err != nil {
				return err
			}
			w.Status.Note = "someone else"
			if err := env.Client.Status().Update(ctx, w); err != nil {
				return err
			}
		}
		return nil
	}}
	h := newHarness(t, meddle, setNote("mine"))
	key := h.create(t, "conflict")
	_, _ = h.pass(key)
	interfere.Store(true)
	_, err := h.pass(key)
	g.Expect(err).To(HaveOccurred())
	g.Expect(h.transitions.Load()).To(BeZero())
	g.Expect(h.get(t, key).Status.Note).To(Equal("someone else"))
	interfere.Store(false)
	_, err = h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.transitions.Load()).To(Equal(int64(1)))
	g.Expect(h.get(t, key).Status.Note).To(Equal("mine"))
}

// Checkpoint stores progress before the pass goes on, with its own
// transition; a later failure of the pass does not undo it.
func TestCheckpointStoresProgress(t *testing.T) {
	g := NewWithT(t)
	progress := reconcile.Step[*testtype.Widget, []string]{Name: "progress", Run: func(ctx context.Context, p *reconcile.Pass[*testtype.Widget, []string]) error {
		p.Obj.Status.Note = "copied-1"
		if err := p.Checkpoint(ctx); err != nil {
			return err
		}
		p.Obj.Status.Note = "copied-2"
		return errors.New("the copy of table 2 broke")
	}}
	h := newHarness(t, progress)
	key := h.create(t, "ckpt")
	_, _ = h.pass(key)
	_, err := h.pass(key)
	g.Expect(err).To(MatchError(ContainSubstring("table 2")))
	w := h.get(t, key)
	g.Expect(w.Status.Note).To(Equal("copied-2"), "the final write stores the pass' state with the error condition")
	g.Expect(conditions.Get(w, cairnv1.ReconcilingCondition).Message).To(ContainSubstring("table 2"))
	g.Expect(h.transitions.Load()).To(Equal(int64(2)), "one transition per stored change")
}

func TestDeletionRunsCleanupAndForgets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	done := atomic.Bool{}
	h := newHarness(t, setNote("live"))
	h.r.Cleanup = func(p *reconcile.Pass[*testtype.Widget, []string]) finalizer.Cleanup {
		return finalizer.Cleanup{Run: func(context.Context) (bool, error) { return done.Load(), nil }}
	}
	h.r.Deleting = func(p *reconcile.Pass[*testtype.Widget, []string], err error) {
		p.Obj.Status.Note = "deleting"
		conditions.MarkReconciling(p.Obj, cairnv1.DeletingReason, "cleaning up")
	}
	key := h.create(t, "del")
	_, _ = h.pass(key)
	_, _ = h.pass(key)
	g.Expect(env.Client.Delete(ctx, h.get(t, key))).To(Succeed())
	res, err := h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	g.Expect(h.get(t, key).Status.Note).To(Equal("deleting"))
	done.Store(true)
	_, err = h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(h.forgotten.Load()).To(Equal(int64(1)))
	_, err = h.pass(key)
	g.Expect(err).NotTo(HaveOccurred(), "NotFound is not an error")
	g.Expect(h.forgotten.Load()).To(Equal(int64(2)))
}

// A failing cleanup step is not an error for the work queue (its backoff
// would decide when the deadline is looked at): the pass asks to be looked
// at again within the deadline, the error is in the Deleting condition, and
// a pass that fails the same way again writes nothing (issue 30).
func TestFailingCleanupRequeuesWithoutBackoffOrWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	h := newHarness(t, setNote("live"))
	h.r.Finalizer.Deadline = time.Hour
	h.r.Cleanup = func(p *reconcile.Pass[*testtype.Widget, []string]) finalizer.Cleanup {
		return finalizer.Cleanup{Run: func(context.Context) (bool, error) { return false, errors.New("store unreachable") }}
	}
	h.r.Deleting = func(p *reconcile.Pass[*testtype.Widget, []string], err error) {
		msg := "cleaning up"
		if err != nil {
			msg += ": " + err.Error()
		}
		conditions.MarkReconciling(p.Obj, cairnv1.DeletingReason, msg)
	}
	key := h.create(t, "down")
	_, _ = h.pass(key)
	_, _ = h.pass(key)
	g.Expect(env.Client.Delete(ctx, h.get(t, key))).To(Succeed())
	res, err := h.pass(key)
	g.Expect(err).NotTo(HaveOccurred(), "a failed cleanup step must not go to the work queue's backoff")
	g.Expect(res.RequeueAfter).To(BeNumerically(">", 0))
	g.Expect(res.RequeueAfter).To(BeNumerically("<=", time.Hour))
	w := h.get(t, key)
	g.Expect(conditions.Get(w, cairnv1.ReconcilingCondition).Message).To(ContainSubstring("store unreachable"))
	rv := w.ResourceVersion
	for range 3 {
		_, err = h.pass(key)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(h.get(t, key).ResourceVersion).To(Equal(rv), "the same failure again must not rewrite status")
}

// The generic transition Event: reason is Ready's reason, Warning when Stalled.
func TestTransitionEvent(t *testing.T) {
	g := NewWithT(t)
	var next error
	step := reconcile.Step[*testtype.Widget, []string]{Name: "x", Run: func(_ context.Context, p *reconcile.Pass[*testtype.Widget, []string]) error {
		if next == nil {
			p.Obj.Status.Note = "Ready"
			conditions.MarkReady(p.Obj, "AllGood", "all good")
		}
		return next
	}}
	h := newHarness(t, step)
	key := h.create(t, "ev")
	_, _ = h.pass(key)
	_, _ = h.pass(key)
	next = reconcile.Stalled("Broken", "broken")
	_, _ = h.pass(key)
	g.Eventually(func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(context.Background(), list, client.InNamespace(h.ns))).To(Succeed())
		var out []string
		for _, e := range list.Items {
			out = append(out, e.Type+"/"+e.Reason)
		}
		return out
	}).WithTimeout(20 * time.Second).Should(ContainElements("Normal/AllGood", "Warning/Broken"))
}

// The head every pass shares: the steps read a defaulted copy (the stored
// spec untouched), Begin runs first, a final status ends the pass before
// any step (status still written), and an invalid defaulted spec stalls it
// with Validate's reason.
func TestPrepareDefaultsBeginFinalValidate(t *testing.T) {
	g := NewWithT(t)
	var seen []int32
	record := reconcile.Step[*testtype.Widget, []string]{Name: "record", Run: func(_ context.Context, p *reconcile.Pass[*testtype.Widget, []string]) error {
		seen = append(seen, p.Defaulted.Spec.Size)
		p.Obj.Status.Note = "stepped"
		return nil
	}}
	h := newHarness(t, record)
	h.r.Defaults = func(w *testtype.Widget) {
		if w.Spec.Size == 0 {
			w.Spec.Size = 3
		}
	}
	h.r.Begin = func(p *reconcile.Pass[*testtype.Widget, []string]) {
		if p.Obj.Status.Note == "" {
			p.Obj.Status.Note = "pending"
		}
	}
	h.r.Final = func(w *testtype.Widget) bool { return w.Status.Note == "final" }
	h.r.Validate = func(p *reconcile.Pass[*testtype.Widget, []string]) (field.ErrorList, string) {
		if p.Defaulted.Spec.Size > 10 {
			return field.ErrorList{field.Invalid(field.NewPath("spec", "size"), p.Defaulted.Spec.Size, "at most 10")}, "TooBig"
		}
		return nil, ""
	}
	key := h.create(t, "head")
	_, _ = h.pass(key) // finalizer
	_, err := h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(Equal([]int32{3}), "the step reads the defaulted spec")
	w := h.get(t, key)
	g.Expect(w.Spec.Size).To(BeZero(), "the stored spec is not defaulted")
	g.Expect(w.Status.Note).To(Equal("stepped"))

	// Invalid: Stalled with the reason, no step.
	w.Spec.Size = 11
	g.Expect(env.Client.Update(context.Background(), w)).To(Succeed())
	_, err = h.pass(key)
	g.Expect(errors.Is(err, crreconcile.TerminalError(nil))).To(BeTrue())
	g.Expect(seen).To(HaveLen(1))
	st := conditions.Get(h.get(t, key), cairnv1.StalledCondition)
	g.Expect(st).NotTo(BeNil())
	g.Expect(st.Reason).To(Equal("TooBig"))
	g.Expect(st.Message).To(ContainSubstring("at most 10"))

	// Final: no step, no Validate; Summarize sees Done.
	w = h.get(t, key)
	w.Status.Note = "final"
	g.Expect(env.Client.Status().Update(context.Background(), w)).To(Succeed())
	var summarized error
	h.r.Summarize = func(_ *reconcile.Pass[*testtype.Widget, []string], err error) error { summarized = err; return err }
	_, err = h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen).To(HaveLen(1))
	g.Expect(summarized).To(MatchError(reconcile.Done()))
	g.Expect(h.get(t, key).Status.Note).To(Equal("final"))
}

// Summarize is called at a checkpoint too, and can tell it is one.
func TestSummarizeAtCheckpoint(t *testing.T) {
	g := NewWithT(t)
	progress := reconcile.Step[*testtype.Widget, []string]{Name: "progress", Run: func(ctx context.Context, p *reconcile.Pass[*testtype.Widget, []string]) error {
		p.Obj.Status.Note = "copied-1"
		return p.Checkpoint(ctx)
	}}
	h := newHarness(t, progress)
	var at []bool
	h.r.Summarize = func(p *reconcile.Pass[*testtype.Widget, []string], err error) error {
		at = append(at, p.AtCheckpoint())
		return err
	}
	key := h.create(t, "ckpt-summarize")
	_, _ = h.pass(key)
	_, err := h.pass(key)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(at).To(Equal([]bool{true, false}))
}
