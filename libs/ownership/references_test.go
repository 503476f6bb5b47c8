package ownership_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"cairn.dev/libs/internal/testtype"
	"cairn.dev/libs/ownership"
)

// A Widget references Secrets by name in an annotation ("a,b") and one
// ConfigMap in another; the ConfigMap may live in another namespace ("ns/name").
const (
	secretsAnnotation   = "test.cairn.dev/secrets"
	configMapAnnotation = "test.cairn.dev/configmap"
	refIndex            = "test.cairn.dev/references"
)

var secretKind = schema.GroupKind{Kind: "Secret"}
var configMapKind = schema.GroupKind{Kind: "ConfigMap"}

func widgetRefs(obj client.Object) []ownership.Reference {
	var out []ownership.Reference
	for _, n := range strings.Split(obj.GetAnnotations()[secretsAnnotation], ",") {
		if n != "" {
			out = append(out, ownership.Reference{GroupKind: secretKind, NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: n}})
		}
	}
	if cm := obj.GetAnnotations()[configMapAnnotation]; cm != "" {
		ns, name, _ := strings.Cut(cm, "/")
		out = append(out, ownership.Reference{GroupKind: configMapKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
	}
	return out
}

func referrer(t *testing.T, ns, name string, ann map[string]string, size int32) {
	t.Helper()
	w := &testtype.Widget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann}, Spec: testtype.WidgetSpec{Size: size}}
	if err := env.Client.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
}

func TestOneReferencedObjectEventEnqueuesExactlyItsReferrers(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := env.Namespace(ctx, "ref")
	g.Expect(err).NotTo(HaveOccurred())
	otherNS, err := env.Namespace(ctx, "ref")
	g.Expect(err).NotTo(HaveOccurred())

	referrer(t, ns, "w1", map[string]string{secretsAnnotation: "s1"}, 0)
	referrer(t, ns, "w2", map[string]string{secretsAnnotation: "s1,s2"}, 0)
	referrer(t, ns, "w3", map[string]string{configMapAnnotation: otherNS + "/s1"}, 0) // a ConfigMap of the same name, elsewhere
	referrer(t, ns, "w4", map[string]string{secretsAnnotation: "s1"}, 7)              // references s1, filtered out by keep
	for i := 0; i < 20; i++ {
		referrer(t, ns, fmt.Sprintf("bystander-%02d", i), map[string]string{secretsAnnotation: "s9"}, 0)
	}
	s1 := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"}, StringData: map[string]string{"password": "x"}}
	g.Expect(env.Client.Create(ctx, s1)).To(Succeed())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "s1"}}
	g.Expect(env.Client.Create(ctx, cm)).To(Succeed())

	// The operator's Secret reads must be metadata only.
	secretReads := &requestCounter{resource: "secrets"}
	cfg := rest.CopyConfig(env.Config)
	cfg.WrapTransport = secretReads.wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ownership.IndexReferences(ctx, mgr.GetFieldIndexer(), &testtype.Widget{}, refIndex, widgetRefs)).To(Succeed())
	unsized := func(o client.Object) bool { return o.(*testtype.Widget).Spec.Size == 0 }
	rec := &keyRecorder{ns: ns, keys: map[string]int{}}
	err = ctrl.NewControllerManagedBy(mgr).For(&testtype.Widget{}).
		WatchesMetadata(&corev1.Secret{}, ownership.EnqueueReferrers(mgr.GetClient(), refIndex, &testtype.WidgetList{}, secretKind, unsized)).
		Watches(&corev1.ConfigMap{}, ownership.EnqueueReferrers(mgr.GetClient(), refIndex, &testtype.WidgetList{}, configMapKind)).
		Named("reftest").Complete(rec)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = mgr.Start(ctx) }()

	g.Eventually(func() int { return len(rec.snapshot()) }).WithTimeout(60 * time.Second).Should(Equal(24))
	g.Consistently(func() int { return len(rec.snapshot()) }).WithTimeout(time.Second).Should(Equal(24))
	rec.reset()

	// One Secret event: exactly the Widgets that reference it (and pass keep).
	s1.Annotations = map[string]string{"touched": "1"}
	g.Expect(env.Client.Update(ctx, s1)).To(Succeed())
	g.Eventually(rec.snapshot).WithTimeout(30 * time.Second).Should(HaveLen(2))
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(Equal(map[string]int{"w1": 1, "w2": 1}))

	// A Secret referenced by one Widget, created now.
	rec.reset()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s2"}})).To(Succeed())
	g.Eventually(rec.snapshot).WithTimeout(30 * time.Second).Should(HaveKey("w2"))
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(Equal(map[string]int{"w2": 1}))

	// The ConfigMap in the other namespace wakes only w3, not the Secret's referrers.
	rec.reset()
	cm.Data = map[string]string{"k": "v"}
	g.Expect(env.Client.Update(ctx, cm)).To(Succeed())
	g.Eventually(rec.snapshot).WithTimeout(30 * time.Second).Should(HaveKey("w3"))
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(Equal(map[string]int{"w3": 1}))

	// An unreferenced Secret wakes nobody.
	rec.reset()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unreferenced"}})).To(Succeed())
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(BeEmpty())

	g.Expect(secretReads.fullReads.Load()).To(BeZero(), "Secrets were read in full: their data would be cached")
	g.Expect(secretReads.metaReads.Load()).To(BeNumerically(">", 0), "no metadata watch of Secrets was seen")

	// Referrers, directly.
	reqs, err := ownership.Referrers(ctx, mgr.GetClient(), refIndex, &testtype.WidgetList{},
		ownership.Reference{GroupKind: secretKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: "s1"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reqs).To(HaveLen(3)) // w1, w2, w4 (no keep)
}

