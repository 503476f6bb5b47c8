package finalizer_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	. "github.com/onsi/gomega"

	"cairn.dev/libs/finalizer"
	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/testing/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Options{CRDDirectoryPaths: []string{testtype.CRDDir()}, Scheme: testtype.Scheme()}, &env)
}

const name = "test.cairn.dev/cleanup"

func recorder(t *testing.T) events.EventRecorder {
	t.Helper()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	stop := make(chan struct{})
	b.StartRecordingToSink(stop)
	t.Cleanup(func() { close(stop); b.Shutdown() })
	return b.NewRecorder(env.Scheme, "finalizer-test")
}

// deleting creates a Widget holding the finalizer and deletes it.
func deleting(t *testing.T, f *finalizer.Finalizer, annotations map[string]string) *testtype.Widget {
	t.Helper()
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "fin")
	if err != nil {
		t.Fatal(err)
	}
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w", Annotations: annotations}}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	added, err := f.Ensure(ctx, w)
	if err != nil || !added {
		t.Fatalf("Ensure: added=%v err=%v", added, err)
	}
	if added, err := f.Ensure(ctx, w); err != nil || added {
		t.Fatalf("second Ensure must not write: added=%v err=%v", added, err)
	}
	if err := env.Client.Delete(ctx, w); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
		t.Fatalf("object held by the finalizer must still exist: %v", err)
	}
	if w.DeletionTimestamp.IsZero() {
		t.Fatal("no deletionTimestamp")
	}
	return w
}

func gone(t *testing.T, w *testtype.Widget) {
	t.Helper()
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(w), &testtype.Widget{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("object still exists after the finalizer was removed: %v", err)
	}
}

