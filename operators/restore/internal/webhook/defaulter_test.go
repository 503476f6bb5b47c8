package webhook

import (
	"context"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cairnv1 "cairn.dev/apis/meta/v1"
	restorev1 "cairn.dev/apis/restore/v1"
)

func TestDefaulter(t *testing.T) {
	withOp := func(op admissionv1.Operation) context.Context {
		return admission.NewContextWithRequest(context.Background(),
			admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op}})
	}
	deleted := metav1.Now()
	cases := []struct {
		name         string
		ctx          context.Context
		finalizers   []string
		deleting     bool
		want         []string
		wantDefaults bool
	}{
		{name: "create adds it", ctx: withOp(admissionv1.Create), want: []string{restorev1.CleanupFinalizer}, wantDefaults: true},
		{name: "create keeps others", ctx: withOp(admissionv1.Create), finalizers: []string{"x.io/y"}, want: []string{"x.io/y", restorev1.CleanupFinalizer}, wantDefaults: true},
		{name: "create does not duplicate", ctx: withOp(admissionv1.Create), finalizers: []string{restorev1.CleanupFinalizer}, want: []string{restorev1.CleanupFinalizer}, wantDefaults: true},
		{name: "update changes nothing (the spec is immutable)", ctx: withOp(admissionv1.Update)},
		{name: "no admission request changes nothing", ctx: context.Background()},
		{name: "an object being deleted is left alone", ctx: withOp(admissionv1.Create), deleting: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rj := &restorev1.RestoreJob{
				ObjectMeta: metav1.ObjectMeta{Name: "r", Finalizers: slices.Clone(tc.finalizers)},
				Spec:       restorev1.RestoreJobSpec{Target: cairnv1.DatabaseRef{Engine: cairnv1.PostgresEngine}},
			}
			if tc.deleting {
				rj.DeletionTimestamp = &deleted
			}
			if err := NewDefaulter(nil).Default(tc.ctx, rj); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(rj.Finalizers, tc.want) {
				t.Errorf("finalizers %q, want %q", rj.Finalizers, tc.want)
			}
			defaulted := rj.Spec.MaxRetries != nil && rj.Spec.Target.Port == 5432
			if defaulted != tc.wantDefaults {
				t.Errorf("defaults applied: %v, want %v", defaulted, tc.wantDefaults)
			}
		})
	}
}