// The index-free variant: the same answers for references within the
// referrer's namespace, none for a reference to another namespace.
func TestReferrersInNamespaceWithoutAnIndex(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := env.Namespace(ctx, "refns")
	g.Expect(err).NotTo(HaveOccurred())
	otherNS, err := env.Namespace(ctx, "refns")
	g.Expect(err).NotTo(HaveOccurred())

	referrer(t, ns, "w1", map[string]string{secretsAnnotation: "s1"}, 0)
	referrer(t, ns, "w2", map[string]string{secretsAnnotation: "s1,s2"}, 0)
	referrer(t, ns, "w4", map[string]string{secretsAnnotation: "s1"}, 7)      // references s1, filtered out by keep
	referrer(t, otherNS, "w5", map[string]string{secretsAnnotation: "s1"}, 0) // same name, other namespace
	for i := 0; i < 20; i++ {
		referrer(t, ns, fmt.Sprintf("bystander-%02d", i), map[string]string{secretsAnnotation: "s9"}, 0)
	}
	s1 := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s1"}, StringData: map[string]string{"password": "x"}}
	g.Expect(env.Client.Create(ctx, s1)).To(Succeed())

	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: env.Scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred())
	unsized := func(o client.Object) bool { return o.(*testtype.Widget).Spec.Size == 0 }
	rec := &keyRecorder{ns: ns, keys: map[string]int{}}
	err = ctrl.NewControllerManagedBy(mgr).For(&testtype.Widget{}).
		WatchesMetadata(&corev1.Secret{}, ownership.EnqueueReferrersInNamespace(mgr.GetClient(), &testtype.WidgetList{}, secretKind, widgetRefs, unsized)).
		Named("refnstest").Complete(rec)
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = mgr.Start(ctx) }()

	g.Eventually(func() int { return len(rec.snapshot()) }).WithTimeout(60 * time.Second).Should(Equal(23))
	g.Consistently(func() int { return len(rec.snapshot()) }).WithTimeout(time.Second).Should(Equal(23))
	rec.reset()

	// One Secret event: exactly the Widgets of its namespace that reference it (and pass keep).
	s1.Annotations = map[string]string{"touched": "1"}
	g.Expect(env.Client.Update(ctx, s1)).To(Succeed())
	g.Eventually(rec.snapshot).WithTimeout(30 * time.Second).Should(HaveLen(2))
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(Equal(map[string]int{"w1": 1, "w2": 1}))

	// A Secret referenced by one Widget, created now.
	rec.reset()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s2"}})).To(Succeed())
	g.Eventually(rec.snapshot).WithTimeout(30 * time.Second).Should(HaveKey("w2"))
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(Equal(map[string]int{"w2": 1}))

	// An unreferenced Secret wakes nobody.
	rec.reset()
	g.Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "unreferenced"}})).To(Succeed())
	g.Consistently(rec.snapshot).WithTimeout(2 * time.Second).Should(BeEmpty())

	// Directly: no keep gives w1, w2, w4; the other namespace's s1 gives w5 only.
	reqs, err := ownership.ReferrersInNamespace(ctx, mgr.GetClient(), &testtype.WidgetList{},
		ownership.Reference{GroupKind: secretKind, NamespacedName: types.NamespacedName{Namespace: ns, Name: "s1"}}, widgetRefs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reqs).To(HaveLen(3))
	reqs, err = ownership.ReferrersInNamespace(ctx, mgr.GetClient(), &testtype.WidgetList{},
		ownership.Reference{GroupKind: secretKind, NamespacedName: types.NamespacedName{Namespace: otherNS, Name: "s1"}}, widgetRefs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reqs).To(ConsistOf(ctrl.Request{NamespacedName: types.NamespacedName{Namespace: otherNS, Name: "w5"}}))
}