// waitEvent polls (with a deadline) for an event with reason on w.
func waitEvent(t *testing.T, w *testtype.Widget, reason string) *eventsv1.Event {
	t.Helper()
	var found *eventsv1.Event
	NewWithT(t).Eventually(func(g Gomega) {
		list := &eventsv1.EventList{}
		g.Expect(env.Client.List(context.Background(), list, client.InNamespace(w.Namespace))).To(Succeed())
		for i := range list.Items {
			if e := &list.Items[i]; e.Reason == reason && e.Regarding.Name == w.Name {
				found = e
			}
		}
		g.Expect(found).NotTo(BeNil(), "no %s event for %s/%s", reason, w.Namespace, w.Name)
	}).WithTimeout(30 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
	return found
}

func TestCleanupDoneRemovesFinalizer(t *testing.T) {
	f := &finalizer.Finalizer{Name: name, Deadline: time.Hour, Client: env.Client, Recorder: recorder(t)}
	w := deleting(t, f, nil)
	calls := 0
	cleanup := finalizer.Cleanup{Run: func(context.Context) (bool, error) { calls++; return calls >= 2, nil }}
	res, err := f.Finalize(context.Background(), w, cleanup)
	if err != nil || res.Removed || res.RequeueAfter <= 0 {
		t.Fatalf("first pass (cleanup not done): %+v %v", res, err)
	}
	res, err = f.Finalize(context.Background(), w, cleanup)
	if err != nil || !res.Removed {
		t.Fatalf("second pass (cleanup done): %+v %v", res, err)
	}
	gone(t, w)
}

func TestStoreDownUntilDeadline(t *testing.T) {
	now := time.Now()
	f := &finalizer.Finalizer{Name: name, Deadline: 10 * time.Minute, RetryInterval: 30 * time.Second,
		Client: env.Client, Recorder: recorder(t), Now: func() time.Time { return now }}
	w := deleting(t, f, nil)
	down := finalizer.Cleanup{
		Run:        func(context.Context) (bool, error) { return false, errors.New("store unreachable") },
		LeftBehind: func(context.Context) string { return "artifacts under s3://bucket/ns/w" },
	}
	res, err := f.Finalize(context.Background(), w, down)
	// The failure is for the condition (res.Err), not for the work queue:
	// its exponential backoff would decide when the deadline is looked at.
	if err != nil || res.Err == nil || res.Removed {
		t.Fatalf("before the deadline a failing cleanup must keep the finalizer and report its error in Err: %+v %v", res, err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 10*time.Minute {
		t.Fatalf("RequeueAfter %s, want within the deadline", res.RequeueAfter)
	}
	// Five seconds before the deadline the next look is at the deadline, to
	// the second — not a retry interval later.
	now = w.DeletionTimestamp.Add(10*time.Minute - 5*time.Second)
	res, err = f.Finalize(context.Background(), w, down)
	if err != nil || res.Removed || res.RequeueAfter != 5*time.Second {
		t.Fatalf("5s before the deadline: %+v %v, want RequeueAfter exactly 5s", res, err)
	}
	// A cleanup that is merely not done polls, capped the same way.
	waiting := finalizer.Cleanup{Run: func(context.Context) (bool, error) { return false, nil }}
	now = w.DeletionTimestamp.Add(10*time.Minute - 300*time.Millisecond)
	if res, err = f.Finalize(context.Background(), w, waiting); err != nil || res.Err != nil || res.RequeueAfter != 300*time.Millisecond {
		t.Fatalf("300ms before the deadline, cleanup not done: %+v %v, want RequeueAfter exactly 300ms", res, err)
	}
	now = w.DeletionTimestamp.Add(10*time.Minute + time.Second)
	res, err = f.Finalize(context.Background(), w, down)
	if err != nil || !res.Removed {
		t.Fatalf("after the deadline: %+v %v", res, err)
	}
	gone(t, w)
	e := waitEvent(t, w, finalizer.CleanupDeadlineExceededReason)
	if e.Type != "Warning" || !strings.Contains(e.Note, "artifacts under s3://bucket/ns/w") {
		t.Fatalf("event %s %q does not say what was left behind", e.Type, e.Note)
	}
}

// An abandoned cleanup releases what it held (Abandon) before the finalizer
// goes, and a failure to do so is in the Event.
func TestAbandonReleases(t *testing.T) {
	f := &finalizer.Finalizer{Name: name, Deadline: time.Hour, Client: env.Client, Recorder: recorder(t)}
	w := deleting(t, f, map[string]string{finalizer.SkipCleanupAnnotation: "true"})
	released := false
	res, err := f.Finalize(context.Background(), w, finalizer.Cleanup{
		Run:        func(context.Context) (bool, error) { return false, nil },
		LeftBehind: func(context.Context) string { return "artifacts" },
		Abandon:    func(context.Context) error { released = true; return errors.New("credentials copy still there") },
	})
	if err != nil || !res.Removed || !released {
		t.Fatalf("abandon: %+v err=%v released=%v", res, err, released)
	}
	if e := waitEvent(t, w, finalizer.CleanupSkippedReason); !strings.Contains(e.Note, "credentials copy still there") {
		t.Fatalf("event note %q does not name the failed release", e.Note)
	}
}

func TestEscapeHatchAnnotation(t *testing.T) {
	f := &finalizer.Finalizer{Name: name, Deadline: time.Hour, Client: env.Client, Recorder: recorder(t)}
	w := deleting(t, f, map[string]string{finalizer.SkipCleanupAnnotation: "true"})
	ran := false
	res, err := f.Finalize(context.Background(), w, finalizer.Cleanup{
		Run:        func(context.Context) (bool, error) { ran = true; return false, nil },
		LeftBehind: func(context.Context) string { return "CronJob x" },
	})
	if err != nil || !res.Removed || ran {
		t.Fatalf("escape hatch: %+v err=%v cleanupRan=%v", res, err, ran)
	}
	gone(t, w)
	if e := waitEvent(t, w, finalizer.CleanupSkippedReason); !strings.Contains(e.Note, "CronJob x") {
		t.Fatalf("event note %q", e.Note)
	}
}

func TestNotDeletingIsNoop(t *testing.T) {
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Name: "x", Finalizers: []string{name}}}
	f := &finalizer.Finalizer{Name: name, Deadline: time.Hour}
	res, err := f.Finalize(context.Background(), w, finalizer.Cleanup{Run: func(context.Context) (bool, error) {
		t.Fatal("cleanup ran for an object not being deleted")
		return false, nil
	}})
	if err != nil || res.Removed {
		t.Fatalf("%+v %v", res, err)
	}
}
