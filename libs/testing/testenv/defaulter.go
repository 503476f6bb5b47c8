package testenv

import (
	"context"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"cairn.dev/libs/admit"
)

// WithOperation is a context carrying an admission request of op (what a
// webhook's Default and Validate read).
func WithOperation(op admissionv1.Operation) context.Context {
	return admission.NewContextWithRequest(context.Background(),
		admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op}})
}

// CheckDefaulter tests a kind's defaulting webhook d (libs/admit) on new
// objects (newObj, without finalizers): on create it adds the kind's
// cleanup finalizer once, keeping others, and applies the defaults
// (defaulted says whether they were); on update it applies the defaults
// and adds no finalizer when the kind is Mutable, and changes nothing
// otherwise; without an admission request, or on an object being deleted,
// it changes nothing.
func CheckDefaulter[T client.Object](t *testing.T, d *admit.Defaulter[T], newObj func() T, defaulted func(T) bool) {
	t.Helper()
	fin := d.Kind.Finalizer
	deleted := metav1.Now()
	for _, tc := range []struct {
		name         string
		ctx          context.Context
		finalizers   []string
		deleting     bool
		want         []string
		wantDefaults bool
	}{
		{name: "create adds the finalizer", ctx: WithOperation(admissionv1.Create), want: []string{fin}, wantDefaults: true},
		{name: "create keeps others", ctx: WithOperation(admissionv1.Create), finalizers: []string{"x.io/y"}, want: []string{"x.io/y", fin}, wantDefaults: true},
		{name: "create does not duplicate", ctx: WithOperation(admissionv1.Create), finalizers: []string{fin}, want: []string{fin}, wantDefaults: true},
		{name: "update defaults a mutable kind, adds no finalizer", ctx: WithOperation(admissionv1.Update), wantDefaults: d.Kind.Mutable},
		{name: "no admission request changes nothing", ctx: context.Background()},
		{name: "an object being deleted is left alone", ctx: WithOperation(admissionv1.Update), deleting: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := newObj()
			obj.SetFinalizers(slices.Clone(tc.finalizers))
			if tc.deleting {
				obj.SetDeletionTimestamp(&deleted)
			}
			if err := d.Default(tc.ctx, obj); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(obj.GetFinalizers(), tc.want) {
				t.Errorf("finalizers %q, want %q", obj.GetFinalizers(), tc.want)
			}
			if got := defaulted(obj); got != tc.wantDefaults {
				t.Errorf("defaults applied: %v, want %v", got, tc.wantDefaults)
			}
		})
	}
}
