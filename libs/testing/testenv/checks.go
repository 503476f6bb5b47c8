package testenv

import (
	"context"
	"encoding/json"
	"reflect"

	"github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// What the operators' integration tests read back from the API server and
// the operator's metrics registry.

// Gone reports whether obj no longer exists (obj is read into).
func Gone(c client.Reader, obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
	}
}

// Current reads obj anew from c into a new object of its type.
func Current[T client.Object](g gomega.Gomega, c client.Reader, obj T) T {
	cur := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(T)
	g.Expect(c.Get(context.Background(), client.ObjectKeyFromObject(obj), cur)).To(gomega.Succeed())
	return cur
}

// KStatus is obj's kstatus as kubectl wait, Flux and Argo CD compute it
// (obj read anew from c).
func KStatus(g gomega.Gomega, c client.Client, obj client.Object) status.Status {
	cur := Current(g, c, obj)
	gvk, err := apiutil.GVKForObject(cur, c.Scheme())
	g.Expect(err).NotTo(gomega.HaveOccurred())
	cur.GetObjectKind().SetGroupVersionKind(gvk)
	raw, err := json.Marshal(cur)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	u := &unstructured.Unstructured{}
	g.Expect(u.UnmarshalJSON(raw)).To(gomega.Succeed())
	res, err := status.Compute(u)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return res.Status
}

// Events lists the Events in ns about the object of kind named name.
func Events(g gomega.Gomega, c client.Reader, ns, kind, name string) []eventsv1.Event {
	list := &eventsv1.EventList{}
	g.Expect(c.List(context.Background(), list, client.InNamespace(ns))).To(gomega.Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Regarding.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// EventReasons polls "Type/Reason" of each Event in ns about the object of
// kind named name.
func EventReasons(c client.Reader, ns, kind, name string) func(gomega.Gomega) []string {
	return func(g gomega.Gomega) []string {
		var out []string
		for _, e := range Events(g, c, ns, kind, name) {
			out = append(out, e.Type+"/"+e.Reason)
		}
		return out
	}
}

// MetricValue reads a counter or gauge (a histogram's sample count) of the
// operator's registry (controller-runtime's) by name and labels; -1 when no
// such series exists.
func MetricValue(g gomega.Gomega, name string, labels map[string]string) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue()
			case m.Gauge != nil:
				return m.GetGauge().GetValue()
			case m.Histogram != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return -1
}
