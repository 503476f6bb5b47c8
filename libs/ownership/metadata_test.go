package ownership_test

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/ownership"
)

// requestCounter counts a client's writes and its reads of whole objects
// (not metadata) of one resource.
type requestCounter struct {
	resource   string // e.g. "cronjobs"
	writes     atomic.Int64
	fullReads  atomic.Int64
	otherReads atomic.Int64
	// metaReads counts metadata-only reads of the resource.
	metaReads atomic.Int64
	// fullLists counts lists and watches of whole objects; never reset.
	fullLists atomic.Int64
}

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		switch {
		case r.Method != http.MethodGet:
			c.writes.Add(1)
		case strings.Contains(r.URL.Path, "/"+c.resource) && !strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata"):
			c.fullReads.Add(1)
			if strings.HasSuffix(r.URL.Path, "/"+c.resource) {
				c.fullLists.Add(1)
			}
		case strings.Contains(r.URL.Path, "/"+c.resource):
			c.metaReads.Add(1)
		default:
			c.otherReads.Add(1)
		}
		return rt.RoundTrip(r)
	})
}

func (c *requestCounter) reset() {
	c.writes.Store(0)
	c.fullReads.Store(0)
	c.otherReads.Store(0)
	c.metaReads.Store(0)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingClient is an uncached client whose requests c counts.
func countingClient(t *testing.T, c *requestCounter) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = c.wrap
	cl, err := client.New(cfg, client.Options{Scheme: env.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// metaKind is one kind of child the metadata-only mode is tried with.
type metaKind struct {
	resource string
	desired  func(ns string) client.Object
	// drift edits the child's spec out of band, also removing an optional
	// field desired sets (absent from the response: must still be seen).
	drift func(obj client.Object)
	// matches reports whether a child read from the API server is back to desired.
	matches func(obj client.Object) bool
	// annotationsBump: the API server bumps the generation on an
	// annotation change.
	annotationsBump bool
}

var metaKinds = map[string]metaKind{
	"CronJob": {
		resource: "cronjobs",
		desired:  func(ns string) client.Object { return desiredCronJob(ns, "0 2 * * *") },
		drift: func(o client.Object) {
			cj := o.(*batchv1.CronJob)
			cj.Spec.Schedule = "* * * * *"
			cj.Spec.TimeZone = nil
			cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image = "evil:1"
		},
		matches: func(o client.Object) bool {
			cj := o.(*batchv1.CronJob)
			return cj.Spec.Schedule == "0 2 * * *" && ptr.Deref(cj.Spec.TimeZone, "") == "Asia/Shanghai" &&
				cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image == "agent:1"
		},
	},
	"Deployment": {
		resource: "deployments",
		desired: func(ns string) client.Object {
			sel := map[string]string{ownerLabel: "w"}
			return &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-backup", Labels: map[string]string{ownerLabel: "w"}},
				Spec: appsv1.DeploymentSpec{
					Replicas:             ptr.To[int32](2),
					RevisionHistoryLimit: ptr.To[int32](3),
					Selector:             &metav1.LabelSelector{MatchLabels: sel},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: sel},
						Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "agent:1"}}},
					},
				},
			}
		},
		drift: func(o client.Object) {
			d := o.(*appsv1.Deployment)
			d.Spec.Replicas = ptr.To[int32](5)
			d.Spec.Template.Spec.Containers[0].Image = "evil:1"
		},
		matches: func(o client.Object) bool {
			d := o.(*appsv1.Deployment)
			return *d.Spec.Replicas == 2 && d.Spec.Template.Spec.Containers[0].Image == "agent:1"
		},
		annotationsBump: true,
	},
	"Widget": {
		resource: "widgets",
		desired: func(ns string) client.Object {
			return &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "w-backup", Labels: map[string]string{ownerLabel: "w"}},
				Spec: testtype.WidgetSpec{Size: 3}}
		},
		drift:   func(o client.Object) { o.(*testtype.Widget).Spec.Size = 0 }, // omitempty: absent from the response
		matches: func(o client.Object) bool { return o.(*testtype.Widget).Spec.Size == 3 },
	},
}

