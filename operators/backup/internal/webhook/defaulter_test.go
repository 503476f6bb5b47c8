package webhook

import (
	"context"
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	backupv1 "cairn.dev/apis/backup/v1"
)

func TestDefaulterFinalizer(t *testing.T) {
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
		{name: "create adds it", ctx: withOp(admissionv1.Create), want: []string{backupv1.CleanupFinalizer}, wantDefaults: true},
		{name: "create keeps others", ctx: withOp(admissionv1.Create), finalizers: []string{"x.io/y"}, want: []string{"x.io/y", backupv1.CleanupFinalizer}, wantDefaults: true},
		{name: "create does not duplicate", ctx: withOp(admissionv1.Create), finalizers: []string{backupv1.CleanupFinalizer}, want: []string{backupv1.CleanupFinalizer}, wantDefaults: true},
		{name: "update defaults, leaves a removed finalizer removed", ctx: withOp(admissionv1.Update), want: nil, wantDefaults: true},
		{name: "no admission request changes nothing", ctx: context.Background(), want: nil},
		{name: "an object being deleted is left alone", ctx: withOp(admissionv1.Update), deleting: true, want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bj := &backupv1.BackupJob{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Finalizers: slices.Clone(tc.finalizers)}}
			if tc.deleting {
				bj.DeletionTimestamp = &deleted
			}
			if err := NewDefaulter(nil).Default(tc.ctx, bj); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(bj.Finalizers, tc.want) {
				t.Errorf("finalizers: got %q, want %q", bj.Finalizers, tc.want)
			}
			if defaulted := bj.Spec.TimeZone == backupv1.DefaultTimeZone; defaulted != tc.wantDefaults {
				t.Errorf("defaults applied: %v (timeZone %q), want %v", defaulted, bj.Spec.TimeZone, tc.wantDefaults)
			}
		})
	}
}