func live(t *testing.T, obj client.Object) client.Object {
	t.Helper()
	out := obj.DeepCopyObject().(client.Object)
	if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMetadataOnlyEnsure(t *testing.T) {
	for name, k := range metaKinds {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			ns, err := env.Namespace(ctx, "meta")
			if err != nil {
				t.Fatal(err)
			}
			w := owner(t, ns, "w")
			counter := &requestCounter{resource: k.resource}
			c := countingClient(t, counter)
			a := &ownership.Applier{Client: c, APIReader: c, Scheme: env.Scheme, MetadataOnly: true, AnnotationPrefix: "backup.cairn.dev"}
			if a.HashAnnotation() != "backup.cairn.dev/spec-hash" || a.GenerationAnnotation() != "backup.cairn.dev/spec-generation" {
				t.Fatalf("annotation names %s, %s", a.HashAnnotation(), a.GenerationAnnotation())
			}
			ensure := func(want ownership.Op) {
				t.Helper()
				op, err := a.Ensure(ctx, w, k.desired(ns))
				if err != nil || op != want {
					t.Fatalf("Ensure: %s %v, want %s", op, err, want)
				}
			}
			// annotated says the child carries the hash of desired and its
			// current generation.
			annotated := func() client.Object {
				t.Helper()
				obj := live(t, k.desired(ns))
				d := k.desired(ns)
				if err := ownership.SetController(w, d, env.Scheme); err != nil {
					t.Fatal(err)
				}
				hash, err := ownership.Hash(d, "backup.cairn.dev")
				if err != nil {
					t.Fatal(err)
				}
				ann := obj.GetAnnotations()
				if ann["backup.cairn.dev/spec-hash"] != hash || ann["backup.cairn.dev/spec-generation"] != strconv.FormatInt(obj.GetGeneration(), 10) {
					t.Fatalf("annotations %v, want hash %s at generation %d", ann, hash, obj.GetGeneration())
				}
				if !metav1.IsControlledBy(obj, w) {
					t.Fatal("controller reference missing")
				}
				return obj
			}
			atRest := func() {
				t.Helper()
				counter.reset()
				ensure(ownership.Unchanged)
				if n, f := counter.writes.Load(), counter.fullReads.Load(); n != 0 || f != 0 {
					t.Fatalf("Ensure of an unchanged child: %d writes, %d full reads; want 0 and 0 (metadata only)", n, f)
				}
			}

			ensure(ownership.Created)
			annotated()
			atRest()

			// Drift of the spec (the generation moves): read in full, reverted.
			obj := live(t, k.desired(ns))
			k.drift(obj)
			if err := env.Client.Update(ctx, obj); err != nil {
				t.Fatal(err)
			}
			counter.reset()
			ensure(ownership.Updated)
			if counter.fullReads.Load() != 1 {
				t.Fatalf("drift: %d full reads, want 1", counter.fullReads.Load())
			}
			if !k.matches(annotated()) {
				t.Fatalf("drift not reverted: %+v", live(t, k.desired(ns)))
			}
			atRest()

			// A label desired sets is removed (metadata only: the generation
			// stays): put back.
			obj = live(t, k.desired(ns))
			labels := obj.GetLabels()
			delete(labels, ownerLabel)
			obj.SetLabels(labels)
			if err := env.Client.Update(ctx, obj); err != nil {
				t.Fatal(err)
			}
			ensure(ownership.Updated)
			if annotated().GetLabels()[ownerLabel] != "w" {
				t.Fatal("label not put back")
			}
			atRest()

			// Stale annotations (removed, or written by an older operator):
			// one metadata patch refreshes them; the spec is left alone.
			obj = live(t, k.desired(ns))
			ann := obj.GetAnnotations()
			ann["backup.cairn.dev/spec-hash"] = "old"
			delete(ann, "backup.cairn.dev/spec-generation")
			obj.SetAnnotations(ann)
			if err := env.Client.Update(ctx, obj); err != nil {
				t.Fatal(err)
			}
			gen := obj.GetGeneration()
			if k.annotationsBump {
				gen++ // Deployment counts annotation changes
			}
			counter.reset()
			ensure(ownership.Unchanged)
			if n := counter.writes.Load(); n != 1 {
				t.Fatalf("stale annotations: %d writes, want 1 (the annotation patch)", n)
			}
			if got := annotated().GetGeneration(); got != gen {
				t.Fatalf("refreshing annotations left the generation at %d, want %d", got, gen)
			}
			atRest()

			// A change of desired: updated, and at rest after.
			changed := k.desired(ns)
			labels = changed.GetLabels()
			labels["extra"] = "1"
			changed.SetLabels(labels)
			if op, err := a.Ensure(ctx, w, changed); err != nil || op != ownership.Updated {
				t.Fatalf("Ensure of a changed desired: %s %v", op, err)
			}
			counter.reset()
			if op, err := a.Ensure(ctx, w, changed); err != nil || op != ownership.Unchanged || counter.writes.Load() != 0 {
				t.Fatalf("Ensure of the changed desired again: %s %v, %d writes", op, err, counter.writes.Load())
			}
		})
	}
}

func TestMetadataOnlyNeverAdopts(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "meta")
	if err != nil {
		t.Fatal(err)
	}
	w := owner(t, ns, "w")
	theirs := desiredCronJob(ns, "5 5 * * *")
	if err := env.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	a := &ownership.Applier{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme, MetadataOnly: true}
	_, err = a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *"))
	var nc *ownership.NotControlledError
	if !errors.As(err, &nc) || nc.Kind != "CronJob" {
		t.Fatalf("Ensure over someone else's CronJob: %v, want NotControlledError", err)
	}
	got := live(t, theirs).(*batchv1.CronJob)
	if got.Spec.Schedule != "5 5 * * *" || len(got.Annotations) != 0 || len(got.OwnerReferences) != 0 {
		t.Fatalf("someone else's CronJob was changed: %+v", got.ObjectMeta)
	}

	// Another owner's child: the same.
	other := owner(t, ns, "other")
	b := &ownership.Applier{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme, MetadataOnly: true}
	mine := desiredCronJob(ns, "0 2 * * *")
	mine.Name = "mine"
	if op, err := b.Ensure(ctx, other, mine); err != nil || op != ownership.Created {
		t.Fatalf("%s %v", op, err)
	}
	mine = desiredCronJob(ns, "0 2 * * *")
	mine.Name = "mine"
	if _, err := a.Ensure(ctx, w, mine); !errors.As(err, &nc) {
		t.Fatalf("Ensure over another owner's CronJob: %v, want NotControlledError", err)
	}
}

// A kind whose API server does not maintain metadata.generation cannot be
// kept from its metadata: Ensure says so instead of missing edits silently.
func TestMetadataOnlyRefusesKindsWithoutGeneration(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "meta")
	if err != nil {
		t.Fatal(err)
	}
	w := owner(t, ns, "w")
	a := &ownership.Applier{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme, MetadataOnly: true}
	_, err = a.Ensure(ctx, w, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cm"}, Data: map[string]string{"k": "v"}})
	if err == nil || !strings.Contains(err.Error(), "metadata.generation") {
		t.Fatalf("Ensure of a ConfigMap in metadata-only mode: %v, want an error about metadata.generation", err)
	}
}

// An optional field desired sets and someone removed (absent from the
// response) is drift, and put back.
func TestEnsureSeesARemovedOptionalField(t *testing.T) {
	ctx := context.Background()
	ns, err := env.Namespace(ctx, "own")
	if err != nil {
		t.Fatal(err)
	}
	w := owner(t, ns, "w")
	a := &ownership.Applier{Client: env.Client, APIReader: env.Client, Scheme: env.Scheme}
	if op, err := a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *")); err != nil || op != ownership.Created {
		t.Fatalf("%s %v", op, err)
	}
	cj := live(t, desiredCronJob(ns, "")).(*batchv1.CronJob)
	cj.Spec.TimeZone = nil
	if err := env.Client.Update(ctx, cj); err != nil {
		t.Fatal(err)
	}
	if op, err := a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *")); err != nil || op != ownership.Updated {
		t.Fatalf("Ensure after timeZone was removed: %s %v, want Updated", op, err)
	}
	if cj = live(t, cj).(*batchv1.CronJob); ptr.Deref(cj.Spec.TimeZone, "") != "Asia/Shanghai" {
		t.Fatalf("timeZone not put back: %v", cj.Spec.TimeZone)
	}
}

// With a manager whose cache holds CronJobs as metadata only (as the backup
// operator's does), Ensure at rest reads nothing but cached metadata, and the
// operator never lists or watches whole CronJobs.
func TestMetadataOnlyWithACache(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := env.Namespace(ctx, "meta")
	g.Expect(err).NotTo(HaveOccurred())
	w := owner(t, ns, "w")

	counter := &requestCounter{resource: "cronjobs"}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = counter.wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Cache: cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}}})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = mgr.Start(ctx) }()
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	a := &ownership.Applier{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Scheme: env.Scheme, MetadataOnly: true}

	op, err := a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(op).To(Equal(ownership.Created))
	// Once the cache has seen it: at rest.
	g.Eventually(func(g Gomega) {
		counter.reset()
		op, err := a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(op).To(Equal(ownership.Unchanged))
		g.Expect(counter.writes.Load()).To(BeZero())
		g.Expect(counter.fullReads.Load()).To(BeZero())
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// An edit through someone else: the cache's metadata shows the new
	// generation; the CronJob is read once in full and reverted.
	cj := live(t, desiredCronJob(ns, "")).(*batchv1.CronJob)
	cj.Spec.Schedule = "* * * * *"
	g.Expect(env.Client.Update(ctx, cj)).To(Succeed())
	g.Eventually(func() (ownership.Op, error) { return a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *")) }).
		WithTimeout(30 * time.Second).Should(Equal(ownership.Updated))
	g.Expect(live(t, cj).(*batchv1.CronJob).Spec.Schedule).To(Equal("0 2 * * *"))
	g.Expect(counter.fullReads.Load()).To(BeNumerically(">=", 1)) // the GET past the cache
	g.Eventually(func(g Gomega) {
		counter.reset()
		op, err := a.Ensure(ctx, w, desiredCronJob(ns, "0 2 * * *"))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(op).To(Equal(ownership.Unchanged))
		g.Expect(counter.writes.Load()).To(BeZero())
		g.Expect(counter.fullReads.Load()).To(BeZero())
	}).WithTimeout(30 * time.Second).Should(Succeed())
	g.Expect(counter.fullLists.Load()).To(BeZero(), "the cache listed or watched whole CronJobs")
}
